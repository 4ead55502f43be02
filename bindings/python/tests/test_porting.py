"""AiDotNet's surface for real: both element types in collectives and checkpoints, the model
abstraction with optimize(input_data) (validation picks the best solution), shuffling with a seed,
ShouldEarlyStop, a live learning rate with schedules, Reset."""
import os
import sys
import threading
import uuid

import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples", "python"))
from linear_model import LinearModel, dataset  # noqa: E402


def ranks(world_size, fn):
    return launch_in_memory(world_size, fn, f"porting-{uuid.uuid4()}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_collective_in_both_element_types(dtype):
    def rank(b):
        r, ws = b.rank, b.world_size
        b.initialize()
        x = np.full(4, r + 1, dtype)
        assert np.all(b.all_reduce(x, so.ReductionOperation.SUM) == 10) and x.dtype == dtype
        y = np.full(2, r, dtype)
        b.broadcast(y, root=3)
        assert np.all(y == 3)
        g = b.all_gather(np.array([r, r], dtype))
        assert g.dtype == dtype and g.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
        rs = b.reduce_scatter(np.arange(8, dtype=dtype))
        assert rs.dtype == dtype and rs.tolist() == [4 * (2 * r), 4 * (2 * r + 1)]
        sc = b.scatter(np.arange(8, dtype=dtype) * 10 if r == 1 else None, root=1, dtype=dtype)
        assert sc.dtype == dtype and sc.tolist() == [20 * r, 20 * r + 10]
        if r % 2 == 0:
            b.send(np.array([r, r + 0.5], dtype), r + 1, tag=7)
        else:
            got = b.receive(r - 1, 2, tag=7, dtype=dtype)
            assert got.dtype == dtype and got.tolist() == [r - 1, r - 0.5]
        b.barrier()
        b.reset()
        return True
    assert ranks(4, rank) == [True] * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_checkpoints_in_both_element_types(tmp_path, dtype):
    def rank(b):
        model = LinearModel(dtype)
        x, y = dataset()
        with so.ZeRO2Optimizer(so.AdamOptimizer(model, learning_rate=0.05, batch_size=16), so.ShardingConfiguration(b)) as o:
            o.optimize(so.OptimizationInputData(x_train=x, y_train=y))
            data = o.serialize()
            o.save_model(tmp_path / str(np.dtype(dtype)))
            p = o.get_parameters()
        with so.FSDPOptimizer(so.AdamOptimizer(LinearModel(dtype)), so.ShardingConfiguration(b)) as o:
            o.deserialize(data)
            assert np.array_equal(o.get_parameters(), p) and o.get_parameters().dtype == dtype
            o.set_parameters(np.zeros(9, dtype))
            o.load_model(tmp_path / str(np.dtype(dtype)))
            assert np.array_equal(o.get_parameters(), p)
        return True
    assert ranks(2, rank) == [True, True]


def test_optimize_input_data_chooses_best_on_validation_and_reports_every_set():
    x, y = dataset(0, 64)
    xv, yv = dataset(64, 16)
    xt, yt = dataset(80, 16)

    def rank(b):
        model = LinearModel()
        opts = so.AdamOptimizerOptions(initial_learning_rate=0.3, batch_size=8, max_iterations=12, use_early_stopping=False)
        with so.DDPOptimizer(so.AdamOptimizer(model, opts), so.ShardingConfiguration(b)) as o:
            r = o.optimize(so.OptimizationInputData(x_train=x, y_train=y, x_validation=xv, y_validation=yv,
                                                    x_test=xt, y_test=yt))
        return r, model.get_parameters()
    for r, model_params in ranks(2, rank):
        assert len(r.fitness_history) == len(r.validation_loss_history) == len(r.training_loss_history) == 12
        assert r.fitness_history == r.validation_loss_history  # the score: validation loss when given
        best = int(np.argmin(r.validation_loss_history))
        assert r.best_fitness_score == r.validation_loss_history[best] and r.best_epoch == best
        assert r.validation_result.loss == pytest.approx(r.best_fitness_score, rel=1e-12)
        assert r.training_result.loss > 0 and r.test_result.loss > 0 and r.test_result.predictions.shape == (16,)
        assert np.array_equal(model_params, r.best_solution)  # the model holds the best solution after
        assert r.iterations == 12 and r.steps == 12 * 8  # iterations: AiDotNet's, epochs


def test_optimize_input_data_needs_a_model_and_consistent_data():
    with so.InMemoryCommunicationBackend(0, 1, f"need-{uuid.uuid4()}") as b:
        with so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b), layout=so.ParameterLayout().add("w", 2)) as o:
            with pytest.raises(TypeError, match="needs the wrapped optimizer's model"):
                o.optimize(so.OptimizationInputData(x_train=np.zeros((4, 8)), y_train=np.zeros(4)))
        with so.DDPOptimizer(so.AdamOptimizer(LinearModel()), so.ShardingConfiguration(b)) as o:
            with pytest.raises(ValueError, match="x_train has 4 samples, y_train 3"):
                o.optimize(so.OptimizationInputData(x_train=np.zeros((4, 8)), y_train=np.zeros(3)))
            with pytest.raises(ValueError, match="x_validation and y_validation"):
                o.optimize(so.OptimizationInputData(x_train=np.zeros((4, 8)), y_train=np.zeros(4),
                                                    x_validation=np.zeros((2, 8))))
    with pytest.raises(TypeError, match="must be a shardopt.Model"):
        so.AdamOptimizer(object())


def test_shuffle_is_seeded_and_the_same_on_every_rank():
    def rank(b, seed):
        seen = []
        sgd = so.StochasticGradientDescentOptimizer(batch_size=16, max_iterations=2, shuffle_data=True, random_seed=seed,
                                                    evaluate_best_solution=False)
        with so.DDPOptimizer(sgd, so.ShardingConfiguration(b), layout=so.ParameterLayout().add("w", 1)) as o:
            def model(p, g, s):
                seen.append(s.tolist())
                return 0.0
            o.optimize(model, so.OptimizationInputData(num_samples=16))
        return seen
    a = ranks(2, lambda b: rank(b, 5))
    again = ranks(2, lambda b: rank(b, 5))
    other = ranks(2, lambda b: rank(b, 6))
    assert a == again and a != other
    order0 = a[0][0] + a[1][0]        # rank 0's slice then rank 1's: one permutation
    assert sorted(order0) == list(range(16)) and order0 != list(range(16))
    assert a[0][0] != a[0][1]         # a fresh order every epoch


def test_should_early_stop_follows_the_options():
    def rank(b):
        opts = so.AdamOptimizerOptions(learning_rate=1e-3, batch_size=0, max_iterations=50, use_early_stopping=True,
                                       early_stopping_patience=2)
        with so.DDPOptimizer(so.AdamOptimizer(opts), so.ShardingConfiguration(b),
                             layout=so.ParameterLayout().add("w", 1)) as o:
            r = o.optimize(lambda p, g, s: 1.0, so.OptimizationInputData(num_samples=4))  # never improves
            assert r.stopped_early and len(r.fitness_history) == 3
            assert o.should_early_stop()          # its own criterion: patience exhausted
            assert o.should_early_stop(vote=b.rank == 0)
        return True
    assert ranks(2, rank) == [True, True]


def test_learning_rate_is_live_both_ways(tmp_path):
    def rank(b):
        opts = so.AdamOptimizerOptions(learning_rate=0.01, max_iterations=5, evaluate_best_solution=False)
        with so.DDPOptimizer(so.AdamOptimizer(opts), so.ShardingConfiguration(b),
                             layout=so.ParameterLayout().add("w", 2)) as o:
            assert o.learning_rate == pytest.approx(0.01)
            o.learning_rate = 0.02
            assert o.learning_rate == pytest.approx(0.02)
            o.save_model(tmp_path / "lr")
            o.get_options().learning_rate = 0.5           # through GetOptions()
            assert o.learning_rate == pytest.approx(0.5)
            o.load_model(tmp_path / "lr")                  # the checkpoint's rate, right after the load
            assert o.learning_rate == pytest.approx(0.02)
            assert o.get_options().learning_rate == pytest.approx(0.02)
            o.get_options().learning_rate_schedule = so.StepDecaySchedule(step_size=2, gamma=0.5)
            rates = []

            def model(p, g, s):
                rates.append(o.learning_rate)
                return 1.0
            r = o.optimize(model, so.OptimizationInputData(num_samples=2))  # from the rate in force: 0.02
            assert rates == r.learning_rate_history == pytest.approx([0.02, 0.02, 0.01, 0.01, 0.005])
        return True
    assert ranks(2, rank) == [True, True]


def test_schedules():
    """The library's schedules, shown without training: schedule(t, base)."""
    w = so.WarmupSchedule(3, after=so.CosineAnnealingSchedule(10))
    assert [w(t, 0.1) for t in range(4)] == pytest.approx([0.1 / 3, 0.2 / 3, 0.1, 0.1])  # base * (t + 1) / warmup
    assert w(13, 0.1) == pytest.approx(0.0, abs=1e-12)
    assert so.LambdaSchedule(lambda t, base: base / (t + 1))(3, 1.0) == 0.25
    assert so.StepDecaySchedule(2, gamma=0.5)(5, 1.0) == 0.25
    # 0 is the training options' value "a period of 1" (decay_period; the C ABI, C# and Java read it so too)
    assert so.StepDecaySchedule(0, gamma=0.5)(5, 1.0) == so.StepDecaySchedule(1, gamma=0.5)(5, 1.0) == 0.5 ** 5
    with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT: step_size = -1: .*decay_period"):
        so.StepDecaySchedule(-1)
    with pytest.raises(TypeError):
        so.StepDecaySchedule(0.5)
    with pytest.raises(TypeError, match="after must be"):
        so.WarmupSchedule(2, after=so.LambdaSchedule(lambda t, base: base))


def test_reset_goes_back_to_the_start():
    def rank(b):
        with so.FSDPOptimizer(so.AdamOptimizer(learning_rate=0.1, max_iterations=1), so.ShardingConfiguration(b),
                              layout=so.ParameterLayout(np.float64).add("w", 3), initial=[1.0, 2.0, 3.0]) as o:
            o.optimize(lambda p, g, s: (g.__setitem__(slice(None), 1.0), 1.0)[1], so.OptimizationInputData(num_samples=4))
            assert o.step_count == 1 and not np.allclose(o.get_parameters(), [1, 2, 3])
            o.reset()
            assert o.step_count == 0 and o.get_parameters().tolist() == [1.0, 2.0, 3.0]
        return True
    assert ranks(2, rank) == [True, True]
