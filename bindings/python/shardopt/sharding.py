"""ShardingConfiguration and the sharded optimizers (AiDotNet.DistributedTraining, Python naming)."""
import contextlib
import enum
import os
from collections import namedtuple
from functools import partial

import numpy as np

from . import shardopt_native as _n
from ._settings import SWITCH, Setting, parse_enum, set_checked
from ._views import (Guard, NativeOwner, NativeResource, ObjectDisposedError, as_native_array, copy_in, copy_out,
                     native_view, writable_native_array)
from .backends import CommunicationBackend
from .errors import ShardoptError
from .optimizers import Optimizer

_FLOAT_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64}


class GradientCompression(enum.IntEnum):
    """How gradients are compressed on the wire (docs/compression.md); a name works too ("int8", "TopK", ...)."""
    NONE, BF16, FP16, INT8 = (_n.SHARDOPT_COMPRESSION_NONE, _n.SHARDOPT_COMPRESSION_BF16, _n.SHARDOPT_COMPRESSION_FP16,
                              _n.SHARDOPT_COMPRESSION_INT8)
    INT4, TOP_K, POWER_SGD = _n.SHARDOPT_COMPRESSION_INT4, _n.SHARDOPT_COMPRESSION_TOP_K, _n.SHARDOPT_COMPRESSION_POWER_SGD

    @classmethod
    def parse(cls, value):
        return parse_enum(cls, value, "gradient compression")


def _count(name, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"tensor '{name}': {what} must be an integer, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"tensor '{name}': {what} must be >= 1 (got {value})")
    return int(value)


class ParameterLayout:
    """The model's tensors in order, of one element type (the model's): add(name, count or (rows, cols)),
    add_matrix (a row-major matrix, which PowerSGD compression approximates), end_bucket() (an FSDP unit ends)."""

    def __init__(self, dtype=np.float32):
        self.dtype, self.tensors = np.dtype(dtype), []  # [name, count, tp_replicated, ends_bucket, shape or None]
        if self.dtype not in _FLOAT_DTYPES:
            raise ValueError(f"parameters must be float32 or float64, not {self.dtype}")

    def add(self, name, count, tp_replicated=False):
        if isinstance(count, tuple) and len(count) == 2:
            return self.add_matrix(name, *count, tp_replicated)
        return self._add(name, _count(name, "count", count), tp_replicated, None)

    def add_matrix(self, name, rows, cols, tp_replicated=False):
        shape = (_count(name, "rows", rows), _count(name, "cols", cols))
        return self._add(name, shape[0] * shape[1], tp_replicated, shape)

    def _add(self, name, count, tp_replicated, shape):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tensor needs a non-empty name (got {name!r})")
        self.tensors.append([name, count, bool(tp_replicated), False, shape])
        return self

    def end_bucket(self):
        if self.tensors:
            self.tensors[-1][3] = True
        return self

    element_count = property(lambda self: sum(t[1] for t in self.tensors))

    def _native(self):
        p = _n.shardopt_params_create(_FLOAT_DTYPES[self.dtype], 0)
        try:
            for name, count, tp, ends, shape in self.tensors:
                if shape is None:
                    _n.shardopt_params_add(p, name, count, int(tp))
                else:
                    _n.shardopt_params_add_matrix(p, name, *shape, int(tp))
                if ends:
                    _n.shardopt_params_end_bucket(p)
        except BaseException:
            _n.shardopt_params_destroy(p)
            raise
        return p


_shard = partial(Setting, "_s", validate=_n.shardopt_sharding_options_validate)


class ShardingConfiguration:
    """How a sharded optimizer communicates (AiDotNet's ShardingConfiguration) over the library's
    shardopt_sharding_options: the constructor is CreateDefault, the factories are the library's presets, every
    value set is checked by the library at once. learning_rate, when set, replaces the optimizer options' rate;
    auto_sync_gradients False turns DDP/ZeRO-1 into Local SGD (averaging every local_steps steps)."""

    def __init__(self, backend, learning_rate=None, _preset=_n.SHARDOPT_SHARDING_DEFAULT):
        if not isinstance(backend, CommunicationBackend):
            raise TypeError(f"backend must be a CommunicationBackend, not {type(backend).__name__}")
        self.communication_backend, self._s, self._method = backend, _n.shardopt_sharding_options(), None
        _n.shardopt_sharding_options_init_preset(self._s, self._s.struct_size, _preset)
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
    y_train (rows are samples, indexable by an integer index array, e.g. numpy arrays), optionally x_validation,
    y_validation (the best solution is chosen on the validation loss) and x_test, y_test; initial_solution: packed
    parameters to start from. The lower-level form: num_samples (num_validation_samples, num_test_samples)."""

    def __init__(self, *, x_train=None, y_train=None, x_validation=None, y_validation=None, x_test=None, y_test=None,
                 initial_solution=None, num_samples=None, num_validation_samples=0, num_test_samples=0):
        self.__dict__.update((k, v) for k, v in locals().items() if k != "self")


DatasetResult = namedtuple("DatasetResult", "loss x y predictions", defaults=(None, None, None))
DatasetResult.__doc__ = "The best solution's loss on one set (AiDotNet's DatasetResult); NaN when not evaluated."
OptimizationResult = namedtuple("OptimizationResult", "best_solution best_fitness_score iterations steps best_epoch "
                                "stopped_early fitness_history training_loss_history validation_loss_history "
                                "learning_rate_history training_result validation_result test_result")
OptimizationResult.__doc__ = """AiDotNet's OptimizationResult: iterations are epochs (AiDotNet's), steps optimizer
steps; fitness_history the score of each epoch (the validation loss when a validation set is given, else the
training loss); validation_loss_history NaN without a validation set; *_result: None for a set not given."""
StepResult = namedtuple("StepResult", "applied skipped_nonfinite accumulating grad_norm reduce_wait_seconds "
                        "update_seconds post_update_seconds bytes_sent")
MemoryStats = namedtuple("MemoryStats", "params_bytes grads_bytes optimizer_state_bytes buffer_bytes peak_buffer_bytes "
                         "total_bytes compression_bytes host_params_bytes host_grads_bytes host_optimizer_state_bytes "
                         "host_total_bytes")


def _record(cls, struct):
    return cls(*(getattr(struct, f) for f in cls._fields))


class ShardedOptimizer(NativeResource):
    """IShardedOptimizer: wraps a base optimizer and runs it over the configuration's backend. The layout and its
    element type come from the wrapped optimizer's model, `layout=` or initialize(); creation is collective and
    checked (ranks whose layouts or options differ fail on every rank with MismatchError). `parameters=`: the
    parameters in your own array (padded_count_for(layout) elements), without copies (DDP, ZeRO-1/2, Local SGD).
    After close() every method and every view it returned raises ObjectDisposedError."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, layout=None, initial=None, parameters=None):
        if not isinstance(wrapped_optimizer, Optimizer):
            raise TypeError(f"wrapped_optimizer must be an Optimizer, not {type(wrapped_optimizer).__name__}")
        if not isinstance(sharding_configuration, ShardingConfiguration):
            raise TypeError("sharding_configuration must be a ShardingConfiguration, not "
                            f"{type(sharding_configuration).__name__}")
        self._wrapped, self._config, self._owner, self._closed, self._guards, self._init, self._last = (
            wrapped_optimizer, sharding_configuration, None, False, {}, None, None)
        self._sharding = sharding_configuration._s.copy()  # this optimizer's: the class's strategy and settings
        set_checked(self._sharding, "strategy", self._strategy, type(self).__name__,
                    _n.shardopt_sharding_options_validate)
        self._configure(self._sharding)
        if layout is None and self.model is not None:
            layout, initial = self.model.parameter_layout(), self.model.get_parameters() if initial is None else initial
        if layout is not None:
            self.initialize(layout, initial, parameters)

    def _configure(self, s):
        """Subclasses: their settings into s, each checked by the library (set_checked)."""

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
        if not isinstance(layout, ParameterLayout) or not layout.tensors:
            raise TypeError(f"layout must be a ParameterLayout with tensors, not {layout!r}")
        self._dtype = layout.dtype
        if initial is not None:
            initial = as_native_array(initial, self._dtype, "initial", layout.element_count)
        if parameters is not None:
            parameters = writable_native_array(parameters, self._dtype, "parameters", self.padded_count_for(layout))
        args, params = (self._config.communication_backend.handle,), layout._native()
        try:
            args += (params, self._wrapped.options._optimizer, self._sharding, initial)
            handle = (_n.shardopt_optimizer_create(*args) if parameters is None else
                      _n.shardopt_optimizer_create_external(*args, parameters))
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
        self._lr_seen = self._wrapped.options.learning_rate
        self._init = (layout, None if initial is None else initial.copy(), parameters)
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
        """Collective: True on every rank when any rank votes to stop (a max-allreduce, as in AiDotNet); vote=None
        votes the library's early-stopping decision of this rank's last optimize()."""
        vote = self._last is not None and self._last.stopped_early if vote is None else vote
        return bool(_n.shardopt_optimizer_should_early_stop(self._h, int(bool(vote))))

    def _sync_options_lr(self):
        """A learning_rate set on get_options() since we last looked applies from now on."""
        if self._wrapped.options.learning_rate != self._lr_seen:
            self._lr_seen = self._wrapped.options.learning_rate
            _n.shardopt_optimizer_set_learning_rate(self._h, self._lr_seen)

    def _lr_from_native(self):
        """After a load the checkpoint's rate is the optimizer's: get_options() shows it."""
        self._wrapped.options.learning_rate = self._lr_seen = _n.shardopt_optimizer_learning_rate(self._h)

    @property
    def learning_rate(self):
        """The rate of later steps, read from the library (set it the same on every rank)."""
        self._sync_options_lr()
        return _n.shardopt_optimizer_learning_rate(self._h)

    @learning_rate.setter
    def learning_rate(self, value):
        self._sync_options_lr()
        _n.shardopt_optimizer_set_learning_rate(self._h, float(value))

    def optimize(self, model_or_input, input_data=None):
        """Collective: trains as the wrapped optimizer's options say, with the library's one training loop
        (shardopt_optimizer_train); returns an OptimizationResult. The optimizer keeps the last epoch's parameters.

        optimize(input_data): AiDotNet's form, over the wrapped optimizer's model, which holds the best solution
        afterwards. optimize(model, input_data): input_data gives num_samples (num_validation_samples,
        num_test_samples); model(params, grad, samples) -> the mean loss over the sample indices at `params`, the
        mean gradient written into `grad` (zeroed): arrays owned by the call. With validation or test samples it
        is called model(params, grad, samples, dataset), grad None when only the loss is asked for. An exception
        the model raises on one rank fails every rank: that rank re-raises it, the others raise InvalidStateError
        naming it."""
        fn, d = (None, model_or_input) if input_data is None else (model_or_input, input_data)
        if fn is None and self.model is None and isinstance(d, OptimizationInputData):
            raise TypeError("optimize(input_data) needs the wrapped optimizer's model (e.g. AdamOptimizer(model, "
                            "options)); or call optimize(model_fn, input_data)")
        if not isinstance(d, OptimizationInputData) or (fn is not None and not callable(fn)):
            raise TypeError("optimize(input_data) or optimize(model, input_data): model a callable (params, grad, "
                            "samples) -> loss, input_data an OptimizationInputData")
        h, m, count, dtype = self._h, self.model, self.element_count, self._dtype
        sets = _data_sets(d) if fn is None else None
        counts = [len(s[0]) if s else 0 for s in sets] if fn is None else [d.num_samples, d.num_validation_samples,
                                                                         d.num_test_samples]
        if counts[0] is None:
            raise TypeError("input_data needs num_samples (or x_train/y_train with the wrapped optimizer's model)")
        t, more = self.get_options()._training_for(*map(int, counts)), bool(counts[1] or counts[2])

        def batch(dataset, params, grad, samples, n, epoch, step):
            p, s = copy_in(params, count, dtype), copy_in(samples, n, np.int64)
            g = np.zeros(count, dtype) if grad is not None or not more else None
            if fn is None:
                x, y = sets[dataset]
                loss = m.loss(p, x[s], y[s]) if grad is None else m.loss_and_gradient(p, g, x[s], y[s])
            else:
                loss = fn(p, g, s, Dataset(dataset)) if more else fn(p, g, s)
            if grad is not None:
                copy_out(grad, g)
            return loss
        if d.initial_solution is not None:
            self.set_parameters(d.initial_solution)
        self._sync_options_lr()
        best, history, r = np.empty(count, dtype), np.full((3, t.max_epochs), np.nan), _n.shardopt_training_result()
        r.best_parameters, r.best_parameters_count, r.history_capacity = best, count, t.max_epochs
        r.training_loss_history, r.validation_loss_history, r.learning_rate_history = history
        try:
            _n.shardopt_optimizer_train(h, batch, t, r)
        except BaseException as e:
            if not isinstance(e, ShardoptError) and hasattr(e, "add_note"):
                e.add_note(f"(raised by the model on rank {self.rank}; every rank's optimize failed)")
            raise
        train_h, valid_h, lr_h = (history[i, :r.epochs].tolist() for i in range(3))
        xy = sets or [None] * 3
        pred = (lambda x: m.predict(x, best)) if fn is None and hasattr(m, "predict") else (lambda x: None)
        results = [None if not c else DatasetResult(loss, *(xy[i] or (None, None)), pred(xy[i][0]) if xy[i] else None)
                   for i, (c, loss) in enumerate(zip(counts, (r.training_loss, r.validation_loss, r.test_loss)))]
        self._last = OptimizationResult(best, r.best_score, r.epochs, r.steps, r.best_epoch, bool(r.stopped_early),
                                        valid_h if counts[1] else train_h, train_h, valid_h, lr_h, *results)
        if fn is None:
            m.set_parameters(best)
        return self._last

    def reset(self):
        """Collective: back to right after initialize(): initial parameters, fresh state, step 0, the options' rate."""
        if self._init is None:
            self._h  # noqa: B018 - raises the right error
        self._release_owner()
        self.initialize(*self._init)

    # ---- checkpoints (collective: every rank calls with the same arguments) ----
    def serialize(self):
        """The consolidated checkpoint as bytes, the same on every rank; any strategy and world size loads it."""
        return _n.shardopt_optimizer_serialize(self._h)

    def deserialize(self, data):
        """Loads serialize()'s bytes (every rank the same); CorruptDataError (OSError) for damaged bytes,
        InvalidArgumentError for another layout; a failed load changes nothing."""
        _n.shardopt_optimizer_deserialize(self._h, data)
        self._lr_from_native()

    def save_model(self, path, consolidated=False):
        """A checkpoint in directory `path`: every rank its shard, or (consolidated) one file by rank 0."""
        form = _n.SHARDOPT_CHECKPOINT_CONSOLIDATED if consolidated else _n.SHARDOPT_CHECKPOINT_SHARDED
        _n.shardopt_optimizer_save(self._h, os.fsdecode(os.fspath(path)), form)

    def load_model(self, path):
        """Loads a checkpoint of either form, saved by any strategy and world size."""
        _n.shardopt_optimizer_load(self._h, os.fsdecode(os.fspath(path)))
        self._lr_from_native()

    # ---- layout; parameters and gradients as views of library memory (NativeArray) ----
    tensor_count = property(lambda self: _n.shardopt_optimizer_tensor_count(self._h))
    bucket_count = property(lambda self: _n.shardopt_optimizer_bucket_count(self._h))
    element_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[0])
    padded_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[1])
    step_count = property(lambda self: _n.shardopt_optimizer_step_count(self._h))
    bytes_sent = property(lambda self: _n.shardopt_optimizer_bytes_sent(self._h), doc="bytes this rank moved so far")
    tensor_size = lambda self, tensor: _n.shardopt_optimizer_tensor_info(self._h, tensor)[0]  # noqa: E731
    tensor_bucket = lambda self, tensor: _n.shardopt_optimizer_tensor_info(self._h, tensor)[1]  # noqa: E731
    bucket_size = lambda self, bucket: _n.shardopt_optimizer_bucket_info(self._h, bucket)  # noqa: E731

    def _view(self, address, count, *guards):
        return native_view(address, count, self._dtype, self._owner, (self._owner,) + guards)

    @property
    def parameters(self):
        """The full flat parameter buffer (padded), a view; not for FSDP (sharded at rest)."""
        return self._view(_n.shardopt_optimizer_parameters(self._h), self.padded_count)

    def tensor_parameters(self, tensor):
        return self._view(_n.shardopt_optimizer_tensor_parameters(self._h, tensor), self.tensor_size(tensor))

    def get_parameters(self, out=None):
        """A packed copy of all parameters (collective for FSDP and hybrid)."""
        h, count = self._h, self.element_count
        out = np.empty(count, self._dtype) if out is None else writable_native_array(out, self._dtype, "out", count)
        _n.shardopt_optimizer_get_parameters(h, out)
        return out

    def set_parameters(self, values):
        h = self._h
        _n.shardopt_optimizer_set_parameters(h, as_native_array(values, self._dtype, "values", self.element_count))

    def gather(self, bucket):
        """FSDP: the unit's full parameters (collective), a view valid until release(bucket)."""
        address, guard = _n.shardopt_optimizer_gather(self._h, bucket), Guard(f"unit {bucket} was released (gather "
                                                                              "it again for a valid view)")
        if bucket in self._guards:
            self._guards.pop(bucket).invalidate()
        self._guards[bucket] = guard
        return self._view(address, self.bucket_size(bucket), guard)

    def release(self, bucket):
        _n.shardopt_optimizer_release(self._h, bucket)
        if bucket in self._guards:
            self._guards.pop(bucket).invalidate()

    @contextlib.contextmanager
    def gathered(self, bucket):
        try:
            yield self.gather(bucket)
        finally:
            self.release(bucket)

    # ---- the step protocol ----
    def zero_grad(self):
        _n.shardopt_optimizer_zero_grad(self._h)

    def bucket_grad(self, bucket):
        return self._view(*_n.shardopt_optimizer_bucket_grad(self._h, bucket))

    def tensor_grad(self, tensor):
        return self._view(*_n.shardopt_optimizer_tensor_grad(self._h, tensor))

    def grad_ready(self, bucket):
        _n.shardopt_optimizer_grad_ready(self._h, bucket)

    def step(self):
        h, r = self._h, _n.shardopt_step_result()
        self._sync_options_lr()
        _n.shardopt_optimizer_step(h, r)
        return _record(StepResult, r)

    def memory_stats(self):
        """Bytes this rank holds now (not collective)."""
        m = _n.shardopt_memory_stats()
        _n.shardopt_optimizer_memory_stats(self._h, m)
        return _record(MemoryStats, m)

    def _release_owner(self):
        owner, self._owner = self._owner, None
        for g in self._guards.values():
            g.invalidate()
        self._guards.clear()
        if owner is not None:
            owner.invalidate()  # every view raises from now on; the native optimizer goes with the last one

    def close(self):
        """Releases the native optimizer; later uses of it or of a view it returned raise ObjectDisposedError."""
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


def _strategy(name, strategy, doc, base=ShardedOptimizer):
    return type(name, (base,), {"_strategy": strategy, "__doc__": doc, "__module__": __name__})


DDPOptimizer = _strategy("DDPOptimizer", _n.SHARDOPT_DDP, "Data parallel: gradients averaged, full update everywhere.")
ZeRO1Optimizer = _strategy("ZeRO1Optimizer", _n.SHARDOPT_ZERO1, "Optimizer state sharded; parameters all-gathered.")
ZeRO2Optimizer = _strategy("ZeRO2Optimizer", _n.SHARDOPT_ZERO2, "Optimizer state and gradients sharded.")
FSDPOptimizer = _strategy("FSDPOptimizer", _n.SHARDOPT_FSDP, "Parameters, gradients and state sharded (ZeRO-3).")
ZeRO3Optimizer = _strategy("ZeRO3Optimizer", _n.SHARDOPT_FSDP, "FSDPOptimizer, under DeepSpeed's name.", FSDPOptimizer)
LocalSGDOptimizer = _strategy("LocalSGDOptimizer", _n.SHARDOPT_LOCAL_SGD, "Local steps; parameters averaged every "
                              "`local_steps` steps (the configuration's).")


class HybridShardedOptimizer(ShardedOptimizer):
    """A data x tensor x pipeline process grid (AiDotNet's sizes; data_parallel_size -1: the rest of the world);
    data_strategy: the sharded optimizer class inside each data-parallel group (None: the library's default)."""
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


class GradientCompressionOptimizer(ShardedOptimizer):
    """AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions, top-k at compression_ratio
    (use_sparsification, which wins), else int8 (use_quantization), else none; the configuration's error_feedback."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, compression_ratio=None, use_quantization=True,
                 use_sparsification=False, layout=None, initial=None, parameters=None):
        self.compression, self._ratio = (GradientCompression.TOP_K if use_sparsification else GradientCompression.INT8
                                         if use_quantization else GradientCompression.NONE), compression_ratio
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    def _configure(self, s):
        s.compression = int(self.compression)
        if self._ratio is not None:
            set_checked(s, "compression_ratio", float(self._ratio), "compression_ratio",
                        _n.shardopt_sharding_options_validate, zero_means_default=True)
