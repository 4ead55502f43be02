"""ElasticOptimizer on in-process ranks: a 4-rank job checkpointing every 2 steps is resumed by 3
ranks and ends equal, bit for bit, to a DDP optimizer saved at the same step and loaded by 3 ranks;
optimize() after a resume skips what the checkpoint covers and ends equal to an uninterrupted run;
argument and world-size errors."""
import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory
from mlp_demo import MlpDemo

MODEL = MlpDemo()
BATCH = 96


def train(opt, rank, first, last):
    """Steps [first, last) with the step protocol: each rank's slice of a fixed batch."""
    per = BATCH // opt.world_size
    grad = np.zeros(MODEL.layout().element_count, np.float32)
    for step in range(first, last):
        b0 = step * BATCH % MODEL.samples
        samples = np.arange(b0 + rank * per, b0 + (rank + 1) * per) % MODEL.samples
        params = opt.get_parameters()
        grad[:] = 0
        MODEL(params, grad, samples)
        opt.zero_grad()
        for b in range(opt.bucket_count):
            g = opt.bucket_grad(b)
            off = sum(opt.bucket_size(i) for i in range(b))
            g[:] = grad[off:off + g.size]
            opt.grad_ready(b)
        assert opt.step().applied


def adam():
    return so.AdamOptimizer(learning_rate=3e-3)


def elastic(backend, directory, **kwargs):
    return so.ElasticOptimizer(adam(), so.ShardingConfiguration(backend), min_workers=2, max_workers=4,
                               checkpoint_dir=directory, checkpoint_every=2, layout=MODEL.layout(),
                               initial=MODEL.initial_parameters(), **kwargs)


def test_resume_at_another_world_size(tmp_path):
    directory, reference = tmp_path / "elastic", str(tmp_path / "reference")

    def first(backend):
        with elastic(backend, directory) as e, \
                so.DDPOptimizer(adam(), so.ShardingConfiguration(backend), layout=MODEL.layout(),
                                initial=MODEL.initial_parameters()) as twin:
            assert e.resumed_step == -1 and e.last_checkpoint_step == -1 and e.generation == 0
            assert e.checkpoint_dir == str(directory) and e.checkpoint_every == 2
            train(e, backend.rank, 0, 6)
            train(twin, backend.rank, 0, 6)
            twin.save_model(reference)
            e.finish_checkpoint()
            assert e.last_checkpoint_step == 6 and e.checkpoints_published == 3 and not e.checkpoint_pending
    launch_in_memory(4, first)

    def second(backend):
        with elastic(backend, directory) as e, \
                so.DDPOptimizer(adam(), so.ShardingConfiguration(backend), layout=MODEL.layout()) as ref:
            assert e.resumed_step == 6 and e.step_count == 6 and e.last_checkpoint_step == 6
            ref.load_model(reference)
            train(e, backend.rank, 6, 10)
            train(ref, backend.rank, 6, 10)
            e.finish_checkpoint()
            assert e.last_checkpoint_step == 10
            return e.get_parameters().copy(), ref.get_parameters().copy()
    for got, want in launch_in_memory(3, second):
        assert got.tobytes() == want.tobytes()


def test_optimize_resumes_where_it_stopped(tmp_path):
    data = so.OptimizationInputData(num_samples=64)
    training = dict(batch_size=16, max_iterations=3, shuffle_data=False)  # 4 steps an epoch

    def straight(backend):
        with so.DDPOptimizer(so.AdamOptimizer(learning_rate=3e-3, **training), so.ShardingConfiguration(backend),
                             layout=MODEL.layout(), initial=MODEL.initial_parameters()) as opt:
            r = opt.optimize(MODEL, data)
            assert r.steps == 12 and r.iterations == 3
            return opt.get_parameters().copy()
    want = launch_in_memory(2, straight)

    def stopped(backend):  # 10 steps, a checkpoint every 5
        adam = so.AdamOptimizer(learning_rate=3e-3, max_steps=10, **training)
        with so.ElasticOptimizer(adam, so.ShardingConfiguration(backend), 2, 4, checkpoint_dir=tmp_path,
                                 checkpoint_every=5, layout=MODEL.layout(), initial=MODEL.initial_parameters()) as e:
            assert e.optimize(MODEL, data).steps == 10
            e.finish_checkpoint()
            assert e.last_checkpoint_step == 10
    launch_in_memory(2, stopped)

    def resumed(backend):
        with so.ElasticOptimizer(so.AdamOptimizer(learning_rate=3e-3, **training), so.ShardingConfiguration(backend),
                                 2, 4, checkpoint_dir=tmp_path, checkpoint_every=5, layout=MODEL.layout(),
                                 initial=MODEL.initial_parameters()) as e:
            assert e.resumed_step == 10
            r = e.optimize(MODEL, data)
            assert r.steps == 12 and r.iterations == 1 and len(r.fitness_history) == 1  # 2.5 epochs skipped
            return e.get_parameters().copy()
    for got, expected in zip(launch_in_memory(2, resumed), want):
        assert got.tobytes() == expected.tobytes()


def test_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("SHARDOPT_CHECKPOINT_DIR", raising=False)
    with so.InMemoryCommunicationBackend(0, 1) as backend:
        config = so.ShardingConfiguration(backend)
        # the library's checks (shardopt_elastic_options_validate_strict), naming the Python argument
        with pytest.raises(ValueError, match="max_workers = 2: .*maxWorkers 2 is below minWorkers 3"):
            so.ElasticOptimizer(adam(), config, 3, 2)
        with pytest.raises(ValueError, match="min_workers = 0: .*min_workers is 0"):
            so.ElasticOptimizer(adam(), config, 0)
        with pytest.raises(ValueError, match="min_workers = -1: .*minWorkers is -1; it must be at least 1"):
            so.ElasticOptimizer(adam(), config, -1)
        with pytest.raises(ValueError, match="checkpoint_every = -1: .*checkpoint_every is -1"):
            so.ElasticOptimizer(adam(), config, checkpoint_every=-1)
        with pytest.raises(TypeError):
            so.ElasticOptimizer(adam(), config, "2")
        e = so.ElasticOptimizer(adam(), config)
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT: .*no checkpoint directory"):
            e.initialize(MODEL.layout())
        assert not e.is_initialized
        outside = so.ElasticOptimizer(adam(), config, 2, 4, checkpoint_dir=tmp_path)
        with pytest.raises(RuntimeError, match=r"the world has 1 ranks, outside \[minWorkers 2, maxWorkers 4\]"):
            outside.initialize(MODEL.layout())
        assert not outside.is_initialized
        with pytest.raises(RuntimeError, match="not initialized"):
            outside.resumed_step
        monkeypatch.setenv("SHARDOPT_CHECKPOINT_DIR", str(tmp_path / "from-env"))
        with so.ElasticOptimizer(adam(), config, layout=MODEL.layout()) as from_env:
            assert from_env.checkpoint_dir == str(tmp_path / "from-env") and from_env.checkpoint_every == 100
