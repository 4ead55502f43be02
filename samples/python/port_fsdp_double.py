#!/usr/bin/env python3
"""AiDotNet's FSDPOptimizer example (FSDPOptimizer.txt), ported: only the import line and the model
class differ from the C# original (`using AiDotNet.DistributedTraining;` -> `from shardopt import *`,
the model -> LinearModel). Element type double: the model's numpy.float64.

    python3 port_fsdp_double.py            # 4 in-memory ranks (threads), against one process
    shardopt-run -n 4 -- python3 port_fsdp_double.py --ucx     # 4 UCX processes

Each run ends by checking that every rank's result equals single-process training."""
import sys
import threading

import numpy as np

from shardopt import *                   # using AiDotNet.DistributedTraining;
from linear_model import LinearModel, dataset


def train(backend):
    x_train, y_train = dataset(0, 64)
    x_validation, y_validation = dataset(64, 16)
    x_test, y_test = dataset(80, 16)
    inputData = OptimizationInputData(x_train=x_train, y_train=y_train, x_validation=x_validation,
                                      y_validation=y_validation, x_test=x_test, y_test=y_test)
    model = LinearModel()
    options = AdamOptimizerOptions(initial_learning_rate=0.05, batch_size=16, epochs=5)

    # ---- the example, as in AiDotNet ----
    # Original optimizer
    optimizer = AdamOptimizer(model, options)

    # Wrap it for FSDP distributed training
    config = ShardingConfiguration(backend)
    fsdpOptimizer = FSDPOptimizer(optimizer, config)

    # Now optimize as usual - FSDP magic happens automatically!
    result = fsdpOptimizer.optimize(inputData)
    # ---- end of the example ----

    final = fsdpOptimizer.get_parameters()
    fsdpOptimizer.close()
    return result, final


def in_memory(world_size):
    out = [None] * world_size
    errors = []

    def rank(r):
        try:
            with InMemoryCommunicationBackend(rank=r, world_size=world_size, environment_id=f"port-{world_size}") as backend:
                out[r] = train(backend)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def check(label, result, final, ref_result, ref_final):
    np.testing.assert_allclose(final, ref_final, rtol=1e-12, atol=1e-14, err_msg=label)
    np.testing.assert_allclose(result.best_solution, ref_result.best_solution, rtol=1e-12, atol=1e-14, err_msg=label)
    np.testing.assert_allclose(result.fitness_history, ref_result.fitness_history, rtol=1e-12, err_msg=label)
    assert result.iterations == ref_result.iterations == 20, (label, result.iterations)
    assert result.validation_result is not None and result.test_result is not None
    assert result.fitness_history[-1] < 0.5 * result.fitness_history[0], result.fitness_history


def main():
    single_result, single_final = in_memory(1)[0]
    if "--ucx" in sys.argv:
        with UcxCommunicationBackend() as backend:
            result, final = train(backend)
            check(f"ucx rank {backend.rank}", result, final, single_result, single_final)
            print(f"ucx rank {backend.rank} of {backend.world_size}: equal to single-process training; "
                  f"loss {result.fitness_history[0]:.6f} -> {result.fitness_history[-1]:.6f}, "
                  f"validation {result.validation_result.loss:.6f}, test {result.test_result.loss:.6f}")
        return
    for r, (result, final) in enumerate(in_memory(4)):
        check(f"in-memory rank {r}", result, final, single_result, single_final)
    print(f"4 in-memory ranks: equal to single-process training; loss {single_result.fitness_history[0]:.6f} -> "
          f"{single_result.fitness_history[-1]:.6f}, best validation loss {single_result.best_fitness_score:.6f}")


if __name__ == "__main__":
    main()
