"""shardopt: distributed and sharded optimizers over the library's C ABI (`shardopt.native`), mirroring
AiDotNet.DistributedTraining in Python naming: `from shardopt import *`. See bindings/python/README.md."""
from . import shardopt_native as native
from .backends import (CommunicationBackend, InMemoryCommunicationBackend, NCCLCommunicationBackend,
                       NcclCommunicationBackend, ReductionOperation, StagedCommunicationBackend, UcxCommunicationBackend)
from ._core import (CollectiveTimeoutError, CorruptDataError, FileIOError, InternalError, InvalidArgumentError,
                     InvalidStateError, MismatchError, ObjectDisposedError, OutOfMemoryError, PeerLostError,
                     ShardoptError, UnsupportedError)
from .schedules import (ConstantSchedule, CosineAnnealingSchedule, LambdaSchedule, LearningRateSchedule,
                        StepDecaySchedule, WarmupSchedule)
from .optimizers import (AdaDeltaOptimizer, AdaDeltaOptimizerOptions, AdafactorOptimizer, AdafactorOptimizerOptions,
                         AdagradOptimizer, AdagradOptimizerOptions, AdaMaxOptimizer, AdaMaxOptimizerOptions,
                         AdamOptimizer, AdamOptimizerOptions, AdamWOptimizer, AdamWOptimizerOptions, LambOptimizer,
                         LambOptimizerOptions, LionOptimizer, LionOptimizerOptions, MomentumOptimizer,
                         MomentumOptimizerOptions, MuonLearningRateAdjustment, MuonOptimizer, MuonOptimizerOptions,
                         NadamOptimizer, NadamOptimizerOptions, Optimizer, OptimizerOptions,
                         RootMeanSquarePropagationOptimizer, RootMeanSquarePropagationOptimizerOptions, StatePrecision,
                         StochasticGradientDescentOptimizer, StochasticGradientDescentOptimizerOptions)
from .configuration import (Dataset, DatasetResult, GradientCompression, MemorySpace, MemoryStats, Model,
                            OptimizationInputData,
                            OptimizationResult, ParameterLayout, ShardingConfiguration, StepResult)
from .sharding import (AsyncSGDOptimizer, DDPOptimizer, ElasticOptimizer, FSDPOptimizer, GradientCompressionOptimizer,
                       HybridShardedOptimizer, LocalSGDOptimizer, ShardedOptimizer, ZeRO1Optimizer, ZeRO2Optimizer,
                       ZeRO3Optimizer)
from ._core import DeviceArray, NativeArray
from .pipeline import PipelineBatchResult, PipelineCall, PipelineRunner, PipelineSchedule, PipelineStage
from .planning import Plan, plan, rank_memory

IShardedOptimizer = ShardedOptimizer
__version__ = "{}.{}.{}".format(native.shardopt_version() // 10000, native.shardopt_version() // 100 % 100,
                                native.shardopt_version() % 100)
