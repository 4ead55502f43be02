"""The planner from Python: plan() puts the strategies that fit first, fastest first (7e9 parameters on 8 GPUs of
80 GB: DDP's 16 bytes a parameter do not fit, FSDP does), rank_memory() equals memory_stats() on every rank, bad
input raises the library's InvalidArgumentError naming it."""
import pytest

import shardopt as so
from ranks import launch_in_memory


def test_plan_orders_and_fits():
    plans = so.plan(7e9, ranks_per_host=8, gpus=True, device_memory=80e9, intra_bandwidth=900e9, compute_seconds=2.0)
    fitting = [p for p in plans if p.fits]
    assert 0 < len(fitting) < len(plans) and plans[:len(fitting)] == fitting
    assert [p.step_seconds for p in fitting] == sorted(p.step_seconds for p in fitting)
    by_name = {p.name: p for p in plans}
    assert not by_name["ddp"].fits and by_name["ddp"].device_bytes == 112_000_000_000
    assert by_name["fsdp"].fits and by_name["fsdp"].optimizer_state_bytes == 7_000_000_000
    assert all(p.step_seconds >= p.compute_seconds for p in plans)


@pytest.mark.parametrize("strategy,cls", [("zero2", so.ZeRO2Optimizer), ("fsdp", so.FSDPOptimizer)])
def test_rank_memory_equals_memory_stats(strategy, cls):
    def rank(backend):
        layout = so.ParameterLayout().add("w", (40, 30)).add("b", 7)
        config = so.ShardingConfiguration(backend)
        with cls(so.AdamOptimizer(), config, layout=layout) as opt:
            for b in range(opt.bucket_count):  # a forward over the units, then a step
                opt.gather(b)
                opt.release(b)
            opt.zero_grad()
            opt.step()
            planned = so.rank_memory(layout, strategy, backend.world_size, backend.rank, configuration=config)
            return opt.memory_stats() == planned, planned.optimizer_state_bytes

    outcomes = launch_in_memory(3, rank)
    assert all(same for same, _ in outcomes) and all(state > 0 for _, state in outcomes)


def test_bad_input_is_named():
    with pytest.raises(so.InvalidArgumentError, match="parameter count"):
        so.plan(0, ranks_per_host=8)
    with pytest.raises(so.InvalidArgumentError, match="device_memory_bytes"):
        so.plan(7e9, ranks_per_host=8, gpus=True)
    with pytest.raises(so.InvalidArgumentError, match="between hosts"):
        so.plan(7e9, hosts=2, inter_bandwidth=-1.0)
    with pytest.raises(ValueError, match="strategy"):
        so.rank_memory(so.ParameterLayout().add("w", 4), "zero9", 1, 0)
