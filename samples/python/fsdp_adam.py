#!/usr/bin/env python3
"""The seed example: an Adam optimizer wrapped in FSDPOptimizer, with a ShardingConfiguration over
an in-memory backend of world size 4 (one thread per rank), trains the demo MLP with optimize()."""
import threading

import shardopt as so
from mlp_demo import MlpDemo

WORLD_SIZE = 4
model = MlpDemo(samples=1024)
results = [None] * WORLD_SIZE


def rank(r):
    with so.InMemoryCommunicationBackend(r, WORLD_SIZE, environment_id="fsdp-sample") as backend:
        config = so.ShardingConfiguration(backend)
        adam = so.AdamOptimizer(so.AdamOptimizerOptions(learning_rate=3e-3, batch_size=256, max_iterations=6))
        with so.FSDPOptimizer(adam, config, layout=model.layout(), initial=model.initial_parameters()) as fsdp:
            results[r] = fsdp.optimize(model, so.OptimizationInputData(num_samples=model.samples))


threads = [threading.Thread(target=rank, args=(r,)) for r in range(WORLD_SIZE)]
for t in threads:
    t.start()
for t in threads:
    t.join()
history = results[0].fitness_history
for epoch, loss in enumerate(history, 1):
    print(f"epoch {epoch}  loss {loss:.4f}")
if not history[-1] < 0.9 * history[0]:
    raise SystemExit(f"loss did not decrease: {history[0]:.4f} -> {history[-1]:.4f}")
print(f"FSDP over {WORLD_SIZE} in-memory ranks, {results[0].steps} steps: "
      f"loss {history[0]:.4f} -> {history[-1]:.4f}")
