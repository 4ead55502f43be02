"""ZeRO-Offload's configuration, with AiDotNet's names: cpu_offload_optimizer / _gradients /
_params and the factories create_for_zero_offload(_full). These optimizers keep their memory in
host memory, where the flags reach the library, are accepted and change nothing: training is bit
for bit the same and memory_stats holds no host bytes beside the usual ones."""
import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory
from mlp_demo import MlpDemo

MODEL = MlpDemo()
DATA = so.OptimizationInputData(num_samples=MODEL.samples)
FLAGS = ("cpu_offload_optimizer", "cpu_offload_gradients", "cpu_offload_params")


def flags(cfg):
    return tuple(getattr(cfg, f) for f in FLAGS)


def test_factories_set_aidotnets_flags():
    with so.InMemoryCommunicationBackend(0, 1, "offload-factories") as b:
        assert flags(so.ShardingConfiguration(b)) == (False, False, False)
        assert flags(so.ShardingConfiguration.create_default(b)) == (False, False, False)
        assert flags(so.ShardingConfiguration.create_for_zero_offload(b)) == (True, False, False)
        assert flags(so.ShardingConfiguration.create_for_zero_offload_full(b)) == (True, True, True)
        assert so.ShardingConfiguration.create_for_zero_offload(b).minimum_parameter_group_size == 1024
    with pytest.raises(TypeError):
        so.ShardingConfiguration.create_for_zero_offload(None)
    with pytest.raises(TypeError):
        so.ShardingConfiguration.create_for_zero_offload_full(None)


@pytest.mark.parametrize("cls", [so.DDPOptimizer, so.ZeRO2Optimizer, so.FSDPOptimizer])
def test_flags_reach_the_library_and_change_nothing_in_host_memory(cls):
    def rank(backend):
        out = []
        for cfg in (so.ShardingConfiguration(backend), so.ShardingConfiguration.create_for_zero_offload_full(backend)):
            with cls(so.AdamOptimizer(learning_rate=3e-3, batch_size=128, max_iterations=2), cfg, layout=MODEL.layout(),
                     initial=MODEL.initial_parameters()) as opt:
                s = opt._sharding_options()
                native = tuple(getattr(s, f) == so.native.SHARDOPT_ENABLE for f in FLAGS)
                result = opt.optimize(MODEL, DATA)
                out.append((native, result.fitness_history, opt.get_parameters().copy(), opt.memory_stats()))
        return out
    for (plain_flags, plain_loss, plain_params, plain_mem), (full_flags, full_loss, full_params, full_mem) in \
            launch_in_memory(2, rank):
        assert plain_flags == (False, False, False) and full_flags == (True, True, True)
        assert full_loss == plain_loss
        assert np.array_equal(full_params, plain_params)
        assert full_mem == plain_mem  # every field, the host ones included
        assert full_mem.host_total_bytes == full_mem.host_params_bytes == 0
        assert full_mem.optimizer_state_bytes > 0
