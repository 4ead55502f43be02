"""shardopt.torch with the model on a GPU (docs/torch.md, "CUDA"): the parameters and gradients are torch views of the
library's CUDA memory (DLPack, no copy), its passes on torch's current stream.

- The MLP and the 2-layer transformer of the CPU suite, 20 steps of AdamW in f32 under DDP, ZeRO-1, ZeRO-2 and FSDP:
  every tensor within 1e-6 relative of torch.optim.AdamW on the same GPU (NCCL, a world of one).
- The parameters' and gradients' memory is the library's (addresses compared), and backward writes the gradient there.
- 2 ranks in separate processes on one GPU (the staged communicator: NCCL refuses two ranks on one device), ZeRO-2
  and FSDP, each rank against torch.optim.AdamW (tests/torch_worker.py).
- Bad input: parameters on two devices, f64 on the GPU, a host backend for CUDA parameters.

Needs a CUDA GPU and torch built with CUDA (ctest bindings.python_torch_cuda, label gpu); skipped elsewhere."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available())")

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
sys.path.insert(0, TESTS)
import shardopt as so  # noqa: E402
from shardopt.torch import ShardedOptimizer  # noqa: E402
from torch_cases import loss_fn, make_data, make_model, relative_errors, torch_reference, train_alone  # noqa: E402

GPU = torch.device("cuda", 0)
LR = dict(lr=1e-2, weight_decay=0.01)


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "fsdp"])
@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_f32_on_the_gpu_matches_torch_adamw(kind, strategy):
    template, data = make_model(kind), make_data(kind)
    want = torch_reference(template.to(GPU), tuple(t.to(GPU) for t in data), **LR)
    got = train_alone(template, data, strategy, GPU, bucket_cap_mb=0.004, min_unit_params=64, **LR)
    errors = relative_errors(got, want)
    assert max(errors) <= 1e-6, f"{kind} {strategy}: relative errors {errors}"


def test_parameters_and_gradients_are_the_librarys_device_memory():
    model = make_model("mlp").to(GPU)
    x, y = (t.to(GPU) for t in make_data("mlp"))
    with ShardedOptimizer(model, "adamw", strategy="ddp", **LR) as opt:
        h = opt._so._h
        for t, (_, p) in enumerate(opt._order):
            assert p.data_ptr() == so.native.shardopt_optimizer_tensor_parameters(h, t)
        buckets = [so.native.shardopt_optimizer_tensor_grad(h, t) for t in range(len(opt._order))]
        loss_fn(model, x[0], y[0]).backward()  # each bucket's reduction starts: its addresses are asked before
        for (_, p), (address, count) in zip(opt._order, buckets):  # backward accumulated into the library's bucket
            assert p.grad.data_ptr() == address and p.grad.numel() == count and p.grad.is_cuda
        before = [p.detach().clone() for p in model.parameters()]
        opt.step()
        assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # updated in place


@pytest.mark.parametrize("strategy", ["zero2", "fsdp"])
def test_two_ranks_on_one_gpu(strategy):
    r = subprocess.run([sys.executable, "-m", "shardopt.run", "-n", "2", "--timeout", "200",
                        os.path.join(TESTS, "torch_worker.py"), strategy, "cuda"],
                       capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and out.count("torch ok") == 2, out[-4000:]


def test_bad_placements_are_refused_at_construction():
    mixed = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).to(GPU))
    with pytest.raises(ValueError, match="different devices"):
        ShardedOptimizer(mixed)
    with pytest.raises(so.UnsupportedError, match="f32"):
        ShardedOptimizer(torch.nn.Linear(2, 2).double().to(GPU))
    with pytest.raises(ValueError, match="backend must be None, 'nccl', 'staged', 'ucx' or a shardopt "
                                         "CommunicationBackend for parameters on cuda:0, not 'gloo'"):
        ShardedOptimizer(torch.nn.Linear(2, 2).to(GPU), backend="gloo")
    backend = so.InMemoryCommunicationBackend(0, 1)
    try:
        with pytest.raises(ValueError, match="GPU communicator"):
            ShardedOptimizer(torch.nn.Linear(2, 2).to(GPU), backend=backend)
    finally:
        backend.close()
