"""One rank of test_two_ucx_processes: run under tools/shardopt-run -n 2."""
import os
import sys

import numpy as np

import shardopt as so

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "samples", "python"))
from mlp_demo import MlpDemo  # noqa: E402

model = MlpDemo()
with so.UcxCommunicationBackend() as backend:
    assert backend.world_size == 2
    cfg = so.ShardingConfiguration(backend)
    with so.ZeRO2Optimizer(so.AdamOptimizer(learning_rate=3e-3, batch_size=128, max_iterations=3), cfg, layout=model.layout(),
                           initial=model.initial_parameters()) as opt:
        r = opt.optimize(model, so.OptimizationInputData(num_samples=model.samples))
        p = opt.get_parameters()
    lo, hi = p.copy(), p.copy()
    backend.all_reduce(lo, so.ReductionOperation.MIN)
    backend.all_reduce(hi, so.ReductionOperation.MAX)
    assert np.array_equal(lo, hi), "ranks disagree on parameters"
    assert r.fitness_history[-1] < r.fitness_history[0]
    print(f"ucx ok rank {backend.rank} loss {r.fitness_history[0]:.4f} -> {r.fitness_history[-1]:.4f}")
