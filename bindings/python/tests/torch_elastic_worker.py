"""One rank of test_torch_launch.py's elastic tests, under torchrun (elastic: --nnodes=MIN:MAX --max-restarts) or
`python -m shardopt.run`: shardopt.torch made elastic (checkpoint_dir=), ZeRO-2 over AdamW on the f64 MLP, resuming
from the checkpoint directory at construction. argv: checkpoint directory, output directory, steps, kill step.
On torchrun's first attempt (TORCHELASTIC_RESTART_COUNT 0) rank 1 SIGKILLs itself before the kill step (-1: never);
torchrun restarts the group and every rank resumes from the last published checkpoint. Each rank saves its final
parameters as <output>/rank<r>.pt and prints where it resumed."""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from shardopt.torch import ShardedOptimizer  # noqa: E402
from torch_cases import loss_fn, make_data, make_model, shard_of  # noqa: E402

ckpt, out, steps, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model, (x, y) = make_model("mlp", torch.float64), make_data("mlp", torch.float64, steps=steps)
opt = ShardedOptimizer(model, "adamw", lr=1e-2, weight_decay=0.01, strategy="zero2", bucket_cap_mb=0.004,
                       checkpoint_dir=ckpt, checkpoint_every=5)
rank, world = opt.rank, opt.world_size
first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
print(f"elastic start rank {rank} of {world} generation {opt.generation} resumed_step {opt.resumed_step}", flush=True)
for s in range(opt.step_count, steps):  # a resumed run starts where its checkpoint was
    if s == kill_at and first_attempt and os.environ.get("KILL_AGENT") == "1":
        os.kill(os.getppid(), signal.SIGKILL)  # this host's torchrun agent dies (a host lost), then its worker
        os.kill(os.getpid(), signal.SIGKILL)
    if s == kill_at and rank == 1 and first_attempt and "KILL_AGENT" not in os.environ:
        os.kill(os.getpid(), signal.SIGKILL)  # a worker dies (no clean-up of any kind)
    opt.zero_grad()
    loss_fn(model, shard_of(x[s], rank, world), shard_of(y[s], rank, world)).backward()
    opt.step()
opt.finish_checkpoint()
torch.save([p.detach().clone() for p in model.parameters()], os.path.join(out, f"rank{rank}.pt"))
print(f"elastic ok rank {rank} of {world} generation {opt.generation} resumed_step {opt.resumed_step} "
      f"steps {opt.step_count}", flush=True)
opt.close()
