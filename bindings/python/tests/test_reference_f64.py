"""The f64 path is bit for bit the C++ core's: the reference linear model trained through
optimize() on 4 in-memory ranks equals tests/bindings/reference_f64.cpp's parameters exactly."""
import os
import subprocess
import sys

import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples", "python"))
from linear_model import LinearModel, dataset  # noqa: E402

REFERENCE = os.environ.get("SHARDOPT_REFERENCE_F64")


def reference_bits(*args):
    if not REFERENCE:
        pytest.skip("SHARDOPT_REFERENCE_F64 not set")
    p = subprocess.run([REFERENCE, *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [int(line) for line in p.stdout.split()]


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def train(cls, ranks=4, shuffle_seed=None, callback=False):
    x, y = dataset()

    def rank(backend):
        model = LinearModel()
        opts = so.AdamOptimizerOptions(learning_rate=0.05, batch_size=16, max_iterations=5,
                                       shuffle_data=shuffle_seed is not None, random_seed=shuffle_seed or 0)
        with cls(so.AdamOptimizer(model, opts), so.ShardingConfiguration(backend)) as opt:
            if callback:  # the lower-level form: model(params, grad, samples) -> loss
                r = opt.optimize(lambda p, g, s: model.loss_and_gradient(p, g, x[s], y[s]),
                                 so.OptimizationInputData(num_samples=64))
            else:
                r = opt.optimize(so.OptimizationInputData(x_train=x, y_train=y))
            assert r.steps == 20 and r.iterations == 5
            return opt.get_parameters()
    return launch_in_memory(ranks, rank)


@pytest.mark.parametrize("callback", [False, True])
def test_fsdp_f64_is_bit_for_bit_the_core(callback):
    ref = reference_bits()
    assert len(ref) == 9
    for params in train(so.FSDPOptimizer, callback=callback):
        assert bits(params) == ref


@pytest.mark.parametrize("cls,name", [(so.DDPOptimizer, "ddp"), (so.ZeRO2Optimizer, "zero2")])
def test_other_strategies_and_shuffle_are_bit_for_bit(cls, name):
    ref = reference_bits("--strategy", name, "--shuffle-seed", "12345")
    assert ref != reference_bits("--strategy", name)  # the shuffle changes the result
    for params in train(cls, shuffle_seed=12345):
        assert bits(params) == ref
