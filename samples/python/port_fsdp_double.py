#!/usr/bin/env python3
"""AiDotNet's FSDPOptimizer example (FSDPOptimizer.txt), ported: only the import line and the model differ
from the C# original (`using AiDotNet.DistributedTraining;` -> `from shardopt import *`; the model: the
conformance suite's linear model, ConformanceModel, and its training set). The element type is double, the
model's numpy.float64; AdamOptimizerOptions() holds AiDotNet's defaults, the library's. Prints rank 0's
result in the conformance suite's format as run `seed_example`, which must equal the C driver's bit for bit
(ctest samples.python_seed_example: compare.py --only seed_example; the arguments it appends are ignored).

    python3 port_fsdp_double.py                                # 4 in-memory ranks, one thread each
    shardopt-run -n 4 -- python3 port_fsdp_double.py --ucx     # 4 UCX processes, each checked equal to them"""
import sys
import threading

from shardopt import *                          # using AiDotNet.DistributedTraining;
from conformance_model import TRAIN, ConformanceModel, dataset, run_output

UCX = "--ucx" in sys.argv


def example(rank):
    model = ConformanceModel()
    options = AdamOptimizerOptions()
    x_train, y_train = dataset(0, TRAIN)
    inputData = OptimizationInputData(x_train=x_train, y_train=y_train)

    # ---- the example, as in AiDotNet ----
    # Original optimizer
    optimizer = AdamOptimizer(model, options)

    # Wrap it for FSDP distributed training
    backend = UcxCommunicationBackend() if UCX else InMemoryCommunicationBackend(rank=rank, world_size=4)
    config = ShardingConfiguration(backend)
    fsdpOptimizer = FSDPOptimizer(optimizer, config)

    # Now optimize as usual - FSDP magic happens automatically!
    result = fsdpOptimizer.optimize(inputData)
    # ---- end of the example ----

    output = run_output("seed_example", result, fsdpOptimizer.get_parameters())
    fsdpOptimizer.close()
    backend.close()
    return output


def in_memory():
    """The example on 4 in-memory ranks: rank 0's output, checked equal to every rank's."""
    outputs, errors = [None] * 4, []

    def rank(r):
        try:
            outputs[r] = example(r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if any(o != outputs[0] for o in outputs):
        raise SystemExit("the in-memory ranks' results differ")
    return outputs[0]


if __name__ == "__main__":
    if UCX:
        mine = example(None)
        UCX = False
        if mine != in_memory():
            raise SystemExit("this UCX rank's result differs from 4 in-memory ranks':\n" + mine)
        print("equal, bit for bit, to the example on 4 in-memory ranks")
    else:
        sys.stdout.write(in_memory())
