"""What the shardopt.torch tests share: the two models (a small MLP, a 2-layer transformer), their data, a torch
reference run in one process, and shardopt.torch runs on in-memory ranks (threads)."""
import copy
import io

import torch

from ranks import launch_in_memory

torch.set_num_threads(1)  # ranks are threads of one process: one intra-op thread each
STEPS, BATCH = 20, 32


class TinyTransformer(torch.nn.Module):
    """2 encoder layers (d_model 16, 2 heads, feed-forward 32, no dropout, no biases: the key projection's bias has
    a zero gradient by construction, rounding noise that Adam turns into steps of +-lr) and a linear head."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, bias=False)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def make_model(kind, dtype=torch.float32, seed=0):
    """The template every rank copies (built once, in the calling thread: torch's generator is global)."""
    torch.manual_seed(seed)
    m = (torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 16), torch.nn.Tanh(),
                             torch.nn.Linear(16, 4)) if kind == "mlp" else TinyTransformer())
    return m.to(dtype)


def make_data(kind, dtype=torch.float32, steps=STEPS, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, BATCH, 8, generator=g) if kind == "mlp" else torch.randn(steps, BATCH, 6, 16, generator=g)
    return x.to(dtype), torch.randn(steps, BATCH, 4, generator=g).to(dtype)


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def torch_reference(template, data, steps=STEPS, clip=None, scheduler=None, world_size=1, **adamw):
    """torch.optim.AdamW in one process; the final parameters. world_size > 1: each step's gradient is the average
    of the gradients of the batch's `world_size` slices (what torch DDP computes: the same sum in f32 as the
    ranks', where the whole batch's mean rounds otherwise)."""
    model = copy.deepcopy(template)
    opt = torch.optim.AdamW(model.parameters(), **adamw)
    sched = scheduler(opt) if scheduler else None
    x, y = data
    params = list(model.parameters())
    for s in range(steps):
        opt.zero_grad()
        if world_size == 1:
            loss_fn(model, x[s], y[s]).backward()
        else:
            grads = []
            for r in range(world_size):
                grads.append(torch.autograd.grad(loss_fn(model, shard_of(x[s], r, world_size),
                                                         shard_of(y[s], r, world_size)), params))
            for i, p in enumerate(params):
                total = grads[0][i].clone()
                for g in grads[1:]:
                    total += g[i]
                p.grad = total / world_size
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched:
            sched.step()
    return [p.detach().clone() for p in model.parameters()]


def shard_of(t, rank, world_size):
    k = t.shape[0] // world_size
    return t[rank * k:(rank + 1) * k]


def run_ranks(world_size, body):
    """body(backend) on `world_size` in-memory ranks; the results in rank order."""
    return launch_in_memory(world_size, body)


def train_ranks(template, data, world_size, strategy, steps=STEPS, first=0, scheduler=None, **options):
    """shardopt.torch on in-memory ranks, each on its slice of every batch; every rank's final parameters."""
    from shardopt.torch import ShardedOptimizer
    x, y = data

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy=strategy, backend=backend, **options)
        sched = scheduler(opt) if scheduler else None
        r, n = backend.rank, backend.world_size
        for s in range(first, first + steps):
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], r, n), shard_of(y[s], r, n)).backward()
            opt.step()
            if sched:
                sched.step()
        with opt.summon_full_params():  # FSDP over a module holds no parameters between steps
            out = [p.detach().clone() for p in model.parameters()]
        opt.close()
        return out
    return run_ranks(world_size, body)


def train_alone(template, data, strategy, device="cpu", **options):
    """shardopt.torch in one process (backend None: a world of one) with the model and data on `device`; the final
    parameters."""
    from shardopt.torch import ShardedOptimizer
    model = copy.deepcopy(template).to(device)
    x, y = (t.to(device) for t in data)
    with ShardedOptimizer(model, "adamw", strategy=strategy, **options) as opt:
        for s in range(x.shape[0]):
            opt.zero_grad()
            loss_fn(model, x[s], y[s]).backward()
            opt.step()
        with opt.summon_full_params():
            return [p.detach().clone() for p in model.parameters()]


def elastic_run(template, data, world, directory, steps, stop_after=None, **options):
    """On in-memory ranks: elastic shardopt.torch (ZeRO-2 over AdamW, a checkpoint every 5 steps, as
    torch_elastic_worker.py) trained from wherever the directory's checkpoint is to `steps`; stop_after: the run ends
    after that step, publishing the checkpoint being written (a job stopped). Per rank: (first step, resumed_step,
    last_checkpoint_step, final parameters)."""
    from shardopt.torch import ShardedOptimizer
    x, y = data

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="zero2", backend=backend, bucket_cap_mb=0.004,
                               checkpoint_dir=directory, checkpoint_every=5, **options, lr=1e-2, weight_decay=0.01)
        start, resumed = opt.step_count, opt.resumed_step
        for s in range(start, steps):
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], backend.rank, world), shard_of(y[s], backend.rank, world)).backward()
            opt.step()
            if s + 1 == stop_after:
                break
        opt.finish_checkpoint()
        last = opt.last_checkpoint_step
        params = [p.detach().clone() for p in model.parameters()]
        opt.close()
        return start, resumed, last, params
    return run_ranks(world, body)


def relative_errors(got, want):
    """Per tensor: |got - want| / |want| (2-norms)."""
    return [float((g - w).norm() / w.norm()) for g, w in zip(got, want)]


def saved(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def loaded(data):
    return torch.load(io.BytesIO(data), weights_only=False)
