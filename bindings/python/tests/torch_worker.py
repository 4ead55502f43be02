"""One rank of test_torch_launch.py, under `python -m shardopt.run -n N` or torchrun: shardopt.torch over UCX
(backend=None: the launcher's environment), ZeRO-2 on the MLP, against torch.optim.AdamW computed here.
`torch_worker.py STRATEGY cuda` (tests_gpu/test_torch_cuda.py): the model on this rank's GPU (its local rank modulo
the GPUs), the library's CUDA memory, NCCL with a GPU per rank, else the staged communicator (ranks sharing a GPU)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from shardopt.torch import ShardedOptimizer  # noqa: E402
from torch_cases import loss_fn, make_data, make_model, relative_errors, shard_of, torch_reference  # noqa: E402

strategy = sys.argv[1] if len(sys.argv) > 1 else "zero2"
on_gpu = len(sys.argv) > 2 and sys.argv[2] == "cuda"
world = int(os.environ.get("SHARDOPT_WORLD_SIZE", os.environ.get("WORLD_SIZE", "0")))
backend, device = None, torch.device("cpu")
if on_gpu:
    local = int(os.environ.get("SHARDOPT_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")))
    device = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(device)
    backend = "nccl" if world <= torch.cuda.device_count() else "staged"
template, (x, y) = make_model("mlp"), make_data("mlp")
x, y = x.to(device), y.to(device)
model = make_model("mlp").to(device)
opt = ShardedOptimizer(model, "adamw", lr=1e-2, strategy=strategy, bucket_cap_mb=0.004, backend=backend)
rank = opt.rank
assert opt.world_size == world, (opt.world_size, world)
for s in range(20):
    opt.zero_grad()
    loss_fn(model, shard_of(x[s], rank, world), shard_of(y[s], rank, world)).backward()
    opt.step()
want = torch_reference(template.to(device), (x, y), world_size=world, lr=1e-2)
errors = relative_errors(list(model.state_dict().values()), want)  # FSDP: a collective with the full values
assert max(errors) <= 1e-6, errors
print(f"torch ok rank {rank} of {world} {strategy} on {device} max relative error {max(errors):.2e}", flush=True)
opt.close()
