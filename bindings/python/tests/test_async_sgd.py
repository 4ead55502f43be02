"""AsyncSGDOptimizer on 4 in-process ranks: staleness 0 is DDP bit for bit; at staleness 2 every rank
ends with the same parameters and training converges; misuse raises."""
import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory
from mlp_demo import MlpDemo

MODEL = MlpDemo()
DATA = so.OptimizationInputData(num_samples=MODEL.samples)


def train(make, world_size=4):
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        with make(so.AdamOptimizer(learning_rate=3e-3, batch_size=64, max_iterations=3, shuffle_data=False), cfg) as opt:
            opt.initialize(MODEL.layout(), MODEL.initial_parameters())
            result = opt.optimize(MODEL, DATA)
            return result, opt.get_parameters(), opt.step_count
    return launch_in_memory(world_size, rank)


def test_staleness_0_is_ddp_bit_for_bit():
    ddp = train(so.DDPOptimizer)
    async0 = train(lambda w, c: so.AsyncSGDOptimizer(w, c, allow_staleness=0))
    for result, params, _ in async0:
        assert params.tobytes() == ddp[0][1].tobytes()
        assert result.fitness_history == ddp[0][0].fitness_history


def test_staleness_2_trains_and_ranks_agree():
    runs = train(lambda w, c: so.AsyncSGDOptimizer(w, c, 2))
    history = runs[0][0].fitness_history
    assert history[-1] < 0.8 * history[0]
    assert runs[0][2] == 3 * MODEL.samples // 64  # one update per clock
    for _, params, _ in runs[1:]:
        assert params.tobytes() == runs[0][1].tobytes()


def test_misuse_raises():
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        with pytest.raises(ValueError, match="allow_staleness"):
            so.AsyncSGDOptimizer(so.AdamOptimizer(), cfg, -1)
        with pytest.raises(TypeError):
            so.AsyncSGDOptimizer(so.AdamOptimizer(), cfg, 1.5)
        with so.AsyncSGDOptimizer(so.AdamOptimizer(), cfg, 3, layout=MODEL.layout()) as opt:
            assert opt.allow_staleness == 3
            with pytest.raises(NotImplementedError, match="optimize()"):
                opt.step()
        return True
    assert all(launch_in_memory(2, rank))
