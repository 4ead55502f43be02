"""ShardingConfiguration and the sharded optimizers (AiDotNet.DistributedTraining, Python naming)."""
import contextlib
import enum
import os
from dataclasses import dataclass, fields
from functools import partial

import numpy as np

from . import shardopt_native as _n
from ._native_resource import NativeResource
from ._settings import SWITCH, Setting, set_checked
from ._views import (Guard, NativeOwner, ObjectDisposedError, as_native_array, copy_in, copy_out, native_view,
                     writable_native_array)
from .backends import CommunicationBackend
from .errors import ShardoptError
from .optimizers import Optimizer

__all__ = ["GradientCompression", "ParameterLayout", "ShardingConfiguration", "Dataset", "OptimizationInputData",
           "OptimizationResult", "DatasetResult", "StepResult", "MemoryStats", "ShardedOptimizer", "DDPOptimizer",
           "ZeRO1Optimizer", "ZeRO2Optimizer", "FSDPOptimizer", "ZeRO3Optimizer", "HybridShardedOptimizer",
           "LocalSGDOptimizer", "GradientCompressionOptimizer"]

_FLOAT_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64}


class GradientCompression(enum.IntEnum):
    """How gradients are compressed on the wire (ShardingConfiguration.gradient_compression). BF16/FP16:
    2 bytes per element; INT8/INT4: blockwise, a scale per block; TOP_K: the compression_ratio
    largest-magnitude elements of each chunk; POWER_SGD: a rank-power_sgd_rank approximation of every
    tensor declared as a matrix (ParameterLayout.add_matrix). Error feedback (on by default) keeps what
    INT8/INT4/TOP_K/POWER_SGD missed for the next step. A name works too ("int8", "top_k", "PowerSGD")."""
    NONE = _n.SHARDOPT_COMPRESSION_NONE
    BF16 = _n.SHARDOPT_COMPRESSION_BF16
    FP16 = _n.SHARDOPT_COMPRESSION_FP16
    INT8 = _n.SHARDOPT_COMPRESSION_INT8
    INT4 = _n.SHARDOPT_COMPRESSION_INT4
    TOP_K = _n.SHARDOPT_COMPRESSION_TOP_K
    POWER_SGD = _n.SHARDOPT_COMPRESSION_POWER_SGD

    @classmethod
    def parse(cls, value):
        """A GradientCompression from itself, its name (any case, with or without '_') or its value."""
        if isinstance(value, str):
            for m in cls:
                if m.name.replace("_", "") == value.replace("_", "").replace("-", "").upper():
                    return m
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in set(cls):
            return cls(int(value))
        raise ValueError(f"unknown gradient compression {value!r} (one of {', '.join(m.name.lower() for m in cls)})")


def _count(name, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"tensor '{name}': {what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"tensor '{name}': {what} must be >= 1 (got {value})")
    return int(value)


class ParameterLayout:
    """The model's tensors, in order: name and element count, of one element type (the model's).
    end_bucket() closes a gradient bucket (an FSDP unit); otherwise tensors are grouped into buckets of
    the configuration's minimum_parameter_group_size elements. add_matrix(name, rows, cols) declares a
    row-major matrix, the tensors PowerSGD compression approximates."""

    def __init__(self, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"parameters must be float32 or float64, not {self.dtype}")
        self.tensors = []  # [name, count, tp_replicated, ends_bucket, (rows, cols) or None]

    def add(self, name, count, tp_replicated=False):
        """A tensor of `count` elements; count may also be a (rows, cols) shape (= add_matrix)."""
        if isinstance(count, tuple):
            if len(count) != 2:
                raise ValueError(f"tensor '{name}': a shape must be (rows, cols), not {count!r}")
            return self.add_matrix(name, count[0], count[1], tp_replicated)
        self.tensors.append([self._name(name), _count(name, "count", count), bool(tp_replicated), False, None])
        return self

    def add_matrix(self, name, rows, cols, tp_replicated=False):
        """A rows x cols row-major matrix (rows * cols elements): PowerSGD compresses it."""
        rows, cols = _count(name, "rows", rows), _count(name, "cols", cols)
        self.tensors.append([self._name(name), rows * cols, bool(tp_replicated), False, (rows, cols)])
        return self

    @staticmethod
    def _name(name):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tensor needs a non-empty name (got {name!r})")
        return name

    def end_bucket(self):
        if self.tensors:
            self.tensors[-1][3] = True
        return self

    @property
    def element_count(self):
        return sum(t[1] for t in self.tensors)

    def _native(self):
        p = _n.shardopt_params_create(_FLOAT_DTYPES[self.dtype], 0)
        try:
            for name, count, tp, ends, shape in self.tensors:
                if shape is None:
                    _n.shardopt_params_add(p, name, count, int(tp))
                else:
                    _n.shardopt_params_add_matrix(p, name, shape[0], shape[1], int(tp))
                if ends:
                    _n.shardopt_params_end_bucket(p)
        except BaseException:
            _n.shardopt_params_destroy(p)
            raise
        return p


_shard = partial(Setting, "_s", validate=_n.shardopt_sharding_options_validate)


class ShardingConfiguration:
    """How a sharded optimizer communicates (AiDotNet's ShardingConfiguration), over the library's
    shardopt_sharding_options: the constructor is CreateDefault, the factories are the library's
    presets, and every value set is checked by the library at once.

    learning_rate: when set, the optimizer steps with it instead of its options' rate (one rate).
    auto_sync_gradients: False turns DDP/ZeRO-1 into Local SGD (parameters averaged every `local_steps`
    steps); sharded strategies refuse it. minimum_parameter_group_size: the gradient bucket (FSDP unit)
    size in elements. broadcast_initial_parameters: the initial parameters are rank 0's (as PyTorch
    DDP). enable_gradient_compression / gradient_compression / compression_ratio / error_feedback /
    power_sgd_rank: compression of every gradient reduction. cpu_offload_*: ZeRO-Offload of an
    optimizer in CUDA memory (docs/offload.md); in host memory they are accepted and change nothing."""

    def __init__(self, backend, learning_rate=None, _preset=_n.SHARDOPT_SHARDING_DEFAULT):
        if not isinstance(backend, CommunicationBackend):
            raise TypeError(f"backend must be a CommunicationBackend, not {type(backend).__name__}")
        self.communication_backend = backend
        self._s = _n.shardopt_sharding_options()
        _n.shardopt_sharding_options_init_preset(self._s, self._s.struct_size, _preset)
        self._method = None  # gradient_compression chosen while compression is off
        if learning_rate is not None:
            self.learning_rate = learning_rate

    learning_rate = _shard("learning_rate", zero_means_default=True)
    auto_sync_gradients = _shard("auto_sync_gradients", SWITCH)
    minimum_parameter_group_size = _shard("parameter_group_size", int)
    local_steps = _shard("local_sgd_period", int, zero_means_default=True)
    gradient_accumulation_steps = _shard("gradient_accumulation_steps", int, zero_means_default=True)
    max_grad_norm = _shard("max_grad_norm")
    broadcast_initial_parameters = _shard("broadcast_initial", SWITCH)
    compression_ratio = _shard("compression_ratio", zero_means_default=True)
    error_feedback = _shard("error_feedback", SWITCH)
    power_sgd_rank = _shard("power_sgd_rank", int, zero_means_default=True)
    cpu_offload_optimizer = _shard("cpu_offload_optimizer", SWITCH)
    cpu_offload_gradients = _shard("cpu_offload_gradients", SWITCH)
    cpu_offload_params = _shard("cpu_offload_params", SWITCH)

    @property
    def enable_gradient_compression(self):
        return self._s.compression != GradientCompression.NONE

    @enable_gradient_compression.setter
    def enable_gradient_compression(self, value):
        method = self.gradient_compression
        self._s.compression = method if value else GradientCompression.NONE
        self._method = None if value else method

    @property
    def gradient_compression(self):
        """The method used while enable_gradient_compression is on (a GradientCompression or its name); until
        one is chosen, the low-bandwidth preset's."""
        if self.enable_gradient_compression:
            return GradientCompression(self._s.compression)
        return self._method or _low_bandwidth_method()

    @gradient_compression.setter
    def gradient_compression(self, value):
        method = GradientCompression.parse(value)
        if self.enable_gradient_compression:
            set_checked(self._s, "compression", int(method), "gradient_compression",
                        _n.shardopt_sharding_options_validate)
        else:
            self._method = method

    @classmethod
    def create_default(cls, backend):
        return cls(backend)

    @classmethod
    def create_for_high_bandwidth(cls, backend):
        return cls(backend, _preset=_n.SHARDOPT_SHARDING_HIGH_BANDWIDTH)

    @classmethod
    def create_for_low_bandwidth(cls, backend):
        return cls(backend, _preset=_n.SHARDOPT_SHARDING_LOW_BANDWIDTH)

    @classmethod
    def create_for_zero_offload(cls, backend):
        return cls(backend, _preset=_n.SHARDOPT_SHARDING_ZERO_OFFLOAD)

    @classmethod
    def create_for_zero_offload_full(cls, backend):
        return cls(backend, _preset=_n.SHARDOPT_SHARDING_ZERO_OFFLOAD_FULL)


def _low_bandwidth_method():
    s = _n.shardopt_sharding_options()
    _n.shardopt_sharding_options_init_preset(s, s.struct_size, _n.SHARDOPT_SHARDING_LOW_BANDWIDTH)
    return GradientCompression(s.compression)


class Dataset(enum.IntEnum):
    """Which set a model callback's sample indices index."""
    TRAINING = _n.SHARDOPT_DATASET_TRAINING
    VALIDATION = _n.SHARDOPT_DATASET_VALIDATION
    TEST = _n.SHARDOPT_DATASET_TEST


class OptimizationInputData:
    """What optimize() trains on: data only (the training settings are the options').

    AiDotNet's form: x_train / y_train (rows are samples; anything indexable by an integer index array,
    e.g. numpy arrays), optionally x_validation / y_validation (the best solution is chosen on the
    validation loss) and x_test / y_test (reported in the result); initial_solution: packed parameters to
    start from. The lower-level form: num_samples (and num_validation_samples, num_test_samples) with a
    model callable over sample indices (ShardedOptimizer.optimize)."""

    def __init__(self, *, x_train=None, y_train=None, x_validation=None, y_validation=None, x_test=None,
                 y_test=None, initial_solution=None, num_samples=None, num_validation_samples=0, num_test_samples=0):
        self.x_train, self.y_train, self.x_validation, self.y_validation = x_train, y_train, x_validation, y_validation
        self.x_test, self.y_test, self.initial_solution = x_test, y_test, initial_solution
        self.num_samples, self.num_validation_samples, self.num_test_samples = (num_samples, num_validation_samples,
                                                                                num_test_samples)


@dataclass
class DatasetResult:
    """The best solution's loss on one set (AiDotNet's DatasetResult, loss only); NaN when not evaluated."""
    loss: float
    x: object = None
    y: object = None
    predictions: object = None


@dataclass
class OptimizationResult:
    """AiDotNet's OptimizationResult: iterations is the epochs run (AiDotNet's iterations), steps the
    optimizer steps; fitness_history is the score of each epoch (the validation loss when a validation set
    is given, else the training loss); validation_loss_history holds NaN without a validation set."""
    best_solution: np.ndarray
    best_fitness_score: float
    iterations: int
    steps: int
    best_epoch: int
    stopped_early: bool
    fitness_history: list
    training_loss_history: list
    validation_loss_history: list
    learning_rate_history: list
    training_result: DatasetResult = None
    validation_result: DatasetResult = None
    test_result: DatasetResult = None


@dataclass
class StepResult:
    applied: bool
    skipped_nonfinite: bool
    accumulating: bool
    grad_norm: float
    reduce_wait_seconds: float  # waiting for gradient reductions; the update; the collectives after it
    update_seconds: float
    post_update_seconds: float
    bytes_sent: int  # bytes this rank moved since the previous step returned


@dataclass
class MemoryStats:
    """Bytes this rank holds (shardopt_memory_stats); host_*: ZeRO-Offload's host memory."""
    params_bytes: int
    grads_bytes: int
    optimizer_state_bytes: int
    buffer_bytes: int
    peak_buffer_bytes: int
    total_bytes: int
    compression_bytes: int
    host_params_bytes: int
    host_grads_bytes: int
    host_optimizer_state_bytes: int
    host_total_bytes: int


def _fields_of(cls, struct):
    return cls(**{f.name: getattr(struct, f.name) for f in fields(cls)})


class ShardedOptimizer(NativeResource):
    """IShardedOptimizer: wraps a base optimizer and runs it over the configuration's backend.

    The parameter layout and its element type come from the wrapped optimizer's model (AdamOptimizer(model,
    options)), the constructor (`layout=`) or initialize(); creation is collective and checked: ranks whose
    layouts or options differ fail on every rank (MismatchError naming the first difference). The initial
    parameters are rank 0's unless the configuration's broadcast_initial_parameters is False. Pass
    `parameters=` (a float array of padded_count_for(layout) elements) to keep the parameters in your own
    array without copies (DDP, ZeRO-1, ZeRO-2, Local SGD). After close() every method and every view it
    returned raises ObjectDisposedError."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, layout=None, initial=None, parameters=None):
        if not isinstance(wrapped_optimizer, Optimizer):
            raise TypeError(f"wrapped_optimizer must be an Optimizer, not {type(wrapped_optimizer).__name__}")
        if not isinstance(sharding_configuration, ShardingConfiguration):
            raise TypeError(f"sharding_configuration must be a ShardingConfiguration, not "
                            f"{type(sharding_configuration).__name__}")
        self._wrapped, self._config = wrapped_optimizer, sharding_configuration
        self._owner, self._closed, self._gather_guards, self._init_args, self._last = None, False, {}, None, None
        self._sharding = sharding_configuration._s.copy()  # this optimizer's: the class's strategy and settings
        set_checked(self._sharding, "strategy", self._strategy, type(self).__name__,
                    _n.shardopt_sharding_options_validate)
        self._configure(self._sharding)
        model = wrapped_optimizer.model
        if layout is None and model is not None:
            layout, initial = model.parameter_layout(), model.get_parameters() if initial is None else initial
        if layout is not None:
            self.initialize(layout, initial, parameters)

    def _configure(self, s):
        """Subclasses: their own settings into s, each checked by the library (set_checked)."""

    def _sharding_options(self):
        return self._sharding

    rank = property(lambda self: self._config.communication_backend.rank)
    world_size = property(lambda self: self._config.communication_backend.world_size)
    wrapped_optimizer = property(lambda self: self._wrapped)
    sharding_configuration = property(lambda self: self._config)
    model = property(lambda self: self._wrapped.model)
    is_initialized = property(lambda self: self._owner is not None)

    def get_options(self):
        """The wrapped optimizer's options; a learning_rate set on them applies from the next step."""
        return self._wrapped.get_options()

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
        self._dtype = layout.dtype
        if initial is not None:
            initial = as_native_array(initial, self._dtype, "initial", layout.element_count)
        if parameters is not None:
            parameters = writable_native_array(parameters, self._dtype, "parameters", self.padded_count_for(layout))
        comm, opts = self._config.communication_backend.handle, self._wrapped.options._optimizer
        params = layout._native()
        try:
            if parameters is not None:
                handle = _n.shardopt_optimizer_create_external(comm, params, opts, self._sharding, initial, parameters)
            else:
                handle = _n.shardopt_optimizer_create(comm, params, opts, self._sharding, initial)
        finally:
            _n.shardopt_params_destroy(params)
        try:
            self._created(handle)
        except BaseException:
            _n.shardopt_optimizer_destroy(handle)
            raise
        # freed once this object is closed and no view of its memory is left; caller parameters outlive it
        self._owner = NativeOwner(handle, _n.shardopt_optimizer_destroy,
                                  f"the {type(self).__name__} was closed (this view of its memory is invalid)",
                                  keep=parameters)
        self._options_lr_seen = self._wrapped.options.learning_rate
        self._init_args = (layout, None if initial is None else initial.copy(), parameters)
        return self

    def _created(self, handle):
        """Subclasses' collective set-up of the native optimizer just created (ElasticOptimizer)."""

    def padded_count_for(self, layout):
        """Elements a `parameters=` array needs for `layout` on this backend."""
        p = layout._native()
        try:
            return _n.shardopt_params_padded_count_for(p, self._sharding, self.world_size)
        finally:
            _n.shardopt_params_destroy(p)

    @property
    def _h(self):
        if self._closed:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed")
        if self._owner is None:
            raise RuntimeError("the optimizer is not initialized (pass layout= or a model to the wrapped optimizer, "
                               "or call initialize())")
        return self._owner.handle

    def synchronize_optimizer_state(self):
        _n.shardopt_optimizer_synchronize_state(self._h)

    def should_early_stop(self, vote=None):
        """Collective: True on every rank when any rank votes to stop (a max-allreduce, as in AiDotNet).
        vote=None votes the library's early-stopping decision of the last optimize() on this rank."""
        if vote is None:
            vote = self._last is not None and self._last.stopped_early
        return bool(_n.shardopt_optimizer_should_early_stop(self._h, int(bool(vote))))

    # ---- learning rate ----
    def _sync_options_lr(self):
        """A learning_rate changed on get_options() since we last looked applies from now on."""
        lr = self._wrapped.options.learning_rate
        if lr != self._options_lr_seen:
            _n.shardopt_optimizer_set_learning_rate(self._h, lr)
            self._options_lr_seen = lr

    def _lr_from_native(self):
        """After a load the checkpoint's rate is the optimizer's: reflect it in get_options()."""
        self._wrapped.options.learning_rate = self._options_lr_seen = _n.shardopt_optimizer_learning_rate(self._h)

    @property
    def learning_rate(self):
        """The learning rate of later steps, read from the library (set it the same on every rank)."""
        self._sync_options_lr()
        return _n.shardopt_optimizer_learning_rate(self._h)

    @learning_rate.setter
    def learning_rate(self, value):
        self._sync_options_lr()
        _n.shardopt_optimizer_set_learning_rate(self._h, float(value))

    # ---- optimize ----
    def optimize(self, model_or_input, input_data=None):
        """Collective: trains as the wrapped optimizer's options say, with the library's one training loop
        (shardopt_optimizer_train): epochs, shuffling, the learning-rate schedule, validation, the best
        epoch, early stopping voted across ranks, max_steps. Returns an OptimizationResult; the optimizer
        keeps the last epoch's parameters.

        optimize(input_data): AiDotNet's form. The model is the wrapped optimizer's (AdamOptimizer(model,
        options)); input_data carries x_train/y_train and optionally validation and test sets; the model
        holds the best solution afterwards.

        optimize(model, input_data): input_data gives num_samples (and num_validation_samples,
        num_test_samples); model(params, grad, samples) -> loss computes the mean loss over the sample
        indices at `params` (read-only) and the mean gradient into `grad` (zeroed on entry): arrays owned
        by the call. With validation or test samples it is called model(params, grad, samples, dataset)
        (a Dataset), grad None when only the loss is asked for.

        An exception raised by the model on one rank fails optimize on every rank: that rank re-raises it,
        the others raise InvalidStateError naming that rank and the exception."""
        if input_data is None and isinstance(model_or_input, OptimizationInputData):
            input_data, fn = model_or_input, None
            if self.model is None:
                raise TypeError("optimize(input_data) needs the wrapped optimizer's model (e.g. AdamOptimizer(model, "
                                "options)); or call optimize(model_fn, input_data)")
        elif model_or_input is None or not callable(model_or_input):
            raise TypeError("model must be a callable (params, grad, samples) -> loss")
        else:
            fn = model_or_input
        if not isinstance(input_data, OptimizationInputData):
            raise TypeError(f"input_data must be an OptimizationInputData, not {type(input_data).__name__}")
        h, d, m = self._h, input_data, self.model
        count, dtype = self.element_count, self._dtype
        sets = _data_sets(d) if fn is None else None
        counts = [len(s[0]) if s else 0 for s in sets] if sets else [d.num_samples, d.num_validation_samples,
                                                                    d.num_test_samples]
        if counts[0] is None:
            raise TypeError("input_data needs num_samples (or x_train/y_train with the wrapped optimizer's model)")
        t = self.get_options()._training_for(*(int(c) for c in counts))
        with_sets = counts[1] or counts[2]

        def batch(dataset, params, grad, samples, n, epoch, step):
            p, s = copy_in(params, count, dtype), copy_in(samples, n, np.int64)
            g = np.zeros(count, dtype) if grad is not None or not with_sets else None
            if fn is None:
                x, y = sets[dataset]
                loss = m.loss(p, x[s], y[s]) if grad is None else m.loss_and_gradient(p, g, x[s], y[s])
            else:
                loss = fn(p, g, s, Dataset(dataset)) if with_sets else fn(p, g, s)
            if grad is not None:
                copy_out(grad, g)
            return loss

        if d.initial_solution is not None:
            self.set_parameters(d.initial_solution)
        self._sync_options_lr()
        best, history = np.empty(count, dtype), np.full((3, t.max_epochs), np.nan)
        r = _n.shardopt_training_result()
        r.best_parameters, r.best_parameters_count, r.history_capacity = best, count, t.max_epochs
        r.training_loss_history, r.validation_loss_history, r.learning_rate_history = history
        try:
            _n.shardopt_optimizer_train(h, batch, t, r)
        except BaseException as e:
            if not isinstance(e, ShardoptError) and hasattr(e, "add_note"):
                e.add_note(f"(raised by the model on rank {self.rank}; every rank's optimize failed)")
            raise
        train_h, valid_h, lr_h = (history[i, :r.epochs].tolist() for i in range(3))

        def result_of(loss, xy):
            if xy is None:
                return None if loss != loss and fn is not None else DatasetResult(loss)
            return DatasetResult(loss, xy[0], xy[1], m.predict(xy[0], best) if hasattr(m, "predict") else None)
        self._last = OptimizationResult(best, r.best_score, r.epochs, r.steps, r.best_epoch, bool(r.stopped_early),
                                        valid_h if counts[1] else train_h, train_h, valid_h, lr_h)
        res = self._last
        if fn is None:
            res.training_result, res.validation_result, res.test_result = (
                result_of(r.training_loss, sets[0]), sets[1] and result_of(r.validation_loss, sets[1]),
                sets[2] and result_of(r.test_loss, sets[2]))
            m.set_parameters(best)
        else:
            res.training_result = DatasetResult(r.training_loss)
            res.validation_result = DatasetResult(r.validation_loss) if counts[1] else None
            res.test_result = DatasetResult(r.test_loss) if counts[2] else None
        return res

    def reset(self):
        """Collective: back to the state right after initialize() (the initial parameters, fresh optimizer
        state, step 0); the learning rate is the options' again."""
        if self._init_args is None:
            self._h  # noqa: B018 - raises the right error
        layout, initial, parameters = self._init_args
        self._release_owner()
        self.initialize(layout, initial, parameters)

    # ---- checkpoints (collective: every rank calls with the same arguments) ----
    def serialize(self):
        """The consolidated checkpoint (parameters, optimizer state, step count) as bytes, identical on every
        rank; loads into any strategy and world size with deserialize()."""
        return _n.shardopt_optimizer_serialize(self._h)

    def deserialize(self, data):
        """Loads bytes from serialize() (every rank the same bytes); CorruptDataError (an OSError) when they
        are damaged, InvalidArgumentError when they hold another layout; a failed load changes nothing."""
        _n.shardopt_optimizer_deserialize(self._h, data)
        self._lr_from_native()

    def save_model(self, path, consolidated=False):
        """Saves a checkpoint into directory `path` (created if missing): sharded (every rank writes its shard)
        or, with consolidated=True, one file written by rank 0 (and model.safetensors)."""
        form = _n.SHARDOPT_CHECKPOINT_CONSOLIDATED if consolidated else _n.SHARDOPT_CHECKPOINT_SHARDED
        _n.shardopt_optimizer_save(self._h, os.fsdecode(os.fspath(path)), form)

    def load_model(self, path):
        """Loads a checkpoint of either form from directory `path`, saved by any strategy and world size."""
        _n.shardopt_optimizer_load(self._h, os.fsdecode(os.fspath(path)))
        self._lr_from_native()

    # ---- layout ----
    tensor_count = property(lambda self: _n.shardopt_optimizer_tensor_count(self._h))
    bucket_count = property(lambda self: _n.shardopt_optimizer_bucket_count(self._h))
    element_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[0])
    padded_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[1])
    step_count = property(lambda self: _n.shardopt_optimizer_step_count(self._h))

    def tensor_size(self, tensor):
        return _n.shardopt_optimizer_tensor_info(self._h, tensor)[0]

    def tensor_bucket(self, tensor):
        return _n.shardopt_optimizer_tensor_info(self._h, tensor)[1]

    def bucket_size(self, bucket):
        return _n.shardopt_optimizer_bucket_info(self._h, bucket)

    # ---- parameters: views of library memory (NativeArray) ----
    def _view(self, address, count, *guards):
        return native_view(address, count, self._dtype, self._owner, (self._owner,) + guards)

    @property
    def parameters(self):
        """The full flat parameter buffer (padded), a view; not for FSDP (sharded at rest)."""
        return self._view(_n.shardopt_optimizer_parameters(self._h), self.padded_count)

    def tensor_parameters(self, tensor):
        return self._view(_n.shardopt_optimizer_tensor_parameters(self._h, tensor), self.tensor_size(tensor))

    def get_parameters(self, out=None):
        """Packed copy of all parameters (collective for FSDP and hybrid)."""
        h, count = self._h, self.element_count
        out = np.empty(count, self._dtype) if out is None else writable_native_array(out, self._dtype, "out", count)
        _n.shardopt_optimizer_get_parameters(h, out)
        return out

    def set_parameters(self, values):
        h = self._h
        _n.shardopt_optimizer_set_parameters(h, as_native_array(values, self._dtype, "values", self.element_count))

    def gather(self, bucket):
        """FSDP: the unit's full parameters (collective) as a view until release(bucket)."""
        address = _n.shardopt_optimizer_gather(self._h, bucket)
        guard = Guard(f"unit {bucket} was released (gather it again for a valid view)")
        old = self._gather_guards.pop(bucket, None)
        if old is not None:
            old.invalidate()
        self._gather_guards[bucket] = guard
        return self._view(address, self.bucket_size(bucket), guard)

    def release(self, bucket):
        _n.shardopt_optimizer_release(self._h, bucket)
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
    def zero_grad(self):
        _n.shardopt_optimizer_zero_grad(self._h)

    def bucket_grad(self, bucket):
        return self._view(*_n.shardopt_optimizer_bucket_grad(self._h, bucket))

    def tensor_grad(self, tensor):
        return self._view(*_n.shardopt_optimizer_tensor_grad(self._h, tensor))

    def grad_ready(self, bucket):
        _n.shardopt_optimizer_grad_ready(self._h, bucket)

    def step(self):
        h = self._h
        self._sync_options_lr()
        r = _n.shardopt_step_result()
        _n.shardopt_optimizer_step(h, r)
        return StepResult(bool(r.applied), bool(r.skipped_nonfinite), bool(r.accumulating), r.grad_norm,
                          r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds, r.bytes_sent)

    def memory_stats(self):
        """Bytes this rank holds now (not collective)."""
        m = _n.shardopt_memory_stats()
        _n.shardopt_optimizer_memory_stats(self._h, m)
        return _fields_of(MemoryStats, m)

    @property
    def bytes_sent(self):
        """Bytes this rank has moved over the optimizer's communicators since it was created (not collective)."""
        return _n.shardopt_optimizer_bytes_sent(self._h)

    # ---- lifetime ----
    def _release_owner(self):
        owner, self._owner = self._owner, None
        for g in self._gather_guards.values():
            g.invalidate()
        self._gather_guards.clear()
        if owner is not None:
            owner.invalidate()  # every view raises from now on; the native optimizer goes with the last one

    def close(self):
        """Releases the native optimizer; every later use of this object or of a view it returned raises
        ObjectDisposedError."""
        self._release_owner()
        self._closed = True

    dispose = close


def _data_sets(d):
    """[(x, y) of the training, validation and test sets, or None], checked."""
    sets = []
    for name, x, y in (("train", d.x_train, d.y_train), ("validation", d.x_validation, d.y_validation),
                       ("test", d.x_test, d.y_test)):
        if (x is None) != (y is None) or (name == "train" and x is None):
            raise ValueError(f"input_data needs both x_{name} and y_{name}" + (", or neither" if name != "train" else ""))
        if x is not None and len(x) != len(y):
            raise ValueError(f"x_{name} has {len(x)} samples, y_{name} {len(y)}")
        sets.append(None if x is None else (x, y))
    return sets


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
    """A data x tensor x pipeline process grid (AiDotNet's sizes; data_parallel_size -1 = the rest of the
    world). data_strategy: the strategy inside each data-parallel group, a sharded optimizer class
    (DDPOptimizer, ZeRO1Optimizer, ZeRO2Optimizer, FSDPOptimizer); None: the library's default."""
    _strategy = _n.SHARDOPT_HYBRID

    def __init__(self, wrapped_optimizer, sharding_configuration, pipeline_parallel_size=1, tensor_parallel_size=1,
                 data_parallel_size=-1, layout=None, initial=None, data_strategy=None):
        self._grid = {"pipeline_parallel_size": pipeline_parallel_size, "tensor_parallel_size": tensor_parallel_size,
                      "data_parallel_size": data_parallel_size,
                      "hybrid_data_strategy": getattr(data_strategy, "_strategy", data_strategy)}
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)

    def _configure(self, s):
        for field, value in self._grid.items():
            if value is not None:
                set_checked(s, field, value, field, _n.shardopt_sharding_options_validate)


class LocalSGDOptimizer(ShardedOptimizer):
    """Local steps; parameters averaged every `local_steps` steps (the configuration's)."""
    _strategy = _n.SHARDOPT_LOCAL_SGD


class GradientCompressionOptimizer(ShardedOptimizer):
    """AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions.
    use_sparsification: top-k at compression_ratio (each chunk's largest-magnitude fraction); else
    use_quantization: int8; neither: none. Sparsification wins when both are set. The configuration's
    error_feedback applies; these arguments replace its compression settings."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, compression_ratio=None, use_quantization=True,
                 use_sparsification=False, layout=None, initial=None, parameters=None):
        self.compression = (GradientCompression.TOP_K if use_sparsification else
                            GradientCompression.INT8 if use_quantization else GradientCompression.NONE)
        self._ratio = compression_ratio
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    def _configure(self, s):
        s.compression = int(self.compression)
        if self._ratio is not None:
            set_checked(s, "compression_ratio", float(self._ratio), "compression_ratio",
                        _n.shardopt_sharding_options_validate, zero_means_default=True)
