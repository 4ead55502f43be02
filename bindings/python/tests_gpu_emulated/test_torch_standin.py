"""Issue 36, label gpu_emulated: shardopt.torch driving the library's CUDA memory without a GPU. The C ABI is the one
built on the CUDA stand-in (LD_PRELOAD, standin.py), whose device memory is host memory run through CUDA's stream
rules, so CPU torch tensors can view it where on a GPU torch's CUDA tensors do (placement.py's CUDA branch, through
DLPack: that half needs a GPU, tests_gpu/test_torch_cuda.py).

On a GPU torch's kernels run on the library's compute stream, after whatever a library call enqueued. CPU torch runs at
once, so here every call into the library is followed by a wait on that stream (a synchronous copy on the legacy
default stream, the optimizer's): the same order. What this checks is that shardopt.torch's use of the library holds
in CUDA memory: every strategy's buckets, staging buffers, gathers and FSDP units there train as torch.optim.AdamW,
and the parameters' and gradients' memory is the library's device memory. A library call that returned before the
work torch must see was on the stream would show here as a wrong result."""
import copy
import ctypes
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shardopt as so  # noqa: E402
import shardopt.sharding  # noqa: E402
import shardopt.torch.fsdp_units  # noqa: E402
import shardopt.torch.optimizer  # noqa: E402
import shardopt.torch.param_gather  # noqa: E402
from shardopt import _core  # noqa: E402
from shardopt.torch.placement import Placement  # noqa: E402
from standin import copy as cuda_copy, cuda, malloc, needed  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from torch_cases import loss_fn, make_data, make_model, relative_errors, torch_reference, train_alone  # noqa: E402

pytestmark = needed
LR = dict(lr=1e-2, weight_decay=0.01)


class StandinPlacement(Placement):
    """The library's side of CUDA parameters (CUDA memory, a GPU communicator: the staged one, a world of one; the
    legacy default stream) with the model's tensors on the CPU, viewing the stand-in's device memory."""

    def __init__(self, device):
        super().__init__(device)
        self.cuda = True

    def backend(self, backend):
        return (so.StagedCommunicationBackend(0, 1), True) if backend is None else (backend, False)

    def configure(self, config):
        config.memory = so.MemorySpace.CUDA  # cuda_stream None: the legacy default stream, which synchronize() waits on

    def view(self, array):
        assert isinstance(array, so.DeviceArray)
        host = _core.native_view(array._address, array.size, array.dtype, array._owner, array._guards)
        return torch.from_numpy(host.view(np.ndarray))


class Synchronized:
    """The native module, each call followed by a wait for the legacy default stream (what torch's next kernel on the
    library's stream would wait for)."""

    def __init__(self, native, synchronize):
        self._native, self._synchronize = native, synchronize

    def __getattr__(self, name):
        value = getattr(self._native, name)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            finally:
                self._synchronize()
        return call


@pytest.fixture
def on_standin(monkeypatch):
    device_word, host_word = malloc(4), np.zeros(1, np.float32)

    def synchronize():  # a synchronous copy on the legacy default stream: after all its earlier work
        cuda_copy(device_word, host_word.ctypes.data, 4)

    native = Synchronized(so.native, synchronize)
    for module in (shardopt.sharding, shardopt.torch.optimizer, shardopt.torch.fsdp_units,
                   shardopt.torch.param_gather):
        monkeypatch.setattr(module, "_n", native)
    monkeypatch.setattr(shardopt.torch.optimizer, "Placement", StandinPlacement)
    yield


def is_device_memory(address):
    return cuda.test_cuda_is_device(ctypes.c_void_p(address)) == 1


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "fsdp"])
@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_cuda_memory_trains_as_torch_adamw(on_standin, kind, strategy):
    """Small buckets: ZeRO-2 and FSDP run several, through two staging buffers; FSDP gathers each linear layer as its
    own unit, from CUDA memory, in its forward and again in its backward."""
    template, data = make_model(kind), make_data(kind)
    want = torch_reference(template, data, **LR)
    got = train_alone(template, data, strategy, bucket_cap_mb=0.004, min_unit_params=64, **LR)
    errors = relative_errors(got, want)
    assert max(errors) <= 1e-6, f"{kind} {strategy}: relative errors {errors}"


def test_overlapped_gathers_and_no_sync_in_cuda_memory(on_standin):
    """ZeRO-2 with the parameter gathers overlapping the next forward, and two micro-batches a step under no_sync():
    torch.optim.AdamW on the sum of the two micro-batches' gradients."""
    template, (x, y) = make_model("mlp"), make_data("mlp")
    model, ref = copy.deepcopy(template), copy.deepcopy(template)
    torch_opt = torch.optim.AdamW(ref.parameters(), **LR)
    with shardopt.torch.optimizer.ShardedOptimizer(model, "adamw", strategy="zero2", bucket_cap_mb=0.004,
                                                   overlap_param_gather=True, **LR) as opt:
        for s in range(0, 10, 2):
            opt.zero_grad()
            torch_opt.zero_grad()
            with opt.no_sync():
                loss_fn(model, x[s], y[s]).backward()
            loss_fn(model, x[s + 1], y[s + 1]).backward()
            opt.step()
            (loss_fn(ref, x[s], y[s]) + loss_fn(ref, x[s + 1], y[s + 1])).backward()
            torch_opt.step()
        with opt.summon_full_params():
            got = [p.detach().clone() for p in model.parameters()]
    assert max(relative_errors(got, [p.detach() for p in ref.parameters()])) <= 1e-6


def test_parameters_and_gradients_are_the_librarys_device_memory(on_standin):
    model = make_model("mlp")
    x, y = make_data("mlp")
    with shardopt.torch.optimizer.ShardedOptimizer(model, "adamw", strategy="ddp", **LR) as opt:
        h = opt._so._h
        for t, (_, p) in enumerate(opt._order):
            address = so.native.shardopt_optimizer_tensor_parameters(h, t)
            assert p.data_ptr() == address and is_device_memory(address)
        buckets = [so.native.shardopt_optimizer_tensor_grad(h, t) for t in range(len(opt._order))]
        loss_fn(model, x[0], y[0]).backward()  # each bucket's reduction starts: its addresses are asked before
        for (_, p), (address, count) in zip(opt._order, buckets):  # backward accumulated into the library's bucket
            assert p.grad.data_ptr() == address and p.grad.numel() == count and is_device_memory(address)
        state = opt.consolidated_state_dict()  # read back from CUDA memory through the checkpoint
        assert all(torch.equal(s["exp_avg"], torch.zeros_like(p)) for s, (_, p) in zip(state["state"].values(),
                                                                                       model.named_parameters()))
