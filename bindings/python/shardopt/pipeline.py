"""Pipeline parallelism (docs/pipeline.md): your model cut into stages, one per pipeline rank of a
HybridShardedOptimizer(pipeline_parallel_size=p), run by a PipelineRunner.

    class MyStage(PipelineStage):
        def forward(self, call, input):           # -> this chunk's output activation
            ...                                    # last chunk: set call.loss, return None
        def backward(self, call, input, output_gradient):   # -> gradient of `input`
            call.grad(t)[:] += ...                 # parameter gradients, summed over micro-batches

    opt = HybridShardedOptimizer(sgd, config, pipeline_parallel_size=2, layout=my_stage_layout)
    with PipelineRunner(opt, MyStage(), num_micro_batches=8, schedule=PipelineSchedule.ONE_F_ONE_B) as runner:
        result = runner.run_batch()                # every micro-batch, then one optimizer step

Activations are flat arrays of the optimizer's dtype; each chunk's output size for each
micro-batch is agreed with the next stage on the first batch and must not change afterwards.
An exception raised by a stage fails run_batch on every stage: this rank re-raises it, the others
raise RuntimeError naming it.
"""
import ctypes
import enum
from dataclasses import dataclass

import numpy as np

from . import shardopt_native as _n
from ._views import Guard, NativeOwner, ObjectDisposedError, as_native_array, native_view
from .sharding import ShardedOptimizer

__all__ = ["PipelineSchedule", "PipelineStage", "PipelineCall", "PipelineBatchResult", "PipelineRunner"]


class PipelineSchedule(enum.IntEnum):
    """The order of each stage's forwards and backwards. ONE_F_ONE_B holds at most p micro-batches
    per stage; GPIPE all of them; INTERLEAVED_1F1B gives each rank virtual_stages model chunks
    (chunks r, r + p, ...) for a smaller bubble. Names work too ("gpipe", "1f1b", ...). Values are
    the C ABI's shardopt_pipeline_schedule."""
    ONE_F_ONE_B = 0
    GPIPE = 1
    INTERLEAVED_1F1B = 2

    @classmethod
    def parse(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.replace("_", "").replace("-", "").upper()
            aliases = {"1F1B": cls.ONE_F_ONE_B, "ONEFONEB": cls.ONE_F_ONE_B, "GPIPE": cls.GPIPE,
                       "INTERLEAVED1F1B": cls.INTERLEAVED_1F1B, "INTERLEAVED": cls.INTERLEAVED_1F1B}
            if key in aliases:
                return aliases[key]
            raise ValueError(f"unknown pipeline schedule {value!r} (gpipe, 1f1b, interleaved_1f1b)")
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            try:
                return cls(int(value))
            except ValueError:
                pass
        raise ValueError(f"schedule must be a PipelineSchedule or its name, not {value!r}")


class PipelineStage:
    """This rank's model chunk(s). Subclass it and implement both methods; the runner calls them on
    the thread that runs run_batch."""

    def forward(self, call, input):
        """Forward of chunk call.chunk on micro-batch call.micro_batch. `input` (a read-only copy;
        empty on the model's first chunk) -> the output activation (any array of the optimizer's
        dtype, sent flattened). On the model's last chunk (call.last) set call.loss to the
        micro-batch's loss and return None."""
        raise NotImplementedError

    def backward(self, call, input, output_gradient):
        """Backward of the same chunk and micro-batch: `input` is what forward got,
        `output_gradient` the gradient of its output (empty on the last chunk, which
        differentiates its loss). Add the parameter gradients into call.grad(t) and return the
        gradient of `input` (as many elements; None on the model's first chunk)."""
        raise NotImplementedError


class PipelineCall:
    """What one forward or backward call is about. grad() and parameters() are views valid during
    the call only (ObjectDisposedError afterwards)."""
    __slots__ = ("micro_batch", "chunk", "model_chunk", "first", "last", "loss", "_dtype", "_guard")

    def __init__(self, micro_batch, chunk, model_chunk, first, last, dtype):
        self.micro_batch = micro_batch
        self.chunk = chunk              # this rank's chunk, 0 .. virtual_stages - 1
        self.model_chunk = model_chunk  # its place in the model: chunk * p + pipeline rank
        self.first = bool(first)        # the model's first chunk: no input
        self.last = bool(last)          # the model's last chunk: sets loss, no output
        self.loss = None
        self._dtype = dtype
        self._guard = Guard("this PipelineCall's views are valid during its forward/backward only")

    def grad(self, tensor):
        """The gradient of tensor `tensor` (of this stage's layout), summed over the batch's
        micro-batches so far: add this micro-batch's into it."""
        self._guard.check()
        address, nbytes = _n.so_stage_grad(int(tensor))
        return native_view(address, nbytes, self._dtype, None, (self._guard,))

    def parameters(self, tensor):
        """Tensor `tensor`'s parameters (read-only)."""
        self._guard.check()
        address, nbytes = _n.so_stage_parameters(int(tensor))
        return native_view(address, nbytes, self._dtype, None, (self._guard,), readonly=True)

    def _end(self):
        self._guard.invalidate()


@dataclass
class PipelineBatchResult:
    loss: float               # mean of the last chunk's micro-batch losses (every stage gets it)
    step_applied: bool        # the batch's one optimizer step updated the parameters
    busy_seconds: float       # this rank, inside the stage's forward/backward
    wait_seconds: float       # this rank, waiting for activations and gradients
    span_seconds: float       # this rank, from the batch's start to its last action
    bubble_fraction: float    # the pipeline: 1 - summed busy / (stages x longest span)
    peak_activations: int     # most forwards this rank held before their backward
    sends: int
    recvs: int


def _copy_in(address, count, dtype):
    a = np.empty(count, dtype)
    if count:
        ctypes.memmove(a.ctypes.data, address, count * dtype.itemsize)
    a.flags.writeable = False
    return a


def _trampolines(stage, dtype):
    """The callables the native trampolines call: they copy activations in and out (nothing the
    stage keeps points into library memory) and check what the stage returns. They hold the
    stage, not the runner, so the runner is freed with its last reference."""

    def forward(mb, chunk, k, first, last, address, count):
        call = PipelineCall(mb, chunk, k, first, last, dtype)
        try:
            out = stage.forward(call, _copy_in(address, count, dtype))
            if call.last:
                if out is not None and np.size(out) != 0:
                    raise ValueError(f"forward of model chunk {k} (the last) returned an output; the last chunk sets "
                                     "call.loss and returns None")
                if call.loss is None:
                    raise ValueError(f"forward of model chunk {k} (the last) did not set call.loss")
                return float(call.loss)
            if out is None:
                raise ValueError(f"forward of model chunk {k} returned None; it must return its output activation")
            _n.so_py_stage_output(as_native_array(out, dtype, f"the output of model chunk {k}"))
            return 0.0
        finally:
            call._end()

    def backward(mb, chunk, k, first, last, in_address, in_count, og_address, og_count, ig_address):
        call = PipelineCall(mb, chunk, k, first, last, dtype)
        try:
            gi = stage.backward(call, _copy_in(in_address, in_count, dtype), _copy_in(og_address, og_count, dtype))
            if call.first:
                if gi is not None and np.size(gi) != 0:
                    raise ValueError(f"backward of model chunk {k} (the first) returned an input gradient; the first "
                                     "chunk has no input: return None")
                return
            if gi is None:
                raise ValueError(f"backward of model chunk {k} returned None; it must return the gradient of its "
                                 f"input ({in_count} elements)")
            gi = as_native_array(gi, dtype, f"the input gradient of model chunk {k}")
            if gi.size != in_count:
                raise ValueError(f"SHARDOPT_ERR_INVALID_ARGUMENT: backward of model chunk {k} returned {gi.size} "
                                 f"elements for an input of {in_count}")
            ctypes.memmove(ig_address, gi.ctypes.data, in_count * dtype.itemsize)
        finally:
            call._end()

    return forward, backward


class PipelineRunner:
    """Runs `stage` on this pipeline rank of `optimizer` (a HybridShardedOptimizer with
    pipeline_parallel_size p, or any sharded optimizer for a single stage), one batch per
    run_batch(): num_micro_batches (0 = p) micro-batches under `schedule`, their gradients summed,
    then exactly one optimizer step on their mean. Creation is collective over the pipeline group
    (every stage passes the same options, else RuntimeError SHARDOPT_ERR_MISMATCH). The optimizer's
    gradient_accumulation_steps must be 1. virtual_stages: model chunks per rank, interleaved only
    (0 = 2 there, 1 otherwise). Close it (or use `with`) before the optimizer."""

    def __init__(self, optimizer, stage, num_micro_batches=0, schedule=PipelineSchedule.ONE_F_ONE_B,
                 virtual_stages=0):
        if not isinstance(optimizer, ShardedOptimizer):
            raise TypeError(f"optimizer must be a ShardedOptimizer, not {type(optimizer).__name__}")
        if stage is None or not callable(getattr(stage, "forward", None)) or not callable(getattr(stage, "backward", None)):
            raise TypeError("stage must be a PipelineStage (with forward and backward methods)")
        for name, v in (("num_micro_batches", num_micro_batches), ("virtual_stages", virtual_stages)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must be an integer, not {type(v).__name__}")
            if v < 0:
                raise ValueError(f"{name} must be >= 0 (got {v})")
        schedule = PipelineSchedule.parse(schedule)
        handle = optimizer._h  # raises when closed or not initialized
        self._optimizer = optimizer
        self._dtype = optimizer._dtype
        self._opt_owner = optimizer._owner
        self._running = False
        self.schedule = schedule
        forward, backward = _trampolines(stage, self._dtype)
        pipe = _n.so_pipeline_create_py(handle, forward, backward, self._dtype.itemsize, int(num_micro_batches),
                                        int(schedule), int(virtual_stages))
        # the pipeline goes before the optimizer's memory (it keeps the optimizer's owner alive)
        self._owner = NativeOwner(pipe, _n.so_pipeline_destroy, "the PipelineRunner was closed", keep=self._opt_owner)

    @property
    def optimizer(self):
        return self._optimizer

    def run_batch(self):
        """Collective over the optimizer's world: one batch, one optimizer step."""
        if self._owner is None:
            raise ObjectDisposedError("the PipelineRunner was closed")
        if not self._opt_owner.alive or self._optimizer._owner is not self._opt_owner:
            raise ObjectDisposedError("the PipelineRunner's optimizer was closed or reset since the runner was made")
        if self._running:
            raise RuntimeError("run_batch is already running on this PipelineRunner (called from a stage?)")
        self._optimizer._sync_options_lr()
        r = _n.so_pipeline_result()
        self._running = True
        try:
            _n.so_pipeline_run(self._owner.handle, r)
        except BaseException as e:
            if not isinstance(e, RuntimeError) or "SHARDOPT_ERR" not in str(e):
                if hasattr(e, "add_note"):
                    e.add_note(f"(raised by the pipeline stage on rank {self._optimizer.rank}; every stage's "
                               "run_batch failed)")
            raise
        finally:
            self._running = False
        return PipelineBatchResult(r.loss, bool(r.step_applied), r.busy_seconds, r.wait_seconds, r.span_seconds,
                                   r.bubble_fraction, r.peak_activations, r.sends, r.recvs)

    def close(self):
        """Releases the native pipeline; later run_batch calls raise ObjectDisposedError."""
        if self._running:
            raise RuntimeError("not while run_batch is running (called from a stage?)")
        owner, self._owner = getattr(self, "_owner", None), None
        if owner is not None:
            owner.invalidate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
