"""shardopt.torch's idioms (docs/torch.md): zero-copy parameters and gradients, an LR scheduler, no_sync()
accumulation, clipping across shards, state_dict saved at 4 ranks and loaded at 2, and the errors at construction."""
import copy

import pytest

torch = pytest.importorskip("torch")

import shardopt as so  # noqa: E402
from shardopt.torch import ShardedOptimizer, placement  # noqa: E402
from torch_cases import (loaded, loss_fn, make_data, make_model, relative_errors, run_ranks, saved,  # noqa: E402
                         shard_of, torch_reference, train_ranks)

LR = dict(lr=1e-2, weight_decay=0.01)


@pytest.fixture(scope="module")
def mlp():
    return make_model("mlp"), make_data("mlp")


def close_to(got, want, tol=1e-6):
    errors = relative_errors(got, want)
    assert max(errors) <= tol, errors


def test_parameters_and_gradients_are_views_of_library_memory(mlp):
    template, (x, y) = mlp

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="zero2", backend=backend, **LR)
        params = list(model.parameters())
        flat = opt._so.parameters  # the library's flat buffer (padded)
        lo, hi = flat.ctypes.data, flat.ctypes.data + flat.nbytes
        assert all(lo <= p.data_ptr() < hi for p in params), "parameters are not views of the library's buffer"
        assert all(p.grad is None for p in params)
        opt.zero_grad(set_to_none=False)
        assert all(p.grad is not None and not p.grad.any() for p in params)
        loss_fn(model, shard_of(x[0], backend.rank, 2), shard_of(y[0], backend.rank, 2)).backward()
        addresses = [p.grad.data_ptr() for p in params]
        assert addresses == [opt._grad_views[opt._tensor_of[id(p)]].data_ptr() for p in params]
        before = [p.detach().clone() for p in params]
        opt.step()
        assert all(not torch.equal(a, b) for a, b in zip(before, params))  # updated in place, seen by torch
        opt.zero_grad()
        assert all(p.grad is None for p in params)
        opt.close()
        assert all(p.grad is None for p in params) and torch.isfinite(params[0]).all()  # a copy survives
    run_ranks(2, body)


def test_lr_scheduler(mlp):
    template, data = mlp
    sched = lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)  # noqa: E731
    want = torch_reference(template, data, scheduler=sched, world_size=2, **LR)
    for got in train_ranks(template, data, 2, "zero2", scheduler=sched, **LR):
        close_to(got, want)


def test_no_sync_accumulation(mlp):
    """Two micro-batches per step, the first under no_sync(): torch DDP's gradient accumulation."""
    template, (x, y) = mlp
    steps, world = 10, 2
    ref = copy.deepcopy(template)
    ref_opt = torch.optim.AdamW(ref.parameters(), **LR)
    params = list(ref.parameters())
    for s in range(steps):  # the average over ranks of the sum over each rank's micro-batches
        ref_opt.zero_grad()
        total = None
        for r in range(world):
            rank_x, rank_y = shard_of(x[s], r, world), shard_of(y[s], r, world)
            loss = loss_fn(ref, rank_x[:8], rank_y[:8]) + loss_fn(ref, rank_x[8:], rank_y[8:])
            g = torch.autograd.grad(loss, params)
            total = list(g) if total is None else [a + b for a, b in zip(total, g)]
        for p, g in zip(params, total):
            p.grad = g / world
        ref_opt.step()

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="zero2", backend=backend, bucket_cap_mb=0.004, **LR)
        r = backend.rank
        for s in range(steps):
            opt.zero_grad()
            rank_x, rank_y = shard_of(x[s], r, world), shard_of(y[s], r, world)
            with opt.no_sync():
                loss_fn(model, rank_x[:8], rank_y[:8]).backward()
            loss_fn(model, rank_x[8:], rank_y[8:]).backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()]
    for got in run_ranks(world, body):
        close_to(got, [p.detach() for p in params])


def test_backward_twice_without_no_sync_is_an_error(mlp):
    template, (x, y) = mlp

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="ddp", backend=backend, **LR)
        loss_fn(model, x[0], y[0]).backward()
        with pytest.raises(RuntimeError, match="no_sync"):
            loss_fn(model, x[1], y[1]).backward()
        opt.zero_grad()  # starts over
        loss_fn(model, x[1], y[1]).backward()
        opt.step()
    run_ranks(2, body)


@pytest.mark.parametrize("no_sync", [False, True])
@pytest.mark.parametrize("strategy", ["zero2", "fsdp"])
def test_sharded_gradients_hold_a_bounded_pool_of_staging_buffers(strategy, no_sync):
    """ZeRO-2 and FSDP hold the gradient's shard and two staging buffers (each the size of the largest bucket), not
    a staging buffer per bucket (a full gradient's copy besides its shard, what they held before): 12 layers of
    32 x 32 in 12 buckets at 2 ranks hold less than torch's ZeroRedundancyOptimizer would (full parameters and
    gradients, half the AdamW state), also with no_sync() accumulation (gradients torch's own until their bucket
    takes a buffer). FSDP's buffers also hold the gathered unit and the prefetched one. The same parameters as
    DDP's, bit for bit (f64)."""
    torch.manual_seed(0)
    template = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(12)]).double()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 32, 32, generator=g).double(), torch.randn(4, 32, 32, generator=g).double()
    cap = 32 * 33 * 8 / 2 ** 20  # a layer's weight and bias per bucket

    def run(strategy):
        def body(backend):
            model = copy.deepcopy(template)
            opt = ShardedOptimizer(model, "adamw", strategy=strategy, backend=backend, bucket_cap_mb=cap, **LR)
            r = backend.rank
            for s in range(4):
                opt.zero_grad()
                if no_sync:
                    with opt.no_sync():
                        loss_fn(model, shard_of(x[s], r, 2)[:8], shard_of(y[s], r, 2)[:8]).backward()
                    loss_fn(model, shard_of(x[s], r, 2)[8:], shard_of(y[s], r, 2)[8:]).backward()
                else:
                    loss_fn(model, shard_of(x[s], r, 2), shard_of(y[s], r, 2)).backward()
                opt.step()
            buckets = [opt._so.bucket_size(b) for b in range(opt._so.bucket_count)]
            stats, padded = opt.memory_stats(), opt._so.padded_count
            with opt.summon_full_params():
                params = [p.detach().clone() for p in model.parameters()]
            opt.close()
            return params, buckets, stats, padded
        return run_ranks(2, body)

    want = run("ddp")[0][0]
    for params, buckets, stats, padded in run(strategy):
        assert all(torch.equal(a, b) for a, b in zip(params, want)), f"{strategy} differs from ddp"
        assert len(buckets) == 12, buckets
        full = padded * 8  # f64 bytes of the (padded) gradient
        held_buckets = 2 if strategy == "zero2" else 4  # the staging pool (+ FSDP's gathered units)
        pool = held_buckets * (max(buckets) + padded - sum(buckets)) * 8  # the largest bucket, with any padding
        assert stats.peak_buffer_bytes <= pool < full / 2, (stats, pool, full)
        assert stats.grads_bytes <= full / 2
        zero_redundancy = full + full + 2 * full / 2  # parameters, gradients, half of AdamW's two moments
        held = stats.params_bytes + stats.grads_bytes + stats.optimizer_state_bytes + stats.peak_buffer_bytes
        assert held < zero_redundancy, (stats, zero_redundancy)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_clipping_across_shards(mlp, strategy):
    template, data = mlp
    want = torch_reference(template, data, clip=0.05, world_size=2, **LR)
    x, y = data

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy=strategy, backend=backend, max_grad_norm=0.05,
                               bucket_cap_mb=0.004, **LR)
        norms = []
        for s in range(20):
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], backend.rank, 2), shard_of(y[s], backend.rank, 2)).backward()
            opt.clip_grad_norm_(0.05)
            opt.step()
            norms.append(opt.last_step.grad_norm)
        with pytest.raises(ValueError, match="max_grad_norm"):
            opt.clip_grad_norm_(1.0)
        assert min(norms) > 0.05  # every step was clipped
        with opt.summon_full_params():
            return [p.detach().clone() for p in model.parameters()]
    for got in run_ranks(2, body):
        close_to(got, want)


def test_state_dict_saved_at_4_loaded_at_2(mlp, tmp_path):
    """ZeRO-2 at 4 ranks for 10 steps, its state_dict through torch.save; FSDP at 2 ranks loads it and trains 10
    more: torch's 20 steps. The library's sharded checkpoint directory the same way (save() / load())."""
    template, data = mlp
    x, y = data
    want = torch_reference(template, data, **LR)
    fresh = make_model("mlp", seed=7)  # loading replaces these parameters

    def first(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="zero2", backend=backend, **LR)
        for s in range(10):
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], backend.rank, 4), shard_of(y[s], backend.rank, 4)).backward()
            opt.step()
        state = opt.state_dict()
        opt.save(tmp_path / "ckpt")
        return saved(state)
    blob = run_ranks(4, first)[0]

    def second(use_dir):
        def body(backend):
            model = copy.deepcopy(fresh)
            opt = ShardedOptimizer(model, "adamw", strategy="fsdp", backend=backend, lr=0.5)
            if use_dir:
                opt.load(tmp_path / "ckpt")
            else:
                opt.load_state_dict(loaded(blob))
            assert opt.param_groups[0]["lr"] == LR["lr"]
            for s in range(10, 20):
                opt.zero_grad()
                loss_fn(model, shard_of(x[s], backend.rank, 2), shard_of(y[s], backend.rank, 2)).backward()
                opt.step()
            return list(model.state_dict().values())  # FSDP: a collective holding the full values
        return run_ranks(2, body)
    for use_dir in (False, True):
        for got in second(use_dir):
            close_to(got, want, 1e-4)  # 4 then 2 ranks: the gradient averages round as their slices do


# ---- bad input: a clear error at construction ----
def one_rank(fn):
    return run_ranks(1, fn)[0]


def test_non_leaf_parameter():
    w = torch.nn.Parameter(torch.ones(3))
    with pytest.raises(ValueError, match="not a leaf"):
        one_rank(lambda b: ShardedOptimizer([w * 2], backend=b))


def test_shared_parameter():
    a = torch.nn.Linear(4, 4)
    model = torch.nn.Sequential(a, torch.nn.Tanh(), torch.nn.Linear(4, 4))
    model[2].weight = a.weight
    with pytest.raises(ValueError, match="'2.weight' is the same tensor as '0.weight' .shared between modules"):
        one_rank(lambda b: ShardedOptimizer(model, backend=b))
    with pytest.raises(ValueError, match="share memory"):
        base = torch.zeros(8)
        one_rank(lambda b: ShardedOptimizer([torch.nn.Parameter(base[:4]), torch.nn.Parameter(base[4:])],
                                            backend=b))


def test_parameters_differing_across_ranks():
    def body(backend):
        model = torch.nn.Linear(4, 4 + backend.rank)
        with pytest.raises(ValueError, match="differ across ranks"):
            ShardedOptimizer(model, backend=backend)
    run_ranks(2, body)


def test_tensor_on_another_device_and_other_mistakes():
    meta = torch.nn.Linear(4, 4, device="meta")
    with pytest.raises(ValueError, match="is on meta.*CPU or CUDA tensors"):
        one_rank(lambda b: ShardedOptimizer(meta, backend=b))
    mixed = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).double())
    with pytest.raises(ValueError, match="mix"):
        one_rank(lambda b: ShardedOptimizer(mixed, backend=b))
    with pytest.raises(ValueError, match="one parameter group"):
        one_rank(lambda b: ShardedOptimizer([{"params": [torch.nn.Parameter(torch.ones(2))]},
                                             {"params": [torch.nn.Parameter(torch.ones(2))]}], backend=b))
    with pytest.raises(ValueError, match="unknown strategy"):
        one_rank(lambda b: ShardedOptimizer(torch.nn.Linear(2, 2), strategy="zero4", backend=b))
    with pytest.raises(ValueError, match="backend must be None, 'ucx' or a shardopt CommunicationBackend for "
                                         "parameters on cpu, not 'nccl'"):
        ShardedOptimizer(torch.nn.Linear(2, 2), backend="nccl")  # NCCL takes device buffers only
    with pytest.raises(so.InvalidArgumentError, match="update_threads"):
        one_rank(lambda b: ShardedOptimizer(torch.nn.Linear(2, 2), backend=b, update_threads=-1))


def test_a_refused_construction_closes_the_backend_it_made(monkeypatch):
    """A construction refused after it made its own backend (backend=None) closes that backend at once, not whenever
    the garbage collector finds it (a UCX world holds a listening port and threads); a backend the caller gave stays
    open, and the parameters keep their values."""
    made, real = [], placement.Placement.backend

    def recording(self, backend):
        made.append(real(self, backend))
        return made[-1]
    monkeypatch.setattr(placement.Placement, "backend", recording)
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(so.InvalidArgumentError, match="update_threads"):
        ShardedOptimizer(model, update_threads=-1)
    (backend, own), = made
    assert own and not backend.is_initialized
    given = so.InMemoryCommunicationBackend(0, 1)
    with pytest.raises(so.InvalidArgumentError, match="update_threads"):
        ShardedOptimizer(model, backend=given, update_threads=-1)
    assert given.is_initialized and given.world_size == 1
    given.close()
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))


@pytest.mark.parametrize("strategy", ["zero1", "zero2"])
@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_overlapped_parameter_gathers_train_the_same_bits(kind, strategy):
    """overlap_param_gather: step() returns with the gathers in flight, each module's forward waits for its own;
    f64 training is bit for bit the run without overlap, at 2 and 3 ranks."""
    template, data = make_model(kind, torch.float64), make_data(kind, torch.float64)
    for world in (2, 3):
        want = train_ranks(template, data, world, strategy, **LR)
        got = train_ranks(template, data, world, strategy, overlap_param_gather=True, **LR)
        for g, w in zip(got, want):
            assert all(torch.equal(a, b) for a, b in zip(g, w)), f"{kind} {strategy} at {world} ranks differs"


def test_overlapped_gathers_are_waited_for_module_by_module_in_forward_order(mlp):
    """After step() every bucket is pending; the forward gathers them one module at a time, first layer first, and
    a checkpoint between step() and the forward completes them (it reads every parameter)."""
    template, (x, y) = mlp

    def body(backend):
        model = copy.deepcopy(template)
        opt = ShardedOptimizer(model, "adamw", strategy="zero2", backend=backend, overlap_param_gather=True,
                               bucket_cap_mb=1e-4, **LR)  # a bucket per tensor
        r = backend.rank
        loss_fn(model, shard_of(x[0], r, 2), shard_of(y[0], r, 2)).backward()
        opt.step()
        gathers = opt._gathers
        assert gathers.pending == frozenset(range(opt._so.bucket_count))
        waited, real_wait = [], gathers.wait

        def spy(buckets):
            waited.append([b for b in buckets if b in gathers.pending])
            real_wait(buckets)
        gathers.wait = spy
        loss_fn(model, shard_of(x[1], r, 2), shard_of(y[1], r, 2)).backward()
        assert not gathers.pending
        order = [b for w in waited for b in w]
        assert order == sorted(order) and len(order) == opt._so.bucket_count, waited  # forward order, each once
        first = [opt._bucket_of[opt._tensor_of[id(p)]] for p in model.parameters()]
        assert first == sorted(first), "buckets are not in the modules' forward order"
        opt.step()
        state = opt.state_dict()  # between step() and the forward: waits for the gathers
        assert not gathers.pending and state["shardopt"]["names"] == [n for n, _ in model.named_parameters()]
        opt.close()
    run_ranks(2, body)


def test_overlap_param_gather_needs_zero1_or_zero2_over_a_module(mlp):
    template, _ = mlp
    with pytest.raises(ValueError, match="zero1' or 'zero2"):
        ShardedOptimizer(copy.deepcopy(template), "adamw", strategy="fsdp", overlap_param_gather=True)
    with pytest.raises(ValueError, match="nn.Module"):
        ShardedOptimizer(list(copy.deepcopy(template).parameters()), "adamw", strategy="zero2",
                         overlap_param_gather=True)


def test_a_checkpoint_moves_between_bucket_orders():
    """Overlapped gathers lay the buckets out in forward order, the default in backward order: a state_dict saved by
    one loads into the other (the library matches tensors by name) and training goes on bit for bit (f64)."""
    template, (x, y) = make_model("mlp", torch.float64), make_data("mlp", torch.float64)

    def train(opt, model, r, steps):
        for s in steps:
            opt.zero_grad()
            loss_fn(model, shard_of(x[s], r, 2), shard_of(y[s], r, 2)).backward()
            opt.step()

    def final(opt, model):
        with opt.summon_full_params():
            out = [p.detach().clone() for p in model.parameters()]
        opt.close()
        return out

    def body(backend):
        r = backend.rank
        first = copy.deepcopy(template)
        plain = ShardedOptimizer(first, "adamw", strategy="zero2", backend=backend, **LR)
        train(plain, first, r, range(3))
        state = plain.state_dict()
        train(plain, first, r, range(3, 6))
        want = final(plain, first)
        second = copy.deepcopy(template)
        overlapped = ShardedOptimizer(second, "adamw", strategy="zero2", backend=backend, overlap_param_gather=True,
                                      **LR)
        overlapped.load_state_dict(state)
        train(overlapped, second, r, range(3, 6))
        assert all(torch.equal(a, b) for a, b in zip(final(overlapped, second), want))
    run_ranks(2, body)
