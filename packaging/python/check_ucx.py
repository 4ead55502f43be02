"""One rank of the installed wheel's check: run by `python -m shardopt.run -n 2 check_ucx.py`.
Trains the demo MLP with ZeRO-2 over Adam on 2 UCX processes, checks the ranks agree, and says
where UCX and libshardopt were loaded from (the wheel's venv, not a build tree). Leaves a sharded
checkpoint in ./checkpoint for the wheel's offline checkpoint tool."""
import os
import sys

import numpy as np

import shardopt as so
from mlp_demo import MlpDemo  # samples/python/mlp_demo.py, copied beside this file

model = MlpDemo()
with so.UcxCommunicationBackend() as backend:
    assert backend.world_size == 2, backend.world_size
    cfg = so.ShardingConfiguration(backend)
    with so.ZeRO2Optimizer(so.AdamOptimizer(learning_rate=3e-3, batch_size=128, max_iterations=3), cfg, layout=model.layout(),
                           initial=model.initial_parameters()) as opt:
        r = opt.optimize(model, so.OptimizationInputData(num_samples=model.samples))
        p = opt.get_parameters()
        opt.save_model("checkpoint")  # a sharded checkpoint, for the offline tool's check after the run
    lo, hi = p.copy(), p.copy()
    backend.all_reduce(lo, so.ReductionOperation.MIN)
    backend.all_reduce(hi, so.ReductionOperation.MAX)
    assert np.array_equal(lo, hi), "ranks disagree on parameters"
    assert r.fitness_history[-1] < r.fitness_history[0]
    rank = backend.rank

libs = {}
with open("/proc/self/maps") as maps:
    for line in maps:
        path = line.split()[-1]
        name = os.path.basename(path)
        for key in ("libucp.so", "libucs.so", "libshardopt", "_shardopt_native"):
            if name.startswith(key):
                libs[key] = path
prefix = sys.prefix
outside = {k: v for k, v in libs.items() if not v.startswith(os.path.realpath(prefix)) and not v.startswith(prefix)}
print(f"rank {rank}: shardopt {so.__version__} loss {r.fitness_history[0]:.4f} -> {r.fitness_history[-1]:.4f}; "
      f"libucp from {libs.get('libucp.so')}")
if outside:
    print(f"rank {rank}: loaded from outside the venv {prefix}: {outside}", file=sys.stderr)
    sys.exit(3)
