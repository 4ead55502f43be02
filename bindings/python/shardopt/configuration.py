"""What a sharded optimizer is configured and fed with (AiDotNet's names): the layout, the Model, the
ShardingConfiguration, the input data, and the results."""
import enum
from collections import namedtuple
from functools import partial

import numpy as np

from . import shardopt_native as _n
from ._core import SWITCH, NativeResource, Setting, as_native_array, parse_enum
from .backends import CommunicationBackend

_FLOAT_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64}


class GradientCompression(enum.IntEnum):
    """How gradients are compressed on the wire (docs/compression.md); a name works too ("int8", "TopK", ...)."""
    NONE, BF16, FP16, INT8 = (_n.SHARDOPT_COMPRESSION_NONE, _n.SHARDOPT_COMPRESSION_BF16, _n.SHARDOPT_COMPRESSION_FP16,
                              _n.SHARDOPT_COMPRESSION_INT8)
    INT4, TOP_K, POWER_SGD = _n.SHARDOPT_COMPRESSION_INT4, _n.SHARDOPT_COMPRESSION_TOP_K, _n.SHARDOPT_COMPRESSION_POWER_SGD
    parse = classmethod(lambda cls, value: parse_enum(cls, value, "gradient compression"))


def _count(name, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"tensor '{name}': {what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"tensor '{name}': {what} must be >= 1 (got {value})")
    return int(value)


class ParameterLayout(NativeResource):
    """The model's tensors in order, of one element type (the model's), as the library's parameter set (a native
    handle: each rank makes its own): add(name, count or (rows, cols)), add_matrix, end_bucket() (an FSDP unit ends)."""

    def __init__(self, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"parameters must be float32 or float64, not {self.dtype}")
        self._handle = _n.shardopt_params_create(_FLOAT_DTYPES[self.dtype], 0)

    def add(self, name, count, tp_replicated=False):
        if isinstance(count, tuple) and len(count) == 2:
            return self.add_matrix(name, *count, tp_replicated)
        _n.shardopt_params_add(self._handle, name, _count(name, "count", count), int(tp_replicated))
        return self

    def add_matrix(self, name, rows, cols, tp_replicated=False):
        _n.shardopt_params_add_matrix(self._handle, name, _count(name, "rows", rows), _count(name, "cols", cols),
                                      int(tp_replicated))
        return self

    def end_bucket(self):
        _n.shardopt_params_end_bucket(self._handle)
        return self

    element_count = property(lambda self: _n.shardopt_params_element_count(self._handle))
    tensor_count = property(lambda self: _n.shardopt_params_tensor_count(self._handle))
    _destroy = staticmethod(_n.shardopt_params_destroy)


class Model:
    """Subclass it: loss_and_gradient (and loss, for a cheaper loss-only pass; predict(x, parameters), for predictions
    in the result). tensors: [(name, count or (rows, cols)), ...] in packing order; dtype: numpy.float64 (AiDotNet's
    double) or numpy.float32, the parameters' element type; initial: packed initial parameters (default zeros)."""

    def __init__(self, tensors, dtype=np.float64, initial=None):
        self.dtype, self._layout = np.dtype(dtype), ParameterLayout(dtype)
        for name, count in tensors:
            self._layout.add(name, count)
        self._parameters = np.zeros(self.parameter_count, self.dtype)
        if initial is not None:
            self.set_parameters(initial)

    parameter_layout = lambda self: self._layout  # the tensors a sharded optimizer is created with
    parameter_count = property(lambda self: self._layout.element_count)
    get_parameters = lambda self: self._parameters.copy()

    def set_parameters(self, parameters):
        """Sets the packed parameters (optimize() sets the best solution at its end)."""
        self._parameters = as_native_array(parameters, self.dtype, "parameters", self.parameter_count).copy()

    def loss_and_gradient(self, parameters, gradient, x, y):
        """The mean loss over the batch (x, y) at `parameters`; the mean gradient into `gradient` (zeroed)."""
        raise NotImplementedError(f"{type(self).__name__} must implement loss_and_gradient(parameters, gradient, x, y)")

    def loss(self, parameters, x, y):
        """The mean loss over (x, y) at `parameters` (validation, test and final scores)."""
        return self.loss_and_gradient(parameters, np.zeros(self.parameter_count, self.dtype), x, y)


_shard = partial(Setting, "_s", validate=_n.shardopt_sharding_options_validate_strict)


class ShardingConfiguration:
    """How a sharded optimizer communicates (AiDotNet's ShardingConfiguration) over the library's
    shardopt_sharding_options: the constructor is CreateDefault, the factories are the library's presets, every
    value set is checked by the library at once (shardopt_sharding_options_validate_strict: also a 0 where the C
    options read 0 as their default). learning_rate, when set, replaces the optimizer options' rate (0: none);
    auto_sync_gradients False turns DDP/ZeRO-1 into Local SGD (averaging every local_steps steps)."""

    def __init__(self, backend, learning_rate=None, _preset=_n.SHARDOPT_SHARDING_DEFAULT):
        if not isinstance(backend, CommunicationBackend):
            raise TypeError(f"backend must be a CommunicationBackend, not {type(backend).__name__}")
        self.communication_backend, self._s, self._method = backend, _n.shardopt_sharding_options(), None
        _n.shardopt_sharding_options_init_preset(self._s, self._s.struct_size, _preset)
        if learning_rate is not None:
            self.learning_rate = learning_rate

    learning_rate = _shard("learning_rate")
    auto_sync_gradients = _shard("auto_sync_gradients", SWITCH)
    minimum_parameter_group_size = _shard("parameter_group_size", int)
    local_steps = _shard("local_sgd_period", int)
    gradient_accumulation_steps = _shard("gradient_accumulation_steps", int)
    max_grad_norm = _shard("max_grad_norm")
    broadcast_initial_parameters = _shard("broadcast_initial", SWITCH)
    compression_ratio = _shard("compression_ratio")
    error_feedback = _shard("error_feedback", SWITCH)
    power_sgd_rank = _shard("power_sgd_rank", int)
    cpu_offload_optimizer = _shard("cpu_offload_optimizer", SWITCH)
    cpu_offload_gradients = _shard("cpu_offload_gradients", SWITCH)
    cpu_offload_params = _shard("cpu_offload_params", SWITCH)

    @property
    def enable_gradient_compression(self):
        return self._s.compression != GradientCompression.NONE

    @enable_gradient_compression.setter
    def enable_gradient_compression(self, value):
        method = self.gradient_compression
        self._s.compression, self._method = (method, None) if value else (GradientCompression.NONE, method)

    @property
    def gradient_compression(self):
        """The method while enable_gradient_compression is on; until one is chosen, the low-bandwidth preset's."""
        if self.enable_gradient_compression:
            return GradientCompression(self._s.compression)
        return self._method or GradientCompression(ShardingConfiguration.create_for_low_bandwidth(
            self.communication_backend)._s.compression)

    @gradient_compression.setter
    def gradient_compression(self, value):
        if self.enable_gradient_compression:
            self._s.compression = GradientCompression.parse(value)
        else:
            self._method = GradientCompression.parse(value)

    create_default = classmethod(lambda cls, backend: cls(backend))
    create_for_high_bandwidth = classmethod(lambda cls, b: cls(b, _preset=_n.SHARDOPT_SHARDING_HIGH_BANDWIDTH))
    create_for_low_bandwidth = classmethod(lambda cls, b: cls(b, _preset=_n.SHARDOPT_SHARDING_LOW_BANDWIDTH))
    create_for_zero_offload = classmethod(lambda cls, b: cls(b, _preset=_n.SHARDOPT_SHARDING_ZERO_OFFLOAD))
    create_for_zero_offload_full = classmethod(lambda cls, b: cls(b, _preset=_n.SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL))


class Dataset(enum.IntEnum):
    """Which set a model callback's sample indices index."""
    TRAINING, VALIDATION, TEST = _n.SHARDOPT_DATASET_TRAINING, _n.SHARDOPT_DATASET_VALIDATION, _n.SHARDOPT_DATASET_TEST


class OptimizationInputData:
    """What optimize() trains on: data only (the training settings are the options'). AiDotNet's form: x_train,
    y_train (rows are samples: anything indexable by an integer index array), optionally x_validation, y_validation
    (then the best solution is the validation loss's) and x_test, y_test; initial_solution: packed parameters to
    start from. The lower-level form: num_samples, num_validation_samples, num_test_samples."""

    def __init__(self, *, x_train=None, y_train=None, x_validation=None, y_validation=None, x_test=None, y_test=None,
                 initial_solution=None, num_samples=None, num_validation_samples=0, num_test_samples=0):
        self.__dict__.update((k, v) for k, v in locals().items() if k != "self")


def _record(name, fields, doc, defaults=()):
    cls = namedtuple(name, fields, defaults=defaults)
    cls.__doc__, cls.of = doc, classmethod(lambda c, struct: c(*(getattr(struct, f) for f in c._fields)))
    return cls


DatasetResult = _record("DatasetResult", "loss x y predictions", "The best solution's loss on one set, its data and "
                        "the model's predictions (AiDotNet's DatasetResult); NaN when not evaluated.", (None,) * 3)
OptimizationResult = _record(
    "OptimizationResult", "best_solution best_fitness_score iterations steps best_epoch stopped_early fitness_history "
    "training_loss_history validation_loss_history learning_rate_history training_result validation_result "
    "test_result", "AiDotNet's OptimizationResult: iterations are epochs, steps optimizer steps; fitness_history the "
    "score of each epoch (the validation loss when a validation set is given, else the training loss); a set's "
    "*_result None when it was not given, validation_loss_history NaN.")
StepResult = _record("StepResult", "applied skipped_nonfinite accumulating grad_norm reduce_wait_seconds update_seconds "
                     "post_update_seconds bytes_sent", "One step (shardopt_step_result).")
MemoryStats = _record("MemoryStats", "params_bytes grads_bytes optimizer_state_bytes buffer_bytes peak_buffer_bytes "
                      "total_bytes compression_bytes host_params_bytes host_grads_bytes host_optimizer_state_bytes "
                      "host_total_bytes", "Bytes this rank holds (shardopt_memory_stats).")
