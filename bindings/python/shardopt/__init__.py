"""shardopt: distributed and sharded optimizers (DDP, ZeRO-1/2, FSDP, hybrid, Local SGD, async SGD, elastic),
with gradient compression and pipeline parallelism, over the library's C ABI.

The classes mirror AiDotNet.DistributedTraining in Python naming: `from shardopt import *` in place of
`using AiDotNet.DistributedTraining;`. The element type is the model's dtype (numpy.float64 for `double`,
numpy.float32 for `float`), so no generic arguments are written. They sit on `shardopt.native`, the SWIG
module of the C ABI (bindings/python/shardopt_python.i); the training policy, its defaults and its checks
are the library's, the same in every language. Errors: see shardopt.errors."""
from . import shardopt_native as native
from .backends import (CommunicationBackend, InMemoryCommunicationBackend, NcclCommunicationBackend,
                       ReductionOperation, UcxCommunicationBackend, launch_in_memory)
from .errors import (CollectiveTimeoutError, CorruptDataError, FileIOError, InternalError, InvalidArgumentError,
                     InvalidStateError, MismatchError, ObjectDisposedError, OutOfMemoryError, PeerLostError,
                     ShardoptError, UnsupportedError)
from .schedules import (ConstantSchedule, CosineAnnealingSchedule, LambdaSchedule, LearningRateSchedule,
                        StepDecaySchedule, WarmupSchedule)
from .optimizers import (AdagradOptimizer, AdagradOptimizerOptions, AdamOptimizer, AdamOptimizerOptions,
                         AdamWOptimizer, AdamWOptimizerOptions, LambOptimizer, LambOptimizerOptions,
                         MomentumOptimizer, MomentumOptimizerOptions, Optimizer, OptimizerOptions,
                         RootMeanSquarePropagationOptimizer, RootMeanSquarePropagationOptimizerOptions,
                         StochasticGradientDescentOptimizer, StochasticGradientDescentOptimizerOptions)
from .sharding import (Dataset, DatasetResult, DDPOptimizer, FSDPOptimizer, GradientCompression,
                       GradientCompressionOptimizer, HybridShardedOptimizer, LocalSGDOptimizer, MemoryStats,
                       OptimizationInputData, OptimizationResult, ParameterLayout, ShardedOptimizer,
                       ShardingConfiguration, StepResult, ZeRO1Optimizer, ZeRO2Optimizer, ZeRO3Optimizer)
from .async_sgd import AsyncSGDOptimizer
from .elastic import ElasticOptimizer
from ._views import NativeArray
from .models import Model
from .pipeline import PipelineBatchResult, PipelineCall, PipelineRunner, PipelineSchedule, PipelineStage

IShardedOptimizer = ShardedOptimizer


def version():
    v = native.shardopt_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


__version__ = version()
