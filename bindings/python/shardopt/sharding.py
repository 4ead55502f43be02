"""ShardingConfiguration and the sharded optimizers (AiDotNet.DistributedTraining, Python naming)."""
import contextlib
import enum
import os
from dataclasses import dataclass, field

import numpy as np

import ctypes

from . import shardopt_native as _n
from ._native_resource import NativeResource
from ._views import (NativeOwner, ObjectDisposedError, Guard, as_native_array, native_view,
                     writable_native_array)
from .backends import CommunicationBackend
from .optimizers import Optimizer

__all__ = ["GradientCompression", "ParameterLayout", "ShardingConfiguration", "OptimizationInputData", "OptimizationResult", "DatasetResult",
           "StepResult", "MemoryStats", "ShardedOptimizer", "DDPOptimizer", "ZeRO1Optimizer", "ZeRO2Optimizer",
           "FSDPOptimizer", "ZeRO3Optimizer", "HybridShardedOptimizer", "LocalSGDOptimizer",
           "GradientCompressionOptimizer"]

_FLOAT_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64}


class GradientCompression(enum.IntEnum):
    """How gradients are compressed on the wire (ShardingConfiguration.gradient_compression).

    BF16/FP16: 2 bytes per element. INT8/INT4: blockwise, a scale per 256 elements. TOP_K: the
    compression_ratio largest-magnitude elements of each chunk. POWER_SGD: a rank-power_sgd_rank
    approximation of every tensor declared as a matrix (ParameterLayout.add_matrix); other
    tensors go uncompressed. Error feedback (the default) keeps what INT8/INT4/TOP_K/POWER_SGD
    missed and adds it to the next step. Anywhere a method is taken, its name works too
    ("int8", "top_k", "TopK", "PowerSGD", ...)."""
    NONE = _n.SHARDOPT_COMPRESSION_NONE
    BF16 = _n.SHARDOPT_COMPRESSION_BF16
    FP16 = _n.SHARDOPT_COMPRESSION_FP16
    INT8 = _n.SHARDOPT_COMPRESSION_INT8
    INT4 = _n.SHARDOPT_COMPRESSION_INT4
    TOP_K = _n.SHARDOPT_COMPRESSION_TOP_K
    POWER_SGD = _n.SHARDOPT_COMPRESSION_POWER_SGD

    @classmethod
    def parse(cls, value):
        """A GradientCompression from itself, its name (any case, with or without '_') or its value;
        ValueError for anything else."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.replace("_", "").replace("-", "").upper()
            for m in cls:
                if m.name.replace("_", "") == key:
                    return m
            raise ValueError(f"unknown gradient compression {value!r} (one of "
                             f"{', '.join(m.name.lower() for m in cls)})")
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            try:
                return cls(int(value))
            except ValueError:
                pass
        raise ValueError(f"gradient compression must be a GradientCompression or its name, not {value!r}")


def _count(name, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"tensor '{name}': {what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"tensor '{name}': {what} must be >= 1 (got {value})")
    return int(value)


class ParameterLayout:
    """The model's tensors, in order: name and element count. end_bucket() closes a gradient bucket
    (an FSDP unit); otherwise tensors are grouped into buckets of the configuration's
    minimum_parameter_group_size elements. add_matrix(name, rows, cols) declares a row-major
    matrix, the tensors PowerSGD compression approximates (others it sends uncompressed)."""

    def __init__(self, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"parameters must be float32 or float64, not {self.dtype}")
        self.tensors = []  # (name, count, tp_replicated, ends_bucket, (rows, cols) or None)

    @staticmethod
    def _name(name):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tensor needs a non-empty name (got {name!r})")
        return name

    def add(self, name, count, tp_replicated=False):
        """A tensor of `count` elements; count may also be a (rows, cols) shape (= add_matrix)."""
        name = self._name(name)
        if isinstance(count, tuple):
            if len(count) != 2:
                raise ValueError(f"tensor '{name}': a shape must be (rows, cols), not {count!r}")
            return self.add_matrix(name, count[0], count[1], tp_replicated)
        self.tensors.append([name, _count(name, "count", count), bool(tp_replicated), False, None])
        return self

    def add_matrix(self, name, rows, cols, tp_replicated=False):
        """A rows x cols row-major matrix (rows * cols elements): PowerSGD compresses it."""
        name = self._name(name)
        rows, cols = _count(name, "rows", rows), _count(name, "cols", cols)
        self.tensors.append([name, rows * cols, bool(tp_replicated), False, (rows, cols)])
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
            for name, count, tp, ends, shape in self.tensors:
                if shape is None:
                    _n.so_params_add(p, name, count, int(tp))
                else:
                    _n.so_params_add_matrix(p, name, shape[0], shape[1], int(tp))
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
    - broadcast_initial_parameters (True): the initial parameters are rank 0's (as PyTorch DDP
      does); False keeps each rank's own (then ranks that start apart stay apart under DDP).
    - enable_gradient_compression (False): True compresses every gradient reduction (and Local
      SGD's averaging) with `gradient_compression` (GradientCompression.INT8 by default, or its
      name: "bf16", "fp16", "int8", "int4", "top_k", "power_sgd"); the sharded optimizer's
      bytes_sent shows the saving.
    - compression_ratio (0.1): TOP_K's fraction of each chunk sent, in (0, 1].
    - error_feedback (True): keep what compression missed and add it to the next step.
    - power_sgd_rank (4): POWER_SGD's approximation rank, in [1, 1024].
    - cpu_offload_optimizer, cpu_offload_gradients, cpu_offload_params (False): ZeRO-Offload
      (docs/offload.md). They act on an optimizer in CUDA memory; these optimizers keep their
      memory in host memory, where the flags are accepted and change nothing (memory_stats too).
      create_for_zero_offload turns on the first, create_for_zero_offload_full all three.
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
        # True (PyTorch DDP's behaviour): the initial parameters are rank 0's, broadcast over each
        # data-parallel group, so replicas cannot start apart. False keeps every rank's own.
        self.broadcast_initial_parameters = True
        self.enable_gradient_compression = False
        self._compression = GradientCompression.INT8
        self._compression_ratio = 0.1
        self.error_feedback = True
        self._power_sgd_rank = 4
        self.cpu_offload_optimizer = False
        self.cpu_offload_gradients = False
        self.cpu_offload_params = False

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
        return self._enable_compression

    @enable_gradient_compression.setter
    def enable_gradient_compression(self, value):
        self._enable_compression = bool(value)

    @property
    def gradient_compression(self):
        """The method used when enable_gradient_compression is True (a GradientCompression; set it
        to one or to its name)."""
        return self._compression

    @gradient_compression.setter
    def gradient_compression(self, value):
        self._compression = GradientCompression.parse(value)

    @property
    def compression_ratio(self):
        return self._compression_ratio

    @compression_ratio.setter
    def compression_ratio(self, value):
        self._compression_ratio = _compression_ratio(value)

    @property
    def error_feedback(self):
        return self._error_feedback

    @error_feedback.setter
    def error_feedback(self, value):
        self._error_feedback = bool(value)

    @property
    def power_sgd_rank(self):
        return self._power_sgd_rank

    @power_sgd_rank.setter
    def power_sgd_rank(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"power_sgd_rank must be an integer, not {type(value).__name__}")
        if not 1 <= value <= 1024:
            raise ValueError(f"power_sgd_rank must be in [1, 1024] (got {value})")
        self._power_sgd_rank = int(value)

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
        """Large buckets (4096 elements), fewer messages, and gradient compression on (INT8 with
        error feedback), as in AiDotNet."""
        c = cls(backend)
        c.minimum_parameter_group_size = 4096
        c.enable_gradient_compression = True
        return c

    @classmethod
    def create_for_zero_offload(cls, backend):
        """DeepSpeed's ZeRO-Offload: optimizer state, master weights and the update on the CPU
        (cpu_offload_optimizer), as AiDotNet's CreateForZeROOffload."""
        c = cls(backend)
        c.cpu_offload_optimizer = True
        return c

    @classmethod
    def create_for_zero_offload_full(cls, backend):
        """ZeRO-Offload of the optimizer, the gradients and (FSDP) the parameter shard, as
        AiDotNet's CreateForZeROOffloadFull."""
        c = cls.create_for_zero_offload(backend)
        c.cpu_offload_gradients = True
        c.cpu_offload_params = True
        return c


def _compression_ratio(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"compression_ratio must be a number, not {type(value).__name__}")
    if not 0 < value <= 1:
        raise ValueError(f"compression_ratio must be in (0, 1] (got {value})")
    return float(value)


@dataclass
class OptimizationInputData:
    """What optimize() trains on.

    AiDotNet's form: x_train / y_train (rows are samples; any indexable by an integer index
    array, e.g. numpy arrays), optional x_validation / y_validation (the best solution is chosen
    on the validation loss when given) and x_test / y_test (reported in the result). The samples
    [0, len(x_train)) are split across the data-parallel ranks.

    The lower-level form: num_samples with a callable model(params, grad, samples) -> loss that
    indexes its own data by the sample indices.

    batch_size, epochs: None takes the wrapped optimizer's options' (batch_size 0 = the whole data
    set, as before; epochs 1).
    shuffle / seed: each epoch visits the samples in a fresh order drawn from (seed, epoch),
    the same on every rank (a distributed sampler); None takes the options'.
    """
    num_samples: int = None
    batch_size: int = None       # global batch per step; 0 = the whole data set
    epochs: int = None
    max_iterations: int = 0      # 0 = no limit beyond epochs
    patience: int = 0            # epochs without improvement before stopping; 0 = the options'
    min_delta: float = 0.0
    x_train: object = None
    y_train: object = None
    x_validation: object = None
    y_validation: object = None
    x_test: object = None
    y_test: object = None
    shuffle: bool = None
    seed: int = None
    initial_solution: object = None  # packed parameters to start from (set on every rank)


@dataclass
class DatasetResult:
    """The loss of the best solution on one data set (AiDotNet's DatasetResult, loss only)."""
    loss: float
    x: object = None
    y: object = None
    predictions: object = None


@dataclass
class OptimizationResult:
    best_solution: np.ndarray
    best_fitness_score: float
    iterations: int
    fitness_history: list = field(default_factory=list)   # training loss per epoch
    stopped_early: bool = False
    validation_history: list = field(default_factory=list)  # validation loss per epoch, when given
    training_result: DatasetResult = None
    validation_result: DatasetResult = None
    test_result: DatasetResult = None


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
    bytes_sent: int = 0  # bytes this rank moved since the previous step returned


@dataclass
class MemoryStats:
    params_bytes: int
    grads_bytes: int
    optimizer_state_bytes: int
    buffer_bytes: int
    peak_buffer_bytes: int
    total_bytes: int
    # gradient compression: error-feedback residuals, PowerSGD's Q matrices, payload buffers
    compression_bytes: int = 0
    # ZeRO-Offload's host memory beside the fields above (0 in host memory, where those are host memory)
    host_params_bytes: int = 0
    host_grads_bytes: int = 0
    host_optimizer_state_bytes: int = 0
    host_total_bytes: int = 0


_U64 = (1 << 64) - 1


def _u64_as_i64(value):
    """A uint64_t value for the struct's seed field, which the module holds as a signed 64-bit."""
    return value - (1 << 64) if value >= (1 << 63) else value


class ShardedOptimizer(NativeResource):
    """IShardedOptimizer: wraps a base optimizer and runs it over the configuration's backend.

    The model's parameter layout comes from the wrapped optimizer's model (AdamOptimizer(model,
    options)), the constructor (`layout=`) or initialize(); creation is collective and checked:
    ranks whose layouts or options differ fail on every rank (RuntimeError SHARDOPT_ERR_MISMATCH
    naming the first difference). The initial parameters are rank 0's unless the configuration's
    broadcast_initial_parameters is False. Pass `parameters=` (a float array of padded_count
    elements) to keep the parameters in your own array without copies (DDP, ZeRO-1, ZeRO-2,
    Local SGD).

    After close() every method and every view it returned raises ObjectDisposedError.
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
        self._owner = None
        self._closed = False
        self._gather_guards = {}
        self._init_args = None
        self.learning_rate_schedule = None
        self._reset_history()
        self._sharding = self._sharding_options()  # validates the configuration now
        model = getattr(wrapped_optimizer, "model", None)
        if layout is None and model is not None:
            layout = model.parameter_layout()
            if initial is None:
                initial = model.get_parameters()
        if layout is not None:
            self.initialize(layout, initial, parameters)

    def _reset_history(self):
        self._best_score = float("inf")
        self._epochs_without_improvement = 0
        self._history = []

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

    @property
    def model(self):
        return getattr(self._wrapped, "model", None)

    def get_options(self):
        """The wrapped optimizer's options; a learning_rate set on them applies from the next step."""
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
        s.broadcast_initial = _n.SHARDOPT_ENABLE if c.broadcast_initial_parameters else _n.SHARDOPT_DISABLE
        if c.enable_gradient_compression:
            s.compression = int(c.gradient_compression)
        s.compression_ratio = c.compression_ratio
        s.power_sgd_rank = c.power_sgd_rank
        s.error_feedback = _n.SHARDOPT_ENABLE if c.error_feedback else _n.SHARDOPT_DISABLE
        for flag in ("cpu_offload_optimizer", "cpu_offload_gradients", "cpu_offload_params"):
            setattr(s, flag, _n.SHARDOPT_ENABLE if getattr(c, flag) else _n.SHARDOPT_DISABLE)
        self._configure(s)
        return s

    def _configure(self, s):
        pass

    def initialize(self, layout, initial=None, parameters=None):
        """Collective: creates this rank's native optimizer for `layout` (a ParameterLayout)."""
        if self._closed:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed")
        if self._owner is not None:
            raise RuntimeError("the optimizer is already initialized")
        if not isinstance(layout, ParameterLayout):
            raise TypeError(f"layout must be a ParameterLayout, not {type(layout).__name__}")
        if not layout.tensors:
            raise ValueError("the layout has no tensors")
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
            initial = as_native_array(initial, self._dtype, "initial", layout.element_count)
        comm = self._config.communication_backend.handle
        if parameters is not None:
            parameters = writable_native_array(parameters, self._dtype, "parameters", self.padded_count_for(layout))
        params = layout._native(self._config.minimum_parameter_group_size)
        try:
            if parameters is not None:
                handle = _n.so_optimizer_create_external(comm, params, opts, self._sharding, initial,
                                                         parameters, parameters.size)
            else:
                handle = _n.so_optimizer_create(comm, params, opts, self._sharding, initial)
        finally:
            _n.so_params_destroy(params)
        try:
            self._created(handle)
        except BaseException:
            _n.so_optimizer_destroy(handle)
            raise
        # the handle, freed once this object is closed and no view of its memory is left;
        # `keep`: caller parameters must outlive it
        self._owner = NativeOwner(handle, _n.so_optimizer_destroy,
                                  f"the {type(self).__name__} was closed (this view of its memory is invalid)",
                                  keep=parameters)
        self._options_lr_seen = self._wrapped.options.learning_rate
        self._init_args = (layout, None if initial is None else initial.copy(), parameters)
        return self

    def _created(self, handle):
        """Subclasses' collective set-up of the native optimizer just created (ElasticOptimizer)."""

    def padded_count_for(self, layout):
        """Elements a `parameters=` array needs for `layout` on this backend."""
        p = layout._native(self._config.minimum_parameter_group_size)
        try:
            return _n.so_params_padded_count(p, self.world_size)
        finally:
            _n.so_params_destroy(p)

    @property
    def _h(self):
        if self._closed:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed")
        if self._owner is None:
            raise RuntimeError("the optimizer is not initialized (pass layout= or a model to the wrapped "
                               "optimizer, or call initialize())")
        return self._owner.handle

    @property
    def is_initialized(self):
        return self._owner is not None

    def synchronize_optimizer_state(self):
        _n.so_synchronize_state(self._h)

    def should_early_stop(self, vote=None):
        """Collective: True on every rank when any rank votes to stop (a max-allreduce, as in
        AiDotNet). vote=None votes with this optimizer's own criterion: the options'
        use_early_stopping and early_stopping_patience epochs without an improvement of the
        best score (validation loss when given, else training loss) by more than `tolerance`."""
        if vote is None:
            o = self._wrapped.options
            vote = bool(o.use_early_stopping) and self._epochs_without_improvement >= o.early_stopping_patience
        return bool(_n.so_should_early_stop(self._h, int(bool(vote))))

    # ---- learning rate ----
    def _sync_options_lr(self):
        """A learning_rate changed on get_options() since we last looked applies from now on."""
        lr = self._wrapped.options.learning_rate
        if lr != self._options_lr_seen:
            _n.so_set_learning_rate(self._h, float(lr))
            self._options_lr_seen = lr

    def _lr_from_native(self):
        """After a load the checkpoint's rate is the optimizer's: reflect it in get_options()."""
        lr = _n.so_py_learning_rate(self._h)
        self._wrapped.options.learning_rate = lr
        self._options_lr_seen = self._wrapped.options.learning_rate

    @property
    def learning_rate(self):
        """The learning rate of later steps, read from the library (set it the same on every rank)."""
        self._sync_options_lr()
        return _n.so_py_learning_rate(self._h)

    @learning_rate.setter
    def learning_rate(self, value):
        self._sync_options_lr()
        _n.so_set_learning_rate(self._h, float(value))

    def apply_learning_rate_schedule(self, epoch):
        """Sets the learning rate of the schedule (learning_rate_schedule) for `epoch` (0-based);
        optimize() calls it before every epoch."""
        if self.learning_rate_schedule is not None:
            self.learning_rate = float(self.learning_rate_schedule(epoch))

    # ---- optimize ----
    def optimize(self, model_or_input, input_data=None):
        """Collective training loop, epoch by epoch.

        optimize(input_data): AiDotNet's form. The model is the wrapped optimizer's
        (AdamOptimizer(model, options)); input_data carries x_train/y_train and optionally
        validation and test sets; see OptimizationInputData and OptimizationResult.

        optimize(model, input_data): `model(params, grad, samples) -> loss` computes the mean loss
        over the sample indices `samples` at `params` (read-only) and writes the mean gradient into
        `grad` (zeroed on entry): arrays of the parameters' dtype owned by this call.

        An exception raised by the model on one rank fails optimize on every rank: that rank
        re-raises it; the others raise RuntimeError naming that rank and the exception."""
        if input_data is None and isinstance(model_or_input, OptimizationInputData):
            input_data, model = model_or_input, None
            if self.model is None:
                raise TypeError("optimize(input_data) needs the wrapped optimizer's model "
                                "(e.g. AdamOptimizer(model, options)); or call optimize(model_fn, input_data)")
        else:
            model = model_or_input
            if model is None or not callable(model):
                raise TypeError("model must be a callable (params, grad, samples) -> loss")
        if not isinstance(input_data, OptimizationInputData):
            raise TypeError(f"input_data must be an OptimizationInputData, not {type(input_data).__name__}")
        return self._run(model, input_data)

    def _run(self, model_fn, d):
        h = self._h
        o = self._wrapped.options
        m = self.model if model_fn is None else None
        if m is not None:
            if d.x_train is None or d.y_train is None:
                raise ValueError("input_data needs x_train and y_train")
            n = len(d.x_train)
            if len(d.y_train) != n:
                raise ValueError(f"x_train has {n} samples, y_train {len(d.y_train)}")
            if d.num_samples is not None and int(d.num_samples) != n:
                raise ValueError(f"num_samples {d.num_samples} disagrees with x_train ({n} samples)")
            if (d.x_validation is None) != (d.y_validation is None):
                raise ValueError("pass both x_validation and y_validation, or neither")
            if (d.x_test is None) != (d.y_test is None):
                raise ValueError("pass both x_test and y_test, or neither")
            x_train, y_train = d.x_train, d.y_train

            def model_fn(p, g, s):
                return m.loss_and_gradient(p, g, x_train[s], y_train[s])
        else:
            if d.num_samples is None:
                raise ValueError("input_data needs num_samples (or x_train/y_train with the wrapped optimizer's model)")
            n = int(d.num_samples)
        if n < 1:
            raise ValueError(f"there must be at least one sample (got {n})")
        batch = o.batch_size if d.batch_size is None else int(d.batch_size)
        epochs = o.epochs if d.epochs is None else int(d.epochs)
        epochs = max(epochs, 1)
        shuffle = o.shuffle if d.shuffle is None else bool(d.shuffle)
        seed = (o.seed if d.seed is None else int(d.seed)) & _U64
        patience = int(d.patience) or (int(o.early_stopping_patience) if o.use_early_stopping else 0)
        min_delta = float(d.min_delta) or (float(o.tolerance) if o.use_early_stopping else 0.0)
        max_iterations = int(d.max_iterations)
        if batch < 0 or max_iterations < 0 or patience < 0 or min_delta < 0:
            raise ValueError("batch_size, max_iterations, patience and min_delta must be >= 0")
        if d.initial_solution is not None:
            self.set_parameters(d.initial_solution)
        self._sync_options_lr()

        dtype = self._dtype
        count = self.element_count
        nbytes = count * dtype.itemsize

        def trampoline(paddr, gaddr, sbytes):
            # copies in and out: nothing the model keeps can point into library memory
            p = np.empty(count, dtype)
            ctypes.memmove(p.ctypes.data, paddr, nbytes)
            p.flags.writeable = False
            g = np.zeros(count, dtype)
            loss = float(model_fn(p, g, np.frombuffer(sbytes, np.int64)))
            ctypes.memmove(gaddr, g.ctypes.data, nbytes)
            return loss

        opts = _n.shardopt_optimize_options()
        _n.so_optimize_options_defaults(opts)
        opts.num_samples, opts.batch_size, opts.epochs = n, batch, 1
        opts.patience, opts.min_delta = 0, 0.0
        opts.shuffle = _n.SHARDOPT_ENABLE if shuffle else _n.SHARDOPT_DISABLE

        self._reset_history()
        best = None
        train_history, val_history = [], []
        iterations, stopped = 0, False
        after = np.empty(count, dtype=dtype)
        history = np.empty(1, dtype=np.float64)
        for epoch in range(epochs):
            self.apply_learning_rate_schedule(epoch)
            # one epoch per call, numbered for the shuffle order: one multi-epoch call's orders
            opts.seed = _u64_as_i64(seed) if shuffle else 0
            opts.first_epoch = epoch
            opts.max_iterations = max_iterations - iterations if max_iterations else 0
            r = _n.shardopt_optimize_result()
            try:
                _n.so_optimize_py(h, trampoline, dtype.itemsize, opts, r, after, after.size, history, history.size)
            except BaseException as e:
                if not isinstance(e, RuntimeError) or "SHARDOPT_ERR" not in str(e):
                    if hasattr(e, "add_note"):
                        e.add_note(f"(raised by the model on rank {self.rank}; every rank's optimize failed)")
                raise
            iterations += r.iterations
            if r.loss_history_count == 0:  # an epoch an elastic optimizer's resume skipped
                if max_iterations and iterations >= max_iterations:
                    break
                continue
            train_loss = float(history[0])
            train_history.append(train_loss)
            score = train_loss
            if m is not None and d.x_validation is not None:
                score = float(m.loss(after, d.x_validation, d.y_validation))
                val_history.append(score)
            if score < self._best_score - min_delta:
                self._best_score = score
                self._epochs_without_improvement = 0
                best = after.copy()
            else:
                self._epochs_without_improvement += 1
            self._history.append(score)
            if max_iterations and iterations >= max_iterations:
                break
            want = patience > 0 and self._epochs_without_improvement >= patience
            if epoch + 1 < epochs and bool(_n.so_should_early_stop(h, int(want))):
                stopped = True
                break
        if best is None:
            best = after.copy()
        result = OptimizationResult(best, self._best_score, iterations, train_history, stopped, val_history)
        if m is not None:
            def dataset(x, y):
                if x is None:
                    return None
                pred = m.predict(x, best) if hasattr(m, "predict") else None
                return DatasetResult(float(m.loss(best, x, y)), x, y, pred)
            result.training_result = dataset(d.x_train, d.y_train)
            result.validation_result = dataset(d.x_validation, d.y_validation)
            result.test_result = dataset(d.x_test, d.y_test)
            m.set_parameters(best)
        return result

    def reset(self):
        """Collective: back to the state right after initialize() (the initial parameters, fresh
        optimizer state, step 0, no history); the learning rate is the options' again."""
        if self._init_args is None:
            self._h  # noqa: B018 - raises the right error
        layout, initial, parameters = self._init_args
        self._release_owner()
        self.initialize(layout, initial, parameters)
        self._reset_history()

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
        try:
            view = memoryview(data)
        except TypeError:
            raise TypeError(f"data must be bytes-like, not {type(data).__name__}") from None
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        _n.so_deserialize(self._h, view, view.nbytes)
        self._lr_from_native()

    def save_model(self, path, consolidated=False):
        """Saves a checkpoint into directory `path` (created if missing): sharded (every rank
        writes its shard) or, with consolidated=True, one file written by rank 0."""
        _n.so_save(self._h, self._path(path), int(bool(consolidated)))

    def load_model(self, path):
        """Loads a checkpoint of either form from directory `path`, saved by any strategy and world
        size. OSError for a missing or unreadable checkpoint or a corrupt file."""
        _n.so_load(self._h, self._path(path))
        self._lr_from_native()

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
    def _view(self, region, *guards):
        if region is None:
            return None
        address, nbytes = region
        return native_view(address, nbytes, self._dtype, self._owner, (self._owner,) + guards)

    @property
    def parameters(self):
        """The full flat parameter buffer (padded), a view; not for FSDP (sharded at rest)."""
        return self._view(_n.so_parameters(self._h, self._dtype.itemsize))

    def tensor_parameters(self, tensor):
        return self._view(_n.so_tensor_parameters(self._h, tensor, self._dtype.itemsize))

    def get_parameters(self, out=None):
        """Packed copy of all parameters (collective for FSDP and hybrid)."""
        h = self._h
        count = self.element_count
        if out is None:
            out = np.empty(count, dtype=self._dtype)
        else:
            out = writable_native_array(out, self._dtype, "out", count)
        _n.so_py_get_parameters(h, out, out.size, _FLOAT_DTYPES[self._dtype])
        return out

    def set_parameters(self, values):
        h = self._h
        values = as_native_array(values, self._dtype, "values", self.element_count)
        _n.so_py_set_parameters(h, values, values.size, _FLOAT_DTYPES[self._dtype])

    def gather(self, bucket):
        """FSDP: the unit's full parameters (collective) as a view until release(bucket)."""
        region = _n.so_gather(self._h, bucket, self._dtype.itemsize)
        guard = Guard(f"unit {bucket} was released (gather it again for a valid view)")
        old = self._gather_guards.pop(bucket, None)
        if old is not None:
            old.invalidate()
        self._gather_guards[bucket] = guard
        return self._view(region, guard)

    def release(self, bucket):
        _n.so_release(self._h, bucket)
        guard = self._gather_guards.pop(bucket, None)
        if guard is not None:
            guard.invalidate()

    @contextlib.contextmanager
    def gathered(self, bucket):
        view = self.gather(bucket)
        try:
            yield view
        finally:
            self.release(bucket)

    # ---- step protocol ----
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
        h = self._h
        self._sync_options_lr()
        r = _n.shardopt_step_result()
        _n.so_step(h, r)
        return StepResult(bool(r.applied), bool(r.skipped_nonfinite), bool(r.accumulating), r.grad_norm,
                          r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds, r.bytes_sent)

    def memory_stats(self):
        """Bytes this rank holds now (not collective); compression_bytes: gradient compression's."""
        m = _n.shardopt_memory_stats()
        _n.so_memory_stats(self._h, m)
        return MemoryStats(m.params_bytes, m.grads_bytes, m.optimizer_state_bytes, m.buffer_bytes,
                           m.peak_buffer_bytes, m.total_bytes, m.compression_bytes, m.host_params_bytes,
                           m.host_grads_bytes, m.host_optimizer_state_bytes, m.host_total_bytes)

    @property
    def bytes_sent(self):
        """Bytes this rank has moved over the optimizer's communicators since it was created
        (not collective): gradient reductions, parameter gathers, checkpoints' collectives."""
        return int(_n.so_bytes_sent(self._h))

    # ---- lifetime ----
    def _release_owner(self):
        owner, self._owner = self._owner, None
        for g in self._gather_guards.values():
            g.invalidate()
        self._gather_guards.clear()
        if owner is not None:
            owner.invalidate()  # every view raises from now on
            # the native optimizer goes with the last reference: now, or when the last view does

    def close(self):
        """Releases the native optimizer; later calls do nothing. Every later use of this object
        or of a view it returned raises ObjectDisposedError."""
        self._release_owner()
        self._closed = True

    def dispose(self):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


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


class GradientCompressionOptimizer(ShardedOptimizer):
    """AiDotNet's GradientCompressionOptimizer: data parallel (DDP) with compressed gradient
    reductions. use_sparsification: top-k at compression_ratio (each chunk's largest-magnitude
    fraction); else use_quantization: int8 (blockwise, a scale per 256 elements); neither: no
    compression. When both are set, sparsification wins (as the ratio only means something for
    it). The configuration's error_feedback (True) applies; these arguments replace its
    enable_gradient_compression / gradient_compression."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, compression_ratio=0.1, use_quantization=True,
                 use_sparsification=False, layout=None, initial=None, parameters=None):
        self.compression_ratio = _compression_ratio(compression_ratio)
        self.use_quantization = bool(use_quantization)
        self.use_sparsification = bool(use_sparsification)
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    @property
    def compression(self):
        """The method in use: TOP_K, INT8 or NONE."""
        if self.use_sparsification:
            return GradientCompression.TOP_K
        return GradientCompression.INT8 if self.use_quantization else GradientCompression.NONE

    def _configure(self, s):
        s.compression = int(self.compression)
        s.compression_ratio = self.compression_ratio
