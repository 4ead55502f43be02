"""One rank of `./dev bench torch` (bench/torch.sh): a CPU training step of an MLP of about 100M parameters
(--layers linear layers of --width x --width) with AdamW, timed after --warmup steps.

  --impl shardopt   shardopt.torch.ShardedOptimizer over UCX (under python -m shardopt.run -n N)
  --impl ddp        torch.nn.parallel.DistributedDataParallel over Gloo + torch.optim.AdamW (under torchrun)
  --impl zero       DDP over Gloo + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW) (under torchrun)

Rank 0 prints one line: name=torch impl=... step_s (median) ... loss (the last step's mean over ranks), the
memory this rank holds for parameters, gradients and optimizer state (mem_mb) and its peak RSS (rss_mb)."""
import argparse
import os
import resource
import statistics
import time

import torch
from torch_mlp import mlp

p = argparse.ArgumentParser()
p.add_argument("--impl", choices=["shardopt", "ddp", "zero"], required=True)
p.add_argument("--strategy", default="ddp", help="shardopt's: ddp, zero1, zero2, fsdp")
p.add_argument("--width", type=int, default=4096)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--batch", type=int, default=16, help="samples per rank")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--compression", default=None, help="shardopt: int8, top_k, bf16, ...")
p.add_argument("--overlap-gather", action="store_true",
               help="shardopt ZeRO-1/2: the parameter gathers overlap the next forward (overlap_param_gather)")
a = p.parse_args()
torch.set_num_threads(int(os.environ.get("BENCH_TORCH_THREADS", "1")))

model = mlp(a.width, a.layers)
n_params = sum(p.numel() for p in model.parameters())

if a.impl == "shardopt":
    from shardopt.torch import ShardedOptimizer
    opt = ShardedOptimizer(model, "adamw", lr=1e-4, strategy=a.strategy, update_threads=1,
                           **({"compression": a.compression} if a.compression else {}),
                           **({"overlap_param_gather": True} if a.overlap_gather else {}))
    rank, world = opt.rank, opt.world_size

    def mean_over_ranks(v):
        import numpy as np
        import shardopt as so
        x = np.array([v], np.float64)
        opt.backend.all_reduce(x, so.ReductionOperation.SUM)
        return float(x[0]) / world
    train = model
else:
    import torch.distributed as dist
    if "RANK" not in os.environ and "SHARDOPT_RANK" in os.environ:  # started by our launcher (bench/torch_hosts.sh)
        e = os.environ
        e.update(RANK=e["SHARDOPT_RANK"], WORLD_SIZE=e["SHARDOPT_WORLD_SIZE"], MASTER_ADDR=e["SHARDOPT_MASTER_ADDR"],
                 MASTER_PORT=e["SHARDOPT_MASTER_PORT"])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    train = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    if a.impl == "zero":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def mean_over_ranks(v):
        t = torch.tensor([v], dtype=torch.float64)
        dist.all_reduce(t)
        return float(t[0]) / world

g = torch.Generator().manual_seed(1 + rank)
x = torch.randn(a.batch, a.width, generator=g)
y = torch.randn(a.batch, a.width, generator=g)
times, loss = [], None
for s in range(a.warmup + a.steps):
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(train(x), y)
    loss.backward()
    opt.step()
    if s >= a.warmup:
        times.append(time.perf_counter() - t0)
final = mean_over_ranks(loss.item())

if a.impl == "shardopt":
    m = opt.memory_stats()
    held = m.params_bytes + m.grads_bytes + m.optimizer_state_bytes + m.buffer_bytes
else:
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    held += sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    state = opt.optim.state if a.impl == "zero" else opt.state
    held += sum(t.numel() * t.element_size() for st in state.values() for t in st.values()
                if isinstance(t, torch.Tensor))
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rss_max = mean_over_ranks(rss) * world  # sum over ranks, for the mean below
if rank == 0:
    label = a.impl if a.impl != "shardopt" else f"shardopt_{a.strategy}" + (f"_{a.compression}" if a.compression
                                                                              else "") + (
        "_overlap" if a.overlap_gather else "")
    print(f"name=torch impl={label} ranks={world} params={n_params} batch_per_rank={a.batch} "
          f"step_s={statistics.median(times):.4f} min_step_s={min(times):.4f} steps={len(times)} "
          f"loss={final:.6f} mem_mb={held / 2**20:.1f} rss_mb={rss_max / world:.0f}", flush=True)
if a.impl == "shardopt":
    opt.close()
else:
    torch.distributed.destroy_process_group()
