"""shardopt.torch's FSDP over a module (docs/torch.md): units from the module tree, each gathered for its forward and
again for its backward and freed after each, nothing held between steps; training equal to DDP's bit for bit (f64);
module.state_dict() and summon_full_params() give the full values; a parameter used outside its unit's forward is
refused by name."""
import copy
import functools

import pytest

torch = pytest.importorskip("torch")

from shardopt.torch import ShardedOptimizer  # noqa: E402
from torch_cases import loss_fn, run_ranks, shard_of  # noqa: E402

STEPS, BATCH = 5, 16


def deep_mlp():
    """Three 32x32 layers (1056 parameters each: a unit apiece at min_unit_params=1000) and a small head (the root
    unit's)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4)).double()


def data():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(STEPS, BATCH, 8, generator=g, dtype=torch.float64),
            torch.randn(STEPS, BATCH, 4, generator=g, dtype=torch.float64))


def train(template, strategy, probe=None, **options):
    """2 in-memory ranks, STEPS AdamW steps; each rank's (full parameters, model.state_dict() values, probe's)."""
    x, y = data()

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy=strategy, backend=backend, lr=1e-2, **options)
        seen = probe(model, opt) if probe else None
        for s in range(STEPS):
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], backend.rank, 2), shard_of(y[s], backend.rank, 2)).backward()
            opt.step()
        between = [p.detach().clone() for p in model.parameters()]
        with opt.summon_full_params():
            full = [p.detach().clone() for p in model.parameters()]
        state = [v.clone() for v in model.state_dict().values()]
        opt.close()
        return full, state, between, seen
    return run_ranks(2, body)


def same(a, b):
    return len(a) == len(b) and all(torch.equal(u, v) for u, v in zip(a, b))


def test_units_are_gathered_per_use_and_hold_nothing_between_steps():
    template = deep_mlp()
    reference = train(template, "ddp")[0][0]

    def probe(model, opt):
        units = opt._units.units
        seen = {"units": len(units), "most": 0, "most_bytes": 0,
                "total_bytes": sum(u.nbytes for u in units)}

        def look(*_):  # registered after the optimizer's hooks: runs once its unit is gathered
            gathered = [u for u in units if u.gathered]
            seen["most"] = max(seen["most"], len(gathered))
            seen["most_bytes"] = max(seen["most_bytes"], sum(u.nbytes for u in gathered))
        for m in model:
            if isinstance(m, torch.nn.Linear):
                m.register_forward_pre_hook(look)
                m.register_full_backward_pre_hook(lambda *a: look())
        return seen
    for full, state, between, seen in train(template, "fsdp", probe, min_unit_params=1000):
        assert same(full, reference), "FSDP per unit differs from DDP"
        assert same(state, reference), "module.state_dict() does not hold the full values"
        assert all(torch.isnan(p).all() for p in between), "parameters read between steps are not the placeholder"
        assert seen["units"] == 4  # three layers and the root (the first layer and the head)
        # at most the root and one layer at a time: never the whole model
        assert seen["most"] == 2 and seen["most_bytes"] < seen["total_bytes"], seen


def test_torch_policies_and_keeping_units_until_backward():
    from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
    template = deep_mlp()
    reference = train(template, "ddp")[0][0]
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=1000)
    for full, _, _, _ in train(template, "fsdp", auto_wrap_policy=policy, reshard_after_forward=False):
        assert same(full, reference)


class OutOfForward(torch.nn.Module):
    """Uses its child's weight without calling the child (as MultiheadAttention uses out_proj)."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(8, 4)
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        return torch.nn.functional.linear(x, self.inner.weight, self.inner.bias) * self.scale


def test_a_parameter_used_outside_its_units_forward_is_refused():
    x, y = data()
    x = x[..., :8]

    def body(backend):
        model = OutOfForward().double()
        opt = ShardedOptimizer(model, "adamw", strategy="fsdp", backend=backend, min_unit_params=10)
        with pytest.raises(RuntimeError, match=r"'inner\.(weight|bias)' got a gradient while its FSDP unit \(Linear\)"):
            loss_fn(model, shard_of(x[0], backend.rank, 2), shard_of(y[0], backend.rank, 2)).backward()
        opt.close()
    run_ranks(2, body)
