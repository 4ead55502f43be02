"""Pipeline parallelism (docs/pipeline.md, README.md): a PipelineStage per pipeline rank of a
HybridShardedOptimizer(pipeline_parallel_size=p), run by a PipelineRunner; an exception a stage raises fails
run_batch on every stage: this rank re-raises it, the others raise InvalidStateError naming it."""
import enum
from collections import namedtuple

import numpy as np

from . import shardopt_native as _n
from ._core import (Guard, NativeOwner, NativeResource, ObjectDisposedError, ShardoptError, as_native_array, copy_in,
                    copy_out, native_view, parse_enum)
from .sharding import ShardedOptimizer


class PipelineSchedule(enum.IntEnum):
    """The order of each stage's forwards and backwards; names work too ("gpipe", "1f1b", "interleaved_1f1b")."""
    ONE_F_ONE_B, GPIPE = _n.SHARDOPT_PIPELINE_1F1B, _n.SHARDOPT_PIPELINE_GPIPE
    INTERLEAVED_1F1B = _n.SHARDOPT_PIPELINE_INTERLEAVED_1F1B
    parse = classmethod(lambda cls, value: parse_enum(cls, value, "pipeline schedule", {"1F1B": cls.ONE_F_ONE_B}))


class PipelineStage:
    """This rank's model chunk(s), called on run_batch's thread: subclass it and implement forward(call, input) -> the
    output activation (an array of the optimizer's dtype; on the last chunk set call.loss and return None) and
    backward(call, input, output_gradient) -> the gradient of `input` (None on the first chunk), adding the parameter
    gradients into call.grad(t). `input` is a read-only copy, empty on the first chunk."""


class PipelineCall:
    """One forward or backward: micro_batch, chunk, model_chunk, first, last; grad(t) and parameters(t) are views
    valid during the call only."""

    def __init__(self, call, optimizer, dtype):
        self.micro_batch, self.chunk, self.model_chunk = call.micro_batch, call.chunk, call.model_chunk
        self.first, self.last, self.loss, self._call, self._opt, self._dtype = (bool(call.first), bool(call.last), None,
                                                                                call, optimizer, dtype)
        self._guard = Guard("this PipelineCall's views are valid during its forward/backward only")

    def grad(self, tensor):
        """Tensor `tensor`'s gradient, summed over the batch's micro-batches so far: add this one's into it."""
        self._guard.check()
        return native_view(*_n.shardopt_stage_call_grad(self._call, int(tensor)), self._dtype, None, (self._guard,))

    def parameters(self, tensor):
        """Tensor `tensor`'s parameters (read-only)."""
        self._guard.check()
        address = _n.shardopt_optimizer_tensor_parameters(self._opt, int(tensor))
        count = _n.shardopt_optimizer_tensor_info(self._opt, int(tensor))[0]
        return native_view(address, count, self._dtype, None, (self._guard,), readonly=True)


class _Stage:
    """What the library calls (the SWIG module's trampolines): copies activations in and out and checks what the
    stage returns. It holds the stage, not the runner."""

    def __init__(self, stage, optimizer, dtype):
        self.stage, self.optimizer, self.dtype = stage, optimizer, dtype

    def _forward(self, native_call, address, count, output):
        call = PipelineCall(native_call, self.optimizer, self.dtype)
        try:
            out, what = self.stage.forward(call, copy_in(address, count, self.dtype)), f"model chunk {call.model_chunk}"
            if call.last and ((out is not None and np.size(out) != 0) or call.loss is None):
                raise ValueError(f"forward of {what} (the last) must set call.loss and return None")
            if call.last:
                return call.loss
            out = as_native_array(out, self.dtype, f"the output activation of {what}")
            copy_out(_n.shardopt_activation_resize(output, out.size), out)
            return 0.0
        finally:
            call._guard.invalidate()

    def _backward(self, native_call, address, count, og_address, og_count, ig_address):
        call = PipelineCall(native_call, self.optimizer, self.dtype)
        try:
            gi = self.stage.backward(call, copy_in(address, count, self.dtype), copy_in(og_address, og_count, self.dtype))
            what = f"backward of model chunk {call.model_chunk}"
            if call.first and gi is not None and np.size(gi) != 0:
                raise ValueError(f"{what} (the first) returned an input gradient; the first chunk has no input")
            if not call.first:
                gi = as_native_array(gi, self.dtype, f"the input gradient of model chunk {call.model_chunk}")
                if gi.size != count:
                    raise ValueError(f"{what} returned {gi.size} elements for an input of {count}")
                copy_out(ig_address, gi)
        finally:
            call._guard.invalidate()


PipelineBatchResult = namedtuple("PipelineBatchResult", "loss step_applied busy_seconds wait_seconds span_seconds "
                                 "bubble_fraction peak_activations sends recvs")
PipelineBatchResult.__doc__ = """One batch (shardopt_pipeline_result): the last chunk's mean loss (on every stage),
whether the step updated the parameters, this rank's seconds busy, waiting and in all, the bubble fraction, the
most activations held, sends and receives."""


class PipelineRunner(NativeResource):
    """Runs `stage` on this pipeline rank of `optimizer`, one batch per run_batch(): num_micro_batches (0: p)
    micro-batches under `schedule`, then one optimizer step on their mean gradient. Creation is collective over
    the pipeline group (MismatchError when the stages' options differ). Close it before the optimizer."""

    def __init__(self, optimizer, stage, num_micro_batches=0, schedule=PipelineSchedule.ONE_F_ONE_B, virtual_stages=0):
        if not isinstance(optimizer, ShardedOptimizer):
            raise TypeError(f"optimizer must be a ShardedOptimizer, not {type(optimizer).__name__}")
        if not callable(getattr(stage, "forward", None)) or not callable(getattr(stage, "backward", None)):
            raise TypeError("stage must be a PipelineStage (with forward and backward methods)")
        self.schedule, o = PipelineSchedule.parse(schedule), _n.shardopt_pipeline_options()
        o.num_micro_batches, o.schedule, o.virtual_stages = num_micro_batches, int(self.schedule), virtual_stages
        handle = optimizer._h  # raises when closed or not initialized
        self._optimizer, self._opt_owner, self._running = optimizer, optimizer._owner, False
        adapter = _Stage(stage, handle, optimizer._dtype)
        # the pipeline goes before the optimizer (it keeps the optimizer's owner) and keeps the stage it calls
        self._owner = NativeOwner(_n.shardopt_pipeline_create(handle, adapter, o), _n.shardopt_pipeline_destroy,
                                  "the PipelineRunner was closed", keep=(self._opt_owner, adapter))

    optimizer = property(lambda self: self._optimizer)

    def run_batch(self):
        """Collective over the optimizer's world: one batch, one optimizer step; a PipelineBatchResult."""
        if self._owner is None:
            raise ObjectDisposedError("the PipelineRunner was closed")
        if not self._opt_owner.alive or self._optimizer._owner is not self._opt_owner:
            raise ObjectDisposedError("the PipelineRunner's optimizer was closed or reset since the runner was made")
        if self._running:
            raise RuntimeError("run_batch is already running on this PipelineRunner (called from a stage?)")
        self._optimizer._sync_options_lr()
        r, self._running = _n.shardopt_pipeline_result(), True
        try:
            _n.shardopt_pipeline_run_batch(self._owner.handle, r)
        except BaseException as e:
            if not isinstance(e, ShardoptError) and hasattr(e, "add_note"):
                e.add_note(f"(raised by the pipeline stage on rank {self._optimizer.rank}; every stage failed)")
            raise
        finally:
            self._running = False
        return PipelineBatchResult(*(getattr(r, f) for f in PipelineBatchResult._fields))

    def close(self):
        """Releases the native pipeline; later run_batch calls raise ObjectDisposedError."""
        if self._running:
            raise RuntimeError("not while run_batch is running (called from a stage?)")
        owner, self._owner = getattr(self, "_owner", None), None
        if owner is not None:
            owner.invalidate()
