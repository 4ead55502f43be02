"""shardopt.torch's checkpoints in torch's terms (docs/torch.md): consolidated_state_dict() is what a single-process
torch.optim optimizer's state_dict() holds, so torch.save / torch.optim.AdamW.load_state_dict continue training in
plain torch; and the elastic options (checkpoint_dir=): the library's ElasticOptimizer, resumed at construction."""
import copy

import pytest

torch = pytest.importorskip("torch")

from shardopt.torch import ShardedOptimizer  # noqa: E402
from torch_cases import (elastic_run, loaded, loss_fn, make_data, make_model, relative_errors, run_ranks,  # noqa: E402
                         saved, shard_of)

LR = dict(lr=1e-2, weight_decay=0.01)
WORLD = 2


@pytest.fixture(scope="module")
def mlp():
    return make_model("mlp"), make_data("mlp")


def close_to(got, want, tol=1e-6):
    errors = relative_errors(got, want)
    assert max(errors) <= tol, errors


def ddp_step(model, opt, x, y, world=WORLD):
    """One torch step on the average of the gradients of the batch's `world` slices (what the ranks reduce)."""
    params = list(model.parameters())
    grads = [torch.autograd.grad(loss_fn(model, shard_of(x, r, world), shard_of(y, r, world)), params)
             for r in range(world)]
    opt.zero_grad()
    for i, p in enumerate(params):
        total = grads[0][i].clone()
        for g in grads[1:]:
            total += g[i]
        p.grad = total / world
    opt.step()


def shardopt_steps(model, opt, x, y, steps, rank):
    for s in steps:
        opt.zero_grad()
        loss_fn(model, shard_of(x[s], rank, WORLD), shard_of(y[s], rank, WORLD)).backward()
        opt.step()


@pytest.mark.parametrize("strategy", ["zero2", "fsdp"])
def test_consolidated_state_dict_continues_in_torch_adamw(mlp, strategy, tmp_path):
    """10 steps at 2 ranks, the export through torch.save; torch.optim.AdamW loads it into the module's parameters
    (model.state_dict(), whole on every rank, FSDP's a collective) and takes 5 more steps: shardopt's 5 more steps,
    within 1e-6 (f32)."""
    template, (x, y) = mlp

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy=strategy, backend=backend, bucket_cap_mb=0.004, **LR)
        shardopt_steps(model, opt, x, y, range(10), backend.rank)
        exported = saved(opt.consolidated_state_dict())
        module = {k: v.detach().clone() for k, v in model.state_dict().items()}
        shardopt_steps(model, opt, x, y, range(10, 15), backend.rank)
        with opt.summon_full_params():  # FSDP over a module holds no parameters between steps
            final = [p.detach().clone() for p in model.parameters()]
        opt.close()
        return exported, module, final
    ranks = run_ranks(WORLD, body)

    # torch's own AdamW after the same 10 steps: the state the export must hold, named and shaped as torch's
    ref_model = copy.deepcopy(template)
    ref_opt = torch.optim.AdamW(ref_model.parameters(), **LR)
    for s in range(10):
        ddp_step(ref_model, ref_opt, x[s], y[s])
    ref = ref_opt.state_dict()
    for exported, module, _ in ranks:  # every rank exports the same state and holds the whole parameters
        state = loaded(exported)
        assert state["param_groups"] == ref["param_groups"]
        assert sorted(state["state"]) == sorted(ref["state"])
        for i, want in ref["state"].items():
            got = state["state"][i]
            assert sorted(got) == sorted(want) == ["exp_avg", "exp_avg_sq", "step"]
            assert got["step"].dtype == want["step"].dtype and float(got["step"]) == float(want["step"]) == 10
            close_to([got["exp_avg"], got["exp_avg_sq"]], [want["exp_avg"], want["exp_avg_sq"]])
        close_to(list(module.values()), [p.detach() for p in ref_model.parameters()])

    exported, module, final = ranks[0]
    path = tmp_path / "adamw.pt"
    path.write_bytes(exported)
    model = copy.deepcopy(template)
    model.load_state_dict(module)
    opt = torch.optim.AdamW(model.parameters(), lr=0.5)  # the loaded param group replaces these settings
    opt.load_state_dict(torch.load(path))
    assert opt.param_groups[0]["lr"] == LR["lr"] and opt.param_groups[0]["weight_decay"] == LR["weight_decay"]
    for s in range(10, 15):
        ddp_step(model, opt, x[s], y[s])
    for _, _, got in ranks:
        close_to(got, [p.detach() for p in model.parameters()])


def test_consolidated_state_dict_sgd_momentum(mlp):
    """SGD with momentum: torch's SGD state (momentum_buffer, no step) and its param group (momentum, nesterov)."""
    template, (x, y) = mlp
    hyper = dict(lr=0.05, momentum=0.9, nesterov=True)

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "sgd", strategy="zero2", backend=backend, **hyper)
        shardopt_steps(model, opt, x, y, range(6), backend.rank)
        state = opt.consolidated_state_dict()
        module = copy.deepcopy(model.state_dict())
        shardopt_steps(model, opt, x, y, range(6, 10), backend.rank)
        return state, module, [p.detach().clone() for p in model.parameters()]
    state, module, final = run_ranks(WORLD, body)[0]
    assert all(sorted(s) == ["momentum_buffer"] for s in state["state"].values())
    model = copy.deepcopy(template)
    model.load_state_dict(module)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    opt.load_state_dict(loaded(saved(state)))
    assert opt.param_groups[0]["momentum"] == 0.9 and opt.param_groups[0]["nesterov"] is True
    for s in range(6, 10):
        ddp_step(model, opt, x[s], y[s])
    close_to(final, [p.detach() for p in model.parameters()])


@pytest.mark.parametrize("optimizer", ["lion", "nadam"])
def test_consolidated_state_dict_without_a_torch_class(optimizer):
    """Lion has no torch.optim class, torch's NAdam keeps mu_product besides the moments: refused, naming why."""
    def body(backend):
        opt = ShardedOptimizer(torch.nn.Linear(3, 2), optimizer, backend=backend)
        with pytest.raises(ValueError, match=f"no torch.optim optimizer keeps {optimizer}'s state"):
            opt.consolidated_state_dict()
        opt.close()
    run_ranks(1, body)


# ---- elastic: checkpoint_dir= ----
def test_elastic_resume_at_the_same_and_another_world_size(tmp_path):
    """Stopped after step 12 (the checkpoint of step 10 published), resumed: at 2 ranks bit for bit the run that
    never stopped (f64); at 4 ranks (resharded) within 1e-12 of it."""
    template, data = make_model("mlp", torch.float64), make_data("mlp", torch.float64)
    whole = elastic_run(template, data, 2, tmp_path / "whole", 20)
    assert whole[0][:3] == (0, -1, 20)
    for world in (2, 4):
        directory = tmp_path / f"stopped{world}"
        first = elastic_run(template, data, 2, directory, 20, stop_after=12)
        assert first[0][:3] == (0, -1, 10)
        resumed = elastic_run(template, data, world, directory, 20)
        for start, resumed_step, last, params in resumed:
            assert (start, resumed_step, last) == (10, 10, 20)
            if world == 2:
                assert all(torch.equal(a, b) for a, b in zip(params, whole[0][3]))
            else:
                close_to(params, whole[0][3], 1e-12)


def test_elastic_options_need_a_directory():
    with pytest.raises(TypeError, match="checkpoint_dir"):
        run_ranks(1, lambda b: ShardedOptimizer(torch.nn.Linear(2, 2), backend=b, checkpoint_every=5))
    with pytest.raises(RuntimeError, match="not elastic"):
        run_ranks(1, lambda b: ShardedOptimizer(torch.nn.Linear(2, 2), backend=b).resumed_step)
