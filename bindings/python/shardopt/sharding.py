"""The sharded optimizers (AiDotNet.DistributedTraining, Python naming): IShardedOptimizer and its strategies."""
import contextlib
import operator
import os

import numpy as np

from . import shardopt_native as _n
from ._core import (DeviceArray, Guard, InvalidArgumentError, NativeOwner, NativeResource, ObjectDisposedError,
                    ShardoptError, as_native_array, copy_in, copy_out, device_parameters, dlpack_device, error,
                    in_device_memory, memory_name, native_view, set_checked, writable_native_array)
from .configuration import (Dataset, DatasetResult, GradientCompression, MemorySpace, MemoryStats, OptimizationInputData,
                            OptimizationResult, ParameterLayout, ShardingConfiguration, StepResult)
from .optimizers import Optimizer


class ShardedOptimizer(NativeResource):
    """IShardedOptimizer: wraps a base optimizer and runs it over the configuration's backend (README.md). A subclass
    sets its own sharding fields in self._own, {field: (setting, value or None)}."""
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
        for field, (setting, value) in {"strategy": (type(self).__name__, self._strategy),
                                         **getattr(self, "_own", {})}.items():
            if value is not None:  # each checked by the library as it is set
                set_checked(self._sharding, field, value, setting, _n.shardopt_sharding_options_validate_strict)
        if layout is None and self.model is not None:
            layout, initial = self.model.parameter_layout(), self.model.get_parameters() if initial is None else initial
        if layout is not None:
            self.initialize(layout, initial, parameters)

    def _created(self, handle):
        """Subclasses: the collective set-up of the native optimizer just created (ElasticOptimizer)."""

    _sharding_options = lambda self: self._sharding
    rank = property(lambda self: self._config.communication_backend.rank)
    world_size = property(lambda self: self._config.communication_backend.world_size)
    wrapped_optimizer = property(lambda self: self._wrapped)
    sharding_configuration = property(lambda self: self._config)
    model = property(lambda self: self._wrapped.model)
    is_initialized = property(lambda self: self._owner is not None)
    get_options = lambda self: self._wrapped.get_options()  # a learning_rate set there applies next step

    def initialize(self, layout, initial=None, parameters=None):
        """Collective: creates this rank's native optimizer for `layout` (a ParameterLayout). initial: the packed
        parameters (None: zeros, or with `parameters` what it holds). parameters: the caller's buffer of
        padded_count_for(layout) elements the optimizer keeps its parameters in, updated in place and kept alive
        with the optimizer (DDP, ZeRO-1, ZeRO-2, Local SGD): a writable host array, or with memory = MemorySpace.CUDA
        a tensor in CUDA device memory of the communicator's device (torch, CuPy, ...: through DLPack, whose
        producer orders the optimizer's cuda_stream after its work on the tensor, else __cuda_array_interface__,
        whose pending work must be finished)."""
        if self._closed or self._owner is not None:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed") if self._closed else \
                RuntimeError("the optimizer is already initialized")
        if not isinstance(layout, ParameterLayout) or not layout.tensor_count:
            raise TypeError(f"layout must be a ParameterLayout with tensors, not {layout!r}")
        self._dtype = layout.dtype
        if initial is not None:
            initial = as_native_array(initial, self._dtype, "initial", layout.element_count)
        buffer = keep = None
        if parameters is not None and self._sharding.memory == _n.SHARDOPT_MEMORY_CUDA:  # the caller's device tensor
            count = self.padded_count_for(layout)
            address, keep = device_parameters(parameters, self._dtype, count, self._sharding.cuda_stream,
                                              self._config.communication_backend.device_id)
            buffer = (address, count)  # the typemap's form of device memory
        elif parameters is not None:
            if in_device_memory(parameters):  # never read on the host
                where = (memory_name(d) if (d := dlpack_device(parameters)) else
                         "CUDA device memory (__cuda_array_interface__)")
                raise error(InvalidArgumentError, _n.SHARDOPT_ERR_INVALID_ARGUMENT, f"parameters "
                            f"({type(parameters).__name__}) is in {where}, where host memory is expected: the "
                            f"optimizer's memory is host memory (memory = MemorySpace.CUDA takes device parameters)")
            buffer = keep = writable_native_array(parameters, self._dtype, "parameters", self.padded_count_for(layout))
        args = (self._config.communication_backend.handle, layout._handle, self._wrapped.options._optimizer,
                self._sharding, initial)
        handle = (_n.shardopt_optimizer_create(*args) if buffer is None else
                  _n.shardopt_optimizer_create_external(*args, buffer))
        try:
            self._created(handle)
        except BaseException:
            _n.shardopt_optimizer_destroy(handle)
            raise
        # freed once this object is closed and no view of its memory is left; caller parameters outlive it
        self._owner = NativeOwner(handle, _n.shardopt_optimizer_destroy,
                                  f"the {type(self).__name__} was closed (this view of its memory is invalid)",
                                  keep=keep)
        self._init = (layout, initial, parameters)
        return self

    def padded_count_for(self, layout):
        """Elements a `parameters=` array needs for `layout` on this backend."""
        return _n.shardopt_params_padded_count_for(layout._handle, self._sharding, self.world_size)

    @property
    def _h(self):
        if self._owner is None:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed") if self._closed else RuntimeError(
                "the optimizer is not initialized (pass layout= or a model to the wrapped optimizer, or initialize())")
        return self._owner.handle

    synchronize_optimizer_state = lambda self: _n.shardopt_optimizer_synchronize_state(self._h)

    def should_early_stop(self, vote=None):
        """Collective: True on every rank when any votes to stop (a max-allreduce, as in AiDotNet); vote=None: the
        library's early-stopping decision of this rank's last optimize()."""
        vote = self._last is not None and self._last.stopped_early if vote is None else vote
        return bool(_n.shardopt_optimizer_should_early_stop(self._h, int(bool(vote))))

    def _sync_options_lr(self):  # a learning_rate set on get_options() since the library took it applies from now on
        _n.shardopt_optimizer_follow_options(self._h, self._wrapped.options._optimizer)

    def _lr_from_native(self):  # after a load the checkpoint's rate is the optimizer's: get_options() shows it
        self._wrapped.options.learning_rate = _n.shardopt_optimizer_learning_rate(self._h)

    @property
    def learning_rate(self):
        """The rate of later steps, the library's (set it the same on every rank)."""
        self._sync_options_lr()
        return _n.shardopt_optimizer_learning_rate(self._h)

    @learning_rate.setter
    def learning_rate(self, value):
        self._sync_options_lr()
        _n.shardopt_optimizer_set_learning_rate(self._h, float(value))

    def optimize(self, model_or_input, input_data=None):
        """Collective: trains as the wrapped optimizer's options say, with the library's one training loop
        (shardopt_optimizer_train): optimize(input_data), AiDotNet's form over the wrapped optimizer's model, or
        optimize(model, input_data) with a callable over sample indices (README.md). Returns an
        OptimizationResult; the optimizer keeps the last epoch's parameters, the model the best solution."""
        fn, d = (None, model_or_input) if input_data is None else (model_or_input, input_data)
        if not isinstance(d, OptimizationInputData) or not (callable(fn) if fn is not None else self.model):
            raise TypeError("optimize(input_data) needs the wrapped optimizer's model (AdamOptimizer(model, options)); "
                            "optimize(model, input_data) a callable model(params, grad, samples) -> loss")
        h, m, count, dtype = self._h, self.model, self.element_count, self._dtype
        sets = _data_sets(d) if fn is None else [None] * 3
        counts = [len(s[0]) if s else 0 for s in sets] if fn is None else [d.num_samples, d.num_validation_samples,
                                                                         d.num_test_samples]
        if counts[0] is None:
            raise TypeError("input_data needs num_samples (or x_train/y_train with the wrapped optimizer's model)")
        t, more = self.get_options()._training_for(*map(int, counts)), bool(counts[1] or counts[2])

        if t.device_batches and fn is None:
            raise TypeError("device_batches: the library hands the model device memory, which the wrapped optimizer's "
                            "model (numpy) cannot read; use optimize(model, input_data) with a model that works on the "
                            "device, or leave device_batches off")

        def batch(dataset, params, grad, samples, n, epoch, step, device, stream):  # the library's callback
            if device >= 0:  # device_batches: views of the library's device memory, valid for this call only
                return self._device_batch(fn, more, params, grad, copy_in(samples, n, np.int64), dataset, device, stream)
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
        predict = getattr(m, "predict", None) if fn is None else None
        results = [DatasetResult(loss, *(xy or ()), *([predict(xy[0], best)] if xy and predict else []))
                   if c else None for c, xy, loss in zip(counts, sets, (r.training_loss, r.validation_loss, r.test_loss))]
        self._last = OptimizationResult(best, r.best_score, r.epochs, r.steps, r.best_epoch, bool(r.stopped_early),
                                        valid_h if counts[1] else train_h, train_h, valid_h, lr_h, *results)
        if fn is None:
            m.set_parameters(best)
        return self._last

    def _device_batch(self, fn, more, params, grad, samples, dataset, device, stream):
        """One call of the model on the device: params (read-only) and grad (None for a loss-only call) are DeviceArray
        views of the library's device memory, ordered on `stream`; they expire when the call returns."""
        call = Guard("the batch's call returned (a device_batches view is valid only during the model call)")
        views = [None if a is None else DeviceArray(a, self.element_count, self._dtype, device, stream, self._owner,
                                                     (self._owner, call), readonly=a is params) for a in (params, grad)]
        try:
            return fn(*views, samples, Dataset(dataset)) if more else fn(*views, samples)
        finally:
            call.invalidate()

    def reset(self):
        """Collective: back to right after initialize(): initial parameters, fresh state, step 0, the options' rate."""
        self._h  # noqa: B018 - raises when closed or not initialized
        self._release_owner()
        self.initialize(*self._init)

    # ---- checkpoints (collective: every rank calls with the same arguments) ----
    def serialize(self):
        """The consolidated checkpoint as bytes, the same on every rank; any strategy and world size loads it."""
        return _n.shardopt_optimizer_serialize(self._h)

    def serialize_to(self, fileobj):
        """serialize()'s bytes (but for the head's generation, new each time) written to fileobj: anything with
        write(bytes) that takes every byte (a file opened 'wb', io.BytesIO, a socket's makefile('wb')), a window
        (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB) per call, so no rank holds the whole checkpoint. None: this rank
        wants no bytes (its parts still reach the others). An exception from write ends the writes on its rank and,
        once the stream is over, is raised there; the other ranks raise FileIOError naming it."""
        def write(data):
            n = fileobj.write(data)
            if n is not None and n != len(data):  # a raw stream's short write would lose bytes
                raise OSError(f"write took {n} of {len(data)} bytes (a raw stream: open it buffered)")
        _n.shardopt_optimizer_serialize_to(self._h, None if fileobj is None else write)

    def deserialize(self, data):
        """Loads serialize()'s bytes; CorruptDataError (OSError) for damaged ones, InvalidArgumentError for another
        layout; a failed load changes nothing."""
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

    # ---- the layout; parameters and gradients as views of library memory (NativeArray) ----
    tensor_count = property(lambda self: _n.shardopt_optimizer_tensor_count(self._h))
    bucket_count = property(lambda self: _n.shardopt_optimizer_bucket_count(self._h))
    element_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[0])
    padded_count = property(lambda self: _n.shardopt_optimizer_element_count(self._h)[1])
    step_count = property(lambda self: _n.shardopt_optimizer_step_count(self._h))
    bytes_sent = property(lambda self: _n.shardopt_optimizer_bytes_sent(self._h), doc="bytes this rank moved so far")
    memory = property(lambda self: MemorySpace(_n.shardopt_optimizer_device(self._h)[0]),
                      doc="where the library keeps the parameters, gradients and state (MemorySpace)")
    tensor_size = lambda self, tensor: _n.shardopt_optimizer_tensor_info(self._h, tensor)[0]
    tensor_bucket = lambda self, tensor: _n.shardopt_optimizer_tensor_info(self._h, tensor)[1]
    bucket_size = lambda self, bucket: _n.shardopt_optimizer_bucket_info(self._h, bucket)
    zero_grad = lambda self: _n.shardopt_optimizer_zero_grad(self._h)
    grad_ready = lambda self, bucket: _n.shardopt_optimizer_grad_ready(self._h, bucket)
    bucket_grad = lambda self, bucket: self._view(*_n.shardopt_optimizer_bucket_grad(self._h, bucket))
    tensor_grad = lambda self, tensor: self._view(*_n.shardopt_optimizer_tensor_grad(self._h, tensor))
    tensor_parameters = lambda self, t: self._view(_n.shardopt_optimizer_tensor_parameters(self._h, t), self.tensor_size(t))

    def _view(self, address, count, *guards):
        memory, device, stream = _n.shardopt_optimizer_device(self._h)
        if memory == _n.SHARDOPT_MEMORY_CUDA:  # device memory: never a numpy array (host reads would crash)
            return DeviceArray(address, count, self._dtype, device, stream, self._owner, (self._owner,) + guards)
        return native_view(address, count, self._dtype, self._owner, (self._owner,) + guards)

    @property
    def parameters(self):
        """The full flat parameter buffer (padded), a view; not for FSDP (sharded at rest)."""
        return self._view(_n.shardopt_optimizer_parameters(self._h), self.padded_count)

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
        address = _n.shardopt_optimizer_gather(self._h, bucket)
        self._guards.pop(bucket, Guard("")).invalidate()
        guard = self._guards[bucket] = Guard(f"unit {bucket} was released (gather it again for a valid view)")
        return self._view(address, self.bucket_size(bucket), guard)

    def release(self, bucket):
        _n.shardopt_optimizer_release(self._h, bucket)
        self._guards.pop(bucket, Guard("")).invalidate()

    @contextlib.contextmanager
    def gathered(self, bucket):
        try:
            yield self.gather(bucket)
        finally:
            self.release(bucket)

    def step(self):
        h, r = self._h, _n.shardopt_step_result()
        self._sync_options_lr()
        _n.shardopt_optimizer_step(h, r)
        return StepResult.of(r)

    def memory_stats(self):
        """Bytes this rank holds now (not collective)."""
        m = _n.shardopt_memory_stats()
        _n.shardopt_optimizer_memory_stats(self._h, m)
        return MemoryStats.of(m)

    def _release_owner(self):
        owner, self._owner, guards, self._guards = self._owner, None, self._guards, {}
        for g in list(guards.values()) + ([owner] if owner else []):
            g.invalidate()  # every view raises from now on; the native optimizer goes with the last one

    def close(self):
        """Releases the native optimizer; later uses of it or of a view it returned raise ObjectDisposedError."""
        self._release_owner()
        self._closed, self._init = True, None  # nor the caller's parameters (its views hold them while they live)

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
        self._own = {f: (f, v) for f, v in (("pipeline_parallel_size", pipeline_parallel_size),
                     ("tensor_parallel_size", tensor_parallel_size), ("data_parallel_size", data_parallel_size),
                     ("hybrid_data_strategy", getattr(data_strategy, "_strategy", data_strategy)))}
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)


class GradientCompressionOptimizer(ShardedOptimizer):
    """AiDotNet's GradientCompressionOptimizer: DDP with compressed gradient reductions, top-k at compression_ratio
    (use_sparsification, which wins), else int8 (use_quantization), else none; the configuration's error_feedback."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, compression_ratio=None, use_quantization=True,
                 use_sparsification=False, layout=None, initial=None, parameters=None):
        self.compression = (GradientCompression.TOP_K if use_sparsification else GradientCompression.INT8
                            if use_quantization else GradientCompression.NONE)
        self._own = {"compression": ("compression", int(self.compression)), "compression_ratio": (
            "compression_ratio", None if compression_ratio is None else float(compression_ratio))}
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)


class AsyncSGDOptimizer(ShardedOptimizer):
    """AiDotNet's AsyncSGDOptimizer, asynchronous for real: stale synchronous parallel over a sharded parameter server.
    allow_staleness s: no gradient is applied more than s clocks after its version; 0 is DDP's result bit for bit
    (None: the library's default). Trains through optimize() only."""
    _strategy = _n.SHARDOPT_ASYNC_SGD

    def __init__(self, wrapped_optimizer, sharding_configuration, allow_staleness=None, layout=None, initial=None):
        staleness = None if allow_staleness is None else operator.index(allow_staleness)
        self._own = {"async_staleness": ("allow_staleness", staleness)}
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial)

    allow_staleness = property(lambda self: self._sharding.async_staleness)


class ElasticOptimizer(ShardedOptimizer):
    """AiDotNet's ElasticOptimizer, for real: DDP that checkpoints every checkpoint_every steps (None: the library's)
    into checkpoint_dir (None: $SHARDOPT_CHECKPOINT_DIR) without stopping and, when created, resumes from the latest
    checkpoint there at the world size the job now has, between min_workers and max_workers."""
    _strategy = _n.SHARDOPT_DDP

    def __init__(self, wrapped_optimizer, sharding_configuration, min_workers=1, max_workers=1024,
                 checkpoint_dir=None, checkpoint_every=None, layout=None, initial=None, parameters=None):
        self._e = _n.shardopt_elastic_options()  # each value checked by the library as it is set
        _n.shardopt_elastic_options_init(self._e)
        values = {"min_workers": min_workers, "max_workers": max_workers, "checkpoint_every": checkpoint_every}
        for field, value in values.items():
            if value is not None:
                set_checked(self._e, field, value, field, _n.shardopt_elastic_options_validate_strict)
        self._e.checkpoint_dir = None if checkpoint_dir is None else str(checkpoint_dir)
        super().__init__(wrapped_optimizer, sharding_configuration, layout, initial, parameters)

    _created = lambda self, handle: _n.shardopt_optimizer_make_elastic(handle, self._e)

    def _status(self, field, or_option=False):  # or_option: before initialization, the option given
        if or_option and not self.is_initialized:
            return getattr(self._e, field)
        st = _n.shardopt_elastic_status()
        _n.shardopt_optimizer_elastic_status(self._h, st)
        return getattr(st, field)

    min_workers, max_workers = property(lambda self: self._e.min_workers), property(lambda self: self._e.max_workers)
    checkpoint_dir = property(lambda self: self._status("checkpoint_dir", True))
    checkpoint_every = property(lambda self: self._status("checkpoint_every", True))
    resumed_step = property(lambda self: self._status("resumed_step"), doc="the step loaded at creation; -1: none")
    last_checkpoint_step = property(lambda self: self._status("last_checkpoint_step"), doc="-1: none")
    checkpoint_pending = property(lambda self: bool(self._status("checkpoint_pending")))
    generation = property(lambda self: self._status("generation"), doc="restarts of the job before this run")
    checkpoints_published = property(lambda self: self._status("checkpoints_published"))
    checkpoint = lambda self: _n.shardopt_optimizer_checkpoint_now(self._h)  # collective: one now, at a step boundary
    finish_checkpoint = lambda self: _n.shardopt_optimizer_finish_checkpoint(self._h)  # collective: publish the last
