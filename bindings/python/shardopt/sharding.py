"""ShardingConfiguration and the sharded optimizers (AiDotNet.DistributedTraining, Python naming)."""
import contextlib
import os
from dataclasses import dataclass, field

import numpy as np

from . import shardopt_native as _n
from ._native_resource import NativeResource
from .backends import CommunicationBackend
from .optimizers import Optimizer

__all__ = ["ParameterLayout", "ShardingConfiguration", "OptimizationInputData", "OptimizationResult",
           "StepResult", "MemoryStats", "ShardedOptimizer", "DDPOptimizer", "ZeRO1Optimizer", "ZeRO2Optimizer",
           "FSDPOptimizer", "ZeRO3Optimizer", "HybridShardedOptimizer", "LocalSGDOptimizer"]

_FLOAT_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64}


class ParameterLayout:
    """The model's tensors, in order: name and element count. end_bucket() closes a gradient bucket
    (an FSDP unit); otherwise tensors are grouped into buckets of the configuration's
    minimum_parameter_group_size elements."""

    def __init__(self, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"parameters must be float32 or float64, not {self.dtype}")
        self.tensors = []  # (name, count, tp_replicated, ends_bucket)

    def add(self, name, count, tp_replicated=False):
        self.tensors.append([str(name), int(count), bool(tp_replicated), False])
        return self

    def end_bucket(self):
        if self.tensors:
            self.tensors[-1][3] = True
        return self

    @property
    def element_count(self):
        return sum(t[1] for t in self.tensors)

    def _native(self, bucket_elements):
        p = _n.so_params_create(_FLOAT_DTYPES[self.dtype], bucket_elements * self.dtype.itemsize)
        try:
            for name, count, tp, ends in self.tensors:
                _n.so_params_add(p, name, count, int(tp))
                if ends:
                    _n.so_params_end_bucket(p)
        except BaseException:
            _n.so_params_destroy(p)
            raise
        return p


class ShardingConfiguration:
    """How a sharded optimizer communicates (AiDotNet's ShardingConfiguration<T>).

    - learning_rate: when given, the sharded optimizer steps with it; when None (the default here,
      0.01 in AiDotNet) the wrapped optimizer's options' learning_rate is used, so there is one rate.
    - auto_sync_gradients (True): False turns DDP/ZeRO-1 into Local SGD: no gradient
      communication per step, parameters averaged every `local_steps` steps. Sharded strategies
      (ZeRO-2, FSDP, hybrid) need per-step reduction and raise ValueError.
    - minimum_parameter_group_size (1024): the gradient bucket (and FSDP unit) size in elements;
      buckets are reduced as units, so larger means fewer, bigger messages.
    - enable_gradient_compression (False): the C ABI has no compressed reduction yet, so setting it
      True raises NotImplementedError instead of storing a flag that does nothing.
    """

    def __init__(self, backend, learning_rate=None):
        if backend is None:
            raise TypeError("backend must not be None")
        if not isinstance(backend, CommunicationBackend):
            raise TypeError(f"backend must be a CommunicationBackend, not {type(backend).__name__}")
        self.communication_backend = backend
        self._learning_rate = None
        self.learning_rate = learning_rate
        self.auto_sync_gradients = True
        self._group = 1024
        self.local_steps = 4
        self.gradient_accumulation_steps = 1
        self.max_grad_norm = 0.0

    @property
    def learning_rate(self):
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        if value is not None and not value > 0:
            raise ValueError(f"learning_rate must be > 0 (got {value})")
        self._learning_rate = None if value is None else float(value)

    @property
    def minimum_parameter_group_size(self):
        return self._group

    @minimum_parameter_group_size.setter
    def minimum_parameter_group_size(self, value):
        if int(value) < 1:
            raise ValueError(f"minimum_parameter_group_size must be >= 1 (got {value})")
        self._group = int(value)

    @property
    def enable_gradient_compression(self):
        return False

    @enable_gradient_compression.setter
    def enable_gradient_compression(self, value):
        if value:
            raise NotImplementedError("gradient compression is not in the shardopt C ABI yet; "
                                      "use a larger minimum_parameter_group_size for fewer messages")

    @classmethod
    def create_default(cls, backend):
        return cls(backend)

    @classmethod
    def create_for_high_bandwidth(cls, backend):
        """Small buckets (512 elements): more, earlier reductions overlapping the backward pass."""
        c = cls(backend)
        c.minimum_parameter_group_size = 512
        return c

    @classmethod
    def create_for_low_bandwidth(cls, backend):
        """Large buckets (4096 elements): fewer messages. (AiDotNet also turns compression on;
        shardopt has none yet, see enable_gradient_compression.)"""
        c = cls(backend)
        c.minimum_parameter_group_size = 4096
        return c


@dataclass
class OptimizationInputData:
    """The data set is the sample indices [0, num_samples), split across data-parallel ranks."""
    num_samples: int
    batch_size: int = 0          # global batch per step; 0 = the whole data set
    epochs: int = 1
    max_iterations: int = 0      # 0 = no limit beyond epochs
    patience: int = 0            # epochs without improvement before stopping; 0 = never
    min_delta: float = 0.0


@dataclass
class OptimizationResult:
    best_solution: np.ndarray
    best_fitness_score: float
    iterations: int
    fitness_history: list = field(default_factory=list)
    stopped_early: bool = False


@dataclass
class StepResult:
    applied: bool
    skipped_nonfinite: bool
    accumulating: bool
    grad_norm: float
    # where step() spent its time, in seconds: waiting for gradient reductions, the update, the
    # collectives after it (ZeRO parameter allgather, Local SGD averaging)
    reduce_wait_seconds: float = 0.0
    update_seconds: float = 0.0
    post_update_seconds: float = 0.0


@dataclass
class MemoryStats:
    params_bytes: int
    grads_bytes: int
    optimizer_state_bytes: int
    buffer_bytes: int
    peak_buffer_bytes: int
    total_bytes: int


class ShardedOptimizer(NativeResource):
    """IShardedOptimizer: wraps a base optimizer and runs it over the configuration's backend.

    The model's parameter layout is given to the constructor (`layout=`) or later to
    initialize(); both are collective (every rank, same layout and initial values). Pass
    `parameters=` (a float array of padded_count elements) to keep the parameters in your own
    array without copies (DDP, ZeRO-1, ZeRO-2, Local SGD).
    """

    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, layout=None, initial=None, parameters=None):
        if wrapped_optimizer is None:
            raise TypeError("wrapped_optimizer must not be None")
        if sharding_configuration is None:
            raise TypeError("sharding_configuration must not be None")
        if not isinstance(wrapped_optimizer, Optimizer):
            raise TypeError(f"wrapped_optimizer must be an Optimizer, not {type(wrapped_optimizer).__name__}")
        if not isinstance(sharding_configuration, ShardingConfiguration):
            raise TypeError("sharding_configuration must be a ShardingConfiguration")
        self._wrapped = wrapped_optimizer
        self._config = sharding_configuration
        self._handle = None
        self._external = None
        self._sharding = self._sharding_options()  # validates the configuration now
        if layout is not None:
            self.initialize(layout, initial, parameters)

    # ---- IShardedOptimizer ----
    @property
    def rank(self):
        return self._config.communication_backend.rank

    @property
    def world_size(self):
        return self._config.communication_backend.world_size

    @property
    def wrapped_optimizer(self):
        return self._wrapped

    @property
    def sharding_configuration(self):
        return self._config

    def get_options(self):
        return self._wrapped.get_options()

    def _sharding_options(self):
        s = _n.shardopt_sharding_options()
        _n.so_sharding_options_defaults(s)
        s.strategy = self._strategy
        c = self._config
        if not c.auto_sync_gradients:
            if self._strategy not in (_n.SHARDOPT_DDP, _n.SHARDOPT_ZERO1, _n.SHARDOPT_LOCAL_SGD):
                raise ValueError(f"auto_sync_gradients=False (Local SGD) needs replicated parameters; "
                                 f"{type(self).__name__} reduces gradients every step")
            s.strategy = _n.SHARDOPT_LOCAL_SGD
        s.local_sgd_period = int(c.local_steps)
        s.gradient_accumulation_steps = int(c.gradient_accumulation_steps)
        s.max_grad_norm = float(c.max_grad_norm)
        self._configure(s)
        return s

    def _configure(self, s):
        pass

    def initialize(self, layout, initial=None, parameters=None):
        """Collective: creates this rank's native optimizer for `layout` (a ParameterLayout)."""
        if self._handle is not None:
            raise RuntimeError("the optimizer is already initialized")
        if not isinstance(layout, ParameterLayout):
            raise TypeError("layout must be a ParameterLayout")
        self._layout = layout
        self._dtype = layout.dtype
        opts = _n.shardopt_optimizer_options()
        src = self._wrapped.options._native
        # field_mask: which fields are set (all, after the library's defaults filled them)
        for name in ("field_mask", "kind", "lr", "weight_decay", "maximize", "momentum", "dampening", "nesterov",
                     "beta1", "beta2", "eps", "amsgrad", "alpha", "centered", "lr_decay",
                     "initial_accumulator_value"):
            setattr(opts, name, getattr(src, name))
        opts.struct_size = src.struct_size
        if self._config.learning_rate is not None:
            opts.lr = self._config.learning_rate
        if initial is not None:
            initial = np.ascontiguousarray(initial, dtype=self._dtype)
            if initial.size != layout.element_count:
                raise ValueError(f"initial has {initial.size} elements, the layout {layout.element_count}")
        self._lr = opts.lr
        comm = self._config.communication_backend.handle
        params = layout._native(self._config.minimum_parameter_group_size)
        try:
            if parameters is not None:
                if not isinstance(parameters, np.ndarray) or parameters.dtype != self._dtype or \
                        not parameters.flags.c_contiguous or not parameters.flags.writeable:
                    raise ValueError(f"parameters must be a writable C-contiguous {self._dtype} array")
                self._handle = _n.so_optimizer_create_external(comm, params, opts, self._sharding, initial,
                                                               parameters, parameters.size)
                self._external = parameters  # must outlive the optimizer
            else:
                self._handle = _n.so_optimizer_create(comm, params, opts, self._sharding, initial)
        finally:
            _n.so_params_destroy(params)
        return self

    def padded_count_for(self, layout):
        """Elements a `parameters=` array needs for `layout` on this backend."""
        p = layout._native(self._config.minimum_parameter_group_size)
        try:
            return _n.so_params_padded_count(p, self.world_size)
        finally:
            _n.so_params_destroy(p)

    @property
    def _h(self):
        if self._handle is None:
            raise RuntimeError("the optimizer is not initialized (pass layout= or call initialize())")
        return self._handle

    @property
    def is_initialized(self):
        return self._handle is not None

    def synchronize_optimizer_state(self):
        _n.so_synchronize_state(self._h)

    def should_early_stop(self, vote=False):
        """Collective: True on every rank when any rank votes True."""
        return bool(_n.so_should_early_stop(self._h, int(bool(vote))))

    def optimize(self, model, input_data):
        """Collective training loop. `model(params, grad, samples) -> loss`: the mean loss over the
        sample indices `samples` at `params` (read-only), with the mean gradient written into `grad`
        (zeroed on entry); both are views of the library's buffers, valid during the call only."""
        if model is None or not callable(model):
            raise TypeError("model must be a callable (params, grad, samples) -> loss")
        if not isinstance(input_data, OptimizationInputData):
            raise TypeError("input_data must be an OptimizationInputData")
        dtype = self._dtype
        o = _n.shardopt_optimize_options()
        _n.so_optimize_options_defaults(o)
        o.num_samples, o.batch_size, o.epochs = input_data.num_samples, input_data.batch_size, input_data.epochs
        o.max_iterations, o.patience, o.min_delta = input_data.max_iterations, input_data.patience, input_data.min_delta

        def trampoline(p, g, s):
            return float(model(np.frombuffer(p, dtype), np.frombuffer(g, dtype), np.frombuffer(s, np.int64)))

        best = np.empty(self.element_count, dtype=dtype)
        history = np.empty(max(int(input_data.epochs), 1) + 1, dtype=np.float64)
        r = _n.shardopt_optimize_result()
        _n.so_optimize_py(self._h, trampoline, dtype.itemsize, o, r, best, best.size, history, history.size)
        n = min(r.loss_history_count, history.size)
        return OptimizationResult(best, r.best_loss, r.iterations, history[:n].tolist(), bool(r.stopped_early))

    # ---- checkpoints (collective: every rank calls with the same arguments) ----
    def serialize(self):
        """The consolidated checkpoint (parameters, optimizer state, step count) as bytes,
        identical on every rank; loads into any strategy and world size with deserialize()."""
        n = _n.so_serialize(self._h)
        try:
            out = bytearray(n)
        except BaseException:
            _n.so_serialized_discard()
            raise
        _n.so_serialized_take(out, n)
        return bytes(out)

    def deserialize(self, data):
        """Loads bytes from serialize() (every rank the same bytes). OSError when they are corrupt
        (SHARDOPT_ERR_CORRUPT), ValueError when they hold another layout; a failed load changes nothing."""
        if data is None:
            raise TypeError("data must not be None")
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        _n.so_deserialize(self._h, view, view.nbytes)

    def save_model(self, path, consolidated=False):
        """Saves a checkpoint into directory `path` (created if missing): sharded (every rank
        writes its shard) or, with consolidated=True, one file written by rank 0."""
        _n.so_save(self._h, self._path(path), int(bool(consolidated)))

    def load_model(self, path):
        """Loads a checkpoint of either form from directory `path`, saved by any strategy and world
        size. OSError for a missing or unreadable checkpoint or a corrupt file."""
        _n.so_load(self._h, self._path(path))

    @staticmethod
    def _path(path):
        if path is None:
            raise TypeError("path must not be None")
        path = os.fspath(path)
        return os.fsdecode(path) if isinstance(path, bytes) else path

    # ---- layout ----
    @property
    def tensor_count(self):
        return _n.so_tensor_count(self._h)

    @property
    def bucket_count(self):
        return _n.so_bucket_count(self._h)

    def tensor_size(self, tensor):
        return _n.so_tensor_size(self._h, tensor)

    def tensor_bucket(self, tensor):
        return _n.so_tensor_bucket(self._h, tensor)

    def bucket_size(self, bucket):
        return _n.so_bucket_size(self._h, bucket)

    @property
    def element_count(self):
        return _n.so_element_count(self._h)

    @property
    def padded_count(self):
        return _n.so_padded_count(self._h)

    # ---- parameters ----
    def _view(self, mv):
        return np.frombuffer(mv, self._dtype) if mv is not None else None

    @property
    def parameters(self):
        """The full flat parameter buffer (padded), a view; not for FSDP (sharded at rest)."""
        return self._view(_n.so_parameters(self._h, self._dtype.itemsize))

    def tensor_parameters(self, tensor):
        return self._view(_n.so_tensor_parameters(self._h, tensor, self._dtype.itemsize))

    def get_parameters(self, out=None):
        """Packed copy of all parameters (collective for FSDP and hybrid)."""
        if out is None:
            out = np.empty(self.element_count, dtype=self._dtype)
        elif out.dtype != self._dtype:
            raise ValueError(f"out must be {self._dtype}")
        _n.so_get_parameters(self._h, out, out.size)
        return out

    def set_parameters(self, values):
        values = np.ascontiguousarray(values, dtype=self._dtype)
        _n.so_set_parameters(self._h, values, values.size)

    def gather(self, bucket):
        """FSDP: the unit's full parameters (collective) as a view until release(bucket)."""
        return self._view(_n.so_gather(self._h, bucket, self._dtype.itemsize))

    def release(self, bucket):
        _n.so_release(self._h, bucket)

    @contextlib.contextmanager
    def gathered(self, bucket):
        view = self.gather(bucket)
        try:
            yield view
        finally:
            self.release(bucket)

    # ---- step protocol ----
    @property
    def learning_rate(self):
        """The learning rate of later steps (set it the same on every rank, e.g. for schedules)."""
        return self._lr

    @learning_rate.setter
    def learning_rate(self, value):
        _n.so_set_learning_rate(self._h, float(value))
        self._lr = float(value)

    @property
    def step_count(self):
        return _n.so_step_count(self._h)

    def zero_grad(self):
        _n.so_zero_grad(self._h)

    def bucket_grad(self, bucket):
        return self._view(_n.so_bucket_grad(self._h, bucket, self._dtype.itemsize))

    def tensor_grad(self, tensor):
        return self._view(_n.so_tensor_grad(self._h, tensor, self._dtype.itemsize))

    def grad_ready(self, bucket):
        _n.so_grad_ready(self._h, bucket)

    def step(self):
        r = _n.shardopt_step_result()
        _n.so_step(self._h, r)
        return StepResult(bool(r.applied), bool(r.skipped_nonfinite), bool(r.accumulating), r.grad_norm,
                          r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds)

    def memory_stats(self):
        m = _n.shardopt_memory_stats()
        _n.so_memory_stats(self._h, m)
        return MemoryStats(m.params_bytes, m.grads_bytes, m.optimizer_state_bytes, m.buffer_bytes,
                           m.peak_buffer_bytes, m.total_bytes)

    # ---- lifetime ----
    def _destroy(self, handle):
        _n.so_optimizer_destroy(handle)

    def close(self):
        super().close()
        self._external = None

    def dispose(self):
        self.close()


class DDPOptimizer(ShardedOptimizer):
    """Data parallel: gradients averaged per bucket, full update on every rank."""
    _strategy = _n.SHARDOPT_DDP


class ZeRO1Optimizer(ShardedOptimizer):
    """Optimizer state sharded; gradients all-reduced; parameters all-gathered after the step."""
    _strategy = _n.SHARDOPT_ZERO1


class ZeRO2Optimizer(ShardedOptimizer):
    """Optimizer state and gradients sharded (reduce-scatter per bucket)."""
    _strategy = _n.SHARDOPT_ZERO2


class FSDPOptimizer(ShardedOptimizer):
    """Parameters, gradients and state sharded at rest; units gathered around use (ZeRO-3)."""
    _strategy = _n.SHARDOPT_FSDP


class ZeRO3Optimizer(FSDPOptimizer):
    """The same as FSDPOptimizer, under DeepSpeed's name."""


class HybridShardedOptimizer(ShardedOptimizer):
    """A data x tensor x pipeline process grid; data_parallel_size -1 = the rest of the world.
    data_strategy: the strategy inside each data-parallel group (ZeRO-2 by default)."""
    _strategy = _n.SHARDOPT_HYBRID

    def __init__(self, wrapped_optimizer, sharding_configuration, pipeline_parallel_size=1,
                 tensor_parallel_size=1, data_parallel_size=-1, layout=None, initial=None,
                 data_strategy=_n.SHARDOPT_ZERO2):
        self.pipeline_parallel_size = int(pipeline_parallel_size)
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.data_parallel_size = int(data_parallel_size)
        self.data_strategy = data_strategy
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)

    def _configure(self, s):
        s.pipeline_parallel_size = self.pipeline_parallel_size
        s.tensor_parallel_size = self.tensor_parallel_size
        s.data_parallel_size = self.data_parallel_size
        s.hybrid_data_strategy = self.data_strategy


class LocalSGDOptimizer(ShardedOptimizer):
    """Local steps; parameters averaged every `local_steps` steps (the configuration's, 4)."""
    _strategy = _n.SHARDOPT_LOCAL_SGD
