"""shardopt.torch against torch.optim.AdamW in one process (docs/torch.md): a small MLP and a 2-layer transformer,
20 steps, at 2 and 4 in-memory ranks under DDP, ZeRO-1, ZeRO-2 and FSDP.

f32: every tensor within 1e-6 relative of torch's AdamW over the same gradient (the average of the ranks' slices,
as torch DDP computes it), and within 1e-4 of torch on the whole batch (f32 rounds a mean of 32 samples otherwise
than the average of two means of 16, and 20 Adam steps through attention and layer norms amplify it). f64: every
strategy and world size bit for bit the same, within 1e-12 of torch. torch itself is not matched bit for bit: its
CPU AdamW kernel evaluates lerp and addcdiv in another order (vectorized, fused multiply-adds) than the library's
rule, which rounds every operation on its own so that any cut of the buffer gives the same bits."""
import pytest

torch = pytest.importorskip("torch")

from torch_cases import make_data, make_model, relative_errors, torch_reference, train_ranks  # noqa: E402

STRATEGIES = ["ddp", "zero1", "zero2", "fsdp"]
LR = dict(lr=1e-2, weight_decay=0.01)
_cache = {}


def reference(kind, dtype=torch.float32, world_size=1):
    key = (kind, dtype, world_size)
    if key not in _cache:
        template, data = make_model(kind, dtype), make_data(kind, dtype)
        _cache[key] = template, data, torch_reference(template, data, world_size=world_size, **LR)
    return _cache[key]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_f32_matches_torch_adamw(kind, strategy, world_size):
    template, data, want = reference(kind, world_size=world_size)
    whole = reference(kind)[2]
    # small buckets, so ZeRO-2 and FSDP run several buckets (units) and their overlap during backward; FSDP
    # gathers each linear layer as its own unit in its forward and again in its backward
    ranks = train_ranks(template, data, world_size, strategy, bucket_cap_mb=0.004, min_unit_params=64, **LR)
    for got in ranks:
        errors = relative_errors(got, want)
        assert max(errors) <= 1e-6, f"{kind} {strategy} x{world_size}: relative errors {errors}"
        assert max(relative_errors(got, whole)) <= 1e-4
    for got in ranks[1:]:  # the replicas agree bit for bit
        assert all(torch.equal(a, b) for a, b in zip(got, ranks[0]))


@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_f64_strategies_and_world_sizes_bit_for_bit(kind):
    runs = {}
    for n in (2, 4):
        template, data, want = reference(kind, torch.float64, n)
        for s in STRATEGIES:
            runs[s, n] = got = train_ranks(template, data, n, s, bucket_cap_mb=0.004, min_unit_params=64, **LR)[0]
            assert all(torch.equal(a, b) for a, b in zip(got, runs["ddp", n])), f"{s} x{n} differs from ddp"
            assert max(relative_errors(got, want)) <= 1e-12, f"{s} x{n}: {relative_errors(got, want)}"
        for s in ("zero2", "fsdp"):  # one gradient staging buffer: gradients wait for it as torch's own
            got = train_ranks(template, data, n, s, bucket_cap_mb=0.004, min_unit_params=64, staging_buffers=1,
                              **LR)[0]
            assert all(torch.equal(a, b) for a, b in zip(got, runs["ddp", n])), f"{s} x{n}, 1 buffer, differs"
