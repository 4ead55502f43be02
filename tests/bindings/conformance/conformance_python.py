#!/usr/bin/env python3
"""The conformance suite's Python driver (README.md in this folder): every run of runs.txt through shardopt's
idiomatic Python API, as a port of an AiDotNet program would write it: the suite's model as a shardopt.Model
with optimize(OptimizationInputData), InMemoryCommunicationBackend ranks on threads, the optimizer class of
`strategy` and the options class of `optimizer`. A key that is absent is not set: the API's default applies.

    conformance_python.py RUNS_FILE [RUN_NAME...]      (prints the README's output; rank 0's, checked equal
                                                        to every other rank's)"""
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "samples", "python"))
import shardopt as so  # noqa: E402
from conformance_model import FEATURES, TEST, TRAIN, VALIDATION, ConformanceModel, dataset, run_output  # noqa: E402

STRATEGIES = {"ddp": so.DDPOptimizer, "zero1": so.ZeRO1Optimizer, "zero2": so.ZeRO2Optimizer, "fsdp": so.FSDPOptimizer,
              "hybrid": so.HybridShardedOptimizer, "local_sgd": so.LocalSGDOptimizer,
              "async_sgd": so.AsyncSGDOptimizer}
OPTIMIZERS = {"sgd": so.StochasticGradientDescentOptimizer, "momentum": so.MomentumOptimizer, "adam": so.AdamOptimizer,
              "adamw": so.AdamWOptimizer, "rmsprop": so.RootMeanSquarePropagationOptimizer,
              "adagrad": so.AdagradOptimizer, "lamb": so.LambOptimizer, "lion": so.LionOptimizer,
              "adafactor": so.AdafactorOptimizer, "nadam": so.NadamOptimizer, "adamax": so.AdaMaxOptimizer,
              "adadelta": so.AdaDeltaOptimizer, "muon": so.MuonOptimizer}
PRESETS = {"default": so.ShardingConfiguration.create_default,
           "high_bandwidth": so.ShardingConfiguration.create_for_high_bandwidth,
           "low_bandwidth": so.ShardingConfiguration.create_for_low_bandwidth}
OPTIONS = {"lr": ("initial_learning_rate", float), "batch": ("batch_size", int), "epochs": ("max_iterations", int),
           "max_steps": ("max_steps", int), "shuffle": ("shuffle_data", lambda v: v == "1"),
           "seed": ("random_seed", int), "early_stopping": ("use_early_stopping", lambda v: v == "1"),
           "patience": ("early_stopping_patience", int), "tolerance": ("tolerance", float)}
CONFIG = {"config_lr": ("learning_rate", float), "group": ("minimum_parameter_group_size", int),
          "local_steps": ("local_steps", int), "accumulation": ("gradient_accumulation_steps", int),
          "auto_sync": ("auto_sync_gradients", lambda v: v == "1"),
          "memory": ("memory", lambda v: so.MemorySpace.CUDA if v == "cuda" else so.MemorySpace.HOST)}
LAUNCHED_BACKENDS = {"staged": so.StagedCommunicationBackend, "nccl": so.NCCLCommunicationBackend,
                     "ucx": so.UcxCommunicationBackend}


def schedule(k):
    """The run's learning-rate schedule, its parameters as given (None: the library's default)."""
    num = lambda key, conv: conv(k[key]) if key in k else None  # noqa: E731
    per_step = k.get("per_step") == "1"
    cosine = lambda: so.CosineAnnealingSchedule(num("decay_period", int), num("min_lr", float), per_step)  # noqa: E731
    step_decay = lambda: so.StepDecaySchedule(num("decay_period", int), num("gamma", float), per_step)  # noqa: E731
    return {"constant": lambda: so.ConstantSchedule(per_step),
            "warmup": lambda: so.WarmupSchedule(num("warmup", int), per_step=per_step),
            "cosine": cosine, "step_decay": step_decay,
            "warmup_cosine": lambda: so.WarmupSchedule(num("warmup", int), cosine(), per_step),
            "warmup_step_decay": lambda: so.WarmupSchedule(num("warmup", int), step_decay(), per_step),
            "custom": lambda: so.LambdaSchedule(lambda t, base: base / (1 + t / 2), per_step)}[k["schedule"]]()


def train(k, backend):
    """One rank of the run `k`: (its output lines, its result)."""
    weight_shape = tuple(int(n) for n in k["matrix"].split("x")) if "matrix" in k else FEATURES
    model = ConformanceModel(np.float32 if k["dtype"] == "f32" else np.float64, weight_shape)
    optimizer_class = OPTIMIZERS[k["optimizer"]]
    options = optimizer_class.options_type()
    for key, (setting, conv) in OPTIONS.items():
        if key in k:
            setattr(options, setting, conv(k[key]))
    if "schedule" in k:
        options.learning_rate_schedule = schedule(k)
    config = PRESETS[k["preset"]](backend) if "preset" in k else so.ShardingConfiguration(backend)
    for key, (setting, conv) in CONFIG.items():
        if key in k:
            setattr(config, setting, conv(k[key]))
    extra = {}
    if "data_strategy" in k:
        extra["data_strategy"] = STRATEGIES[k["data_strategy"]]
    if "staleness" in k:
        extra["allow_staleness"] = int(k["staleness"])
    sets = {"x_train": dataset(0, TRAIN)[0], "y_train": dataset(0, TRAIN)[1]}
    if "validation" in k:
        sets["x_validation"], sets["y_validation"] = dataset(TRAIN, VALIDATION)
    if "test" in k:
        sets["x_test"], sets["y_test"] = dataset(TRAIN + VALIDATION, TEST)
    input_data = so.OptimizationInputData(**sets)

    def make():
        return STRATEGIES[k["strategy"]](optimizer_class(model, options), config, **extra)
    sharded = make()
    if "resume_after" in k:  # train, Serialize() on every rank, a new optimizer Deserialize()s, train again
        epochs = options.max_iterations
        options.max_iterations = int(k["resume_after"])
        sharded.optimize(input_data)
        data = sharded.serialize()
        sharded.close()
        options.max_iterations = epochs
        sharded = make()
        sharded.deserialize(data)
    with sharded:
        result = sharded.optimize(input_data)
        on_device = sharded.memory == so.MemorySpace.CUDA
        return run_output(k["name"], result, sharded.get_parameters()) + ("memory cuda\n" if on_device else "")


def run_launched(k):
    """A launched run: this process is one rank of a job under shardopt-run, on the run's backend from the launcher's
    environment. Rank 0's output ("" on the others), or None when it failed."""
    try:
        with LAUNCHED_BACKENDS[k["backend"]]() as backend:
            if backend.world_size != int(k["ranks"]):
                raise RuntimeError(f"launched with {backend.world_size} ranks, the run has {k['ranks']}")
            text = train(k, backend)
            return text if backend.rank == 0 else ""
    except BaseException as e:  # noqa: BLE001 - reported here
        sys.stderr.write(f"run {k['name']}: {type(e).__name__}: {e}\n")
        return None


def run(k):
    """Every rank of run `k` on its thread; rank 0's output, or None when a rank failed or ranks disagree."""
    if "backend" in k:
        return run_launched(k)
    ranks = int(k["ranks"])
    out, errors = [None] * ranks, [None] * ranks

    def rank(r):
        try:
            with so.InMemoryCommunicationBackend(r, ranks, f"conformance-{k['name']}") as backend:
                out[r] = train(k, backend)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, e in enumerate(errors):
        if e is not None:
            sys.stderr.write(f"run {k['name']}: rank {r} failed: {type(e).__name__}: {e}\n")
            return None
    for r in range(1, ranks):
        if out[r] != out[0]:
            sys.stderr.write(f"run {k['name']}: rank {r}'s results differ from rank 0's\n")
            return None
    return out[0]


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(f"usage: {argv[0]} RUNS_FILE [RUN_NAME...]\n")
        return 2
    failed = 0
    with open(argv[1]) as f:
        for line in f:
            tokens = line.split()
            if not tokens or tokens[0].startswith("#") or (len(argv) > 2 and tokens[0] not in argv[2:]):
                continue
            k = dict(t.split("=", 1) for t in tokens[1:])
            k["name"] = tokens[0]
            text = run(k)
            if text is None:
                failed = 1
            else:
                sys.stdout.write(text)
                sys.stdout.flush()
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
