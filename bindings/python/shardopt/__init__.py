"""shardopt: distributed and sharded optimizers (DDP, ZeRO-1/2, FSDP, hybrid, Local SGD, async SGD), with
optional gradient compression (bf16/fp16, int8/int4, top-k, PowerSGD), and elastic training that
resumes at another world size (ElasticOptimizer).

The classes mirror AiDotNet.DistributedTraining in Python naming. They sit on the SWIG module
`shardopt.shardopt_native`, generated at build time from bindings/shardopt.i over the C ABI.

Errors: ValueError (invalid argument), RuntimeError (invalid state, timeout, mismatch, lost peer),
OSError (I/O, corrupt data), NotImplementedError (not built in / not in the ABI yet),
MemoryError; the message starts with the library's status name (SHARDOPT_ERR_...).
A closed optimizer or backend, and every view of an optimizer's memory once it is closed, raise
ObjectDisposedError (a ValueError, as for a closed file, and a RuntimeError).

Porting from AiDotNet: `from shardopt import *` (or `import shardopt as so`) in place of
`using AiDotNet.DistributedTraining;`; the element type is the model's dtype (numpy.float64 for
`double`, numpy.float32 for `float`), so no generic arguments are written.
"""
from . import shardopt_native as native
from .backends import (CommunicationBackend, InMemoryCommunicationBackend, NcclCommunicationBackend,
                       ReductionOperation, UcxCommunicationBackend, launch_in_memory)
from .optimizers import (AdagradOptimizer, AdagradOptimizerOptions, AdamOptimizer, AdamOptimizerOptions,
                         AdamWOptimizer, AdamWOptimizerOptions, LambOptimizer, LambOptimizerOptions,
                         MomentumOptimizer, MomentumOptimizerOptions, Optimizer, OptimizerOptions,
                         RootMeanSquarePropagationOptimizer, RootMeanSquarePropagationOptimizerOptions,
                         StochasticGradientDescentOptimizer, StochasticGradientDescentOptimizerOptions)
from .sharding import (DatasetResult, DDPOptimizer, FSDPOptimizer, GradientCompression, GradientCompressionOptimizer,
                       HybridShardedOptimizer, LocalSGDOptimizer,
                       MemoryStats, OptimizationInputData, OptimizationResult, ParameterLayout, ShardedOptimizer,
                       ShardingConfiguration, StepResult, ZeRO1Optimizer, ZeRO2Optimizer, ZeRO3Optimizer)
from .async_sgd import AsyncSGDOptimizer
from .elastic import ElasticOptimizer
from ._views import NativeArray, ObjectDisposedError
from .models import Model
from .pipeline import PipelineBatchResult, PipelineCall, PipelineRunner, PipelineSchedule, PipelineStage
from .schedules import (ConstantSchedule, CosineAnnealingSchedule, LambdaSchedule, LearningRateSchedule,
                        StepDecaySchedule, WarmupSchedule)

IShardedOptimizer = ShardedOptimizer


def version():
    v = native.shardopt_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


__version__ = version()
