#!/usr/bin/env python3
"""shardopt.torch with the model on one GPU against torch's own optimizer, in one run (docs/torch.md, "CUDA").

The MLP of `./dev bench torch` (--layers linear layers of --width x --width, about 100M parameters) trained with
AdamW on one GPU, one process: torch.optim.AdamW (fused=True and the default foreach) and shardopt.torch's
ShardedOptimizer under DDP, ZeRO-2 and FSDP (a world of one on NCCL: what a rank pays on its GPU besides the
communication). Every implementation starts from the same parameters and sees the same batches; their rounds are
interleaved so that a noisy neighbour slows all of them alike. One line per implementation:

  name=torch_gpu impl=... params=... batch=... step_ms=(median) ratio=(torch fused's step_ms / this one's)
  loss=(the last step's) loss_rel=(relative to torch fused's)

Without torch or without a CUDA device (or with --device cpu, a smoke run of the same code) it says so."""
import argparse
import copy
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("name=torch_gpu skipped=no_torch")
    sys.exit(0)
from torch_mlp import mlp  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--rounds", type=int, default=5, help="interleaved rounds of --steps steps per implementation")
p.add_argument("--steps", type=int, default=10)
p.add_argument("--device", default="cuda")
a = p.parse_args()
if a.device.startswith("cuda") and not torch.cuda.is_available():
    print("name=torch_gpu skipped=no_cuda_device")
    sys.exit(0)
device = torch.device(a.device)

template = mlp(a.width, a.layers)
n_params = sum(t.numel() for t in template.parameters())
g = torch.Generator().manual_seed(1)
x = torch.randn(a.batch, a.width, generator=g).to(device)
y = torch.randn(a.batch, a.width, generator=g).to(device)


def torch_adamw(**kw):
    model = copy.deepcopy(template).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)


def shardopt_adamw(strategy):
    from shardopt.torch import ShardedOptimizer
    model = copy.deepcopy(template).to(device)
    return model, ShardedOptimizer(model, "adamw", lr=1e-4, strategy=strategy)


impls = {"torch_fused": lambda: torch_adamw(fused=True), "torch_foreach": lambda: torch_adamw(foreach=True),
         "shardopt_ddp": lambda: shardopt_adamw("ddp"), "shardopt_zero2": lambda: shardopt_adamw("zero2"),
         "shardopt_fsdp": lambda: shardopt_adamw("fsdp")}
runs = {name: make() for name, make in impls.items()}


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, opt, steps):
    loss = None
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss


times = {name: [] for name in runs}
losses = {}
for name, (model, opt) in runs.items():  # warm-up: kernels, NCCL communicators, allocator
    train(model, opt, 2)
sync()
for _ in range(a.rounds):
    for name, (model, opt) in runs.items():
        sync()
        t0 = time.perf_counter()
        loss = train(model, opt, a.steps)
        sync()
        times[name].append((time.perf_counter() - t0) / a.steps)
        losses[name] = loss.item()

base = statistics.median(times["torch_fused"])
for name in runs:
    step = statistics.median(times[name])
    rel = abs(losses[name] - losses["torch_fused"]) / abs(losses["torch_fused"])
    print(f"name=torch_gpu impl={name} device={device} params={n_params} batch={a.batch} step_ms={step * 1e3:.3f} "
          f"ratio={base / step:.3f} loss={losses[name]:.6f} loss_rel={rel:.2e}", flush=True)
for name, (model, opt) in runs.items():
    if hasattr(opt, "close"):
        opt.close()
