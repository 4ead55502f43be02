"""The demo MLP on 4 in-process ranks matches a 1-rank run (DDP, ZeRO-2, FSDP); real UCX processes."""
import os
import subprocess
import sys

import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory
from mlp_demo import MlpDemo

MODEL = MlpDemo()
DATA = so.OptimizationInputData(num_samples=MODEL.samples)
TRAINING = dict(batch_size=128, max_iterations=4, shuffle_data=False)  # the options' training settings


def train(cls, world_size):
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        with cls(so.AdamOptimizer(learning_rate=3e-3, **TRAINING), cfg, layout=MODEL.layout(),
                 initial=MODEL.initial_parameters()) as opt:
            assert (opt.rank, opt.world_size) == (backend.rank, world_size)
            result = opt.optimize(MODEL, DATA)
            return result, opt.get_parameters()
    return launch_in_memory(world_size, rank)


@pytest.fixture(scope="module")
def single():
    return train(so.DDPOptimizer, 1)[0]


@pytest.mark.parametrize("cls", [so.DDPOptimizer, so.ZeRO2Optimizer, so.FSDPOptimizer])
def test_four_ranks_match_single_process(cls, single):
    ref_result, ref_params = single
    results = train(cls, 4)
    for result, params in results:
        np.testing.assert_allclose(result.fitness_history, ref_result.fitness_history, rtol=1e-5)
        np.testing.assert_allclose(params, ref_params, atol=1e-5)
        assert result.steps == ref_result.steps == 16 and result.iterations == 4
    assert ref_result.fitness_history[-1] < 0.7 * ref_result.fitness_history[0]


def test_step_api_matches_optimize_for_zero2():
    """Manual step protocol with zero-copy gradient views, 4 ranks, against one rank."""
    def run(world_size):
        def rank(backend):
            cfg = so.ShardingConfiguration(backend)
            opt = so.ZeRO2Optimizer(so.AdamOptimizer(learning_rate=3e-3), cfg, layout=MODEL.layout(),
                                    initial=MODEL.initial_parameters())
            per = 128 // world_size
            grad = np.zeros(MODEL.layout().element_count, np.float32)
            for b0 in range(0, 256, 128):
                samples = np.arange(b0 + backend.rank * per, b0 + (backend.rank + 1) * per)
                params = opt.get_parameters()
                grad[:] = 0
                MODEL(params, grad, samples)
                opt.zero_grad()
                off = 0
                for t in range(opt.tensor_count):
                    g = opt.tensor_grad(t)  # a view of the library's bucket
                    g[:] = grad[off:off + g.size]
                    off += g.size
                    if t in (1, 3):
                        opt.grad_ready(opt.tensor_bucket(t))
                r = opt.step()
                assert r.applied and not r.skipped_nonfinite and r.grad_norm > 0
                assert min(r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds) >= 0
            assert opt.step_count == 2
            p = opt.get_parameters()
            opt.close()
            return p
        return launch_in_memory(world_size, rank)
    one = run(1)[0]
    for p in run(4):
        np.testing.assert_allclose(p, one, atol=1e-6)


def test_external_parameters_are_zero_copy():
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        opt = so.DDPOptimizer(so.StochasticGradientDescentOptimizer(learning_rate=0.5), cfg)
        lay = so.ParameterLayout().add("w", 10)
        mine = np.zeros(opt.padded_count_for(lay), np.float32)
        opt.initialize(lay, initial=np.ones(10, np.float32), parameters=mine)
        assert np.all(mine[:10] == 1)
        opt.zero_grad()
        opt.bucket_grad(0)[:] = backend.rank + 1.0
        opt.step()
        np.testing.assert_allclose(mine[:10], 1 - 0.5 * 2.5)  # mean gradient over 4 ranks is 2.5
        assert np.shares_memory(opt.parameters, mine) or opt.parameters.ctypes.data == mine.ctypes.data
        opt.close()
    launch_in_memory(4, rank)


def test_configuration_changes_behaviour():
    def rank(backend):
        out = {}
        for name, cfg in (("default", so.ShardingConfiguration.create_default(backend)),
                          ("high", so.ShardingConfiguration.create_for_high_bandwidth(backend)),
                          ("low", so.ShardingConfiguration.create_for_low_bandwidth(backend))):
            lay = so.ParameterLayout()
            for i in range(8):
                lay.add(f"t{i}", 300)
            with so.DDPOptimizer(so.AdamOptimizer(), cfg, layout=lay) as opt:
                out[name] = opt.bucket_count
        # Local SGD: no gradient sync per step, so ranks drift apart until the period
        cfg = so.ShardingConfiguration(backend, learning_rate=0.1)
        cfg.auto_sync_gradients = False
        cfg.local_steps = 2
        with so.DDPOptimizer(so.StochasticGradientDescentOptimizer(), cfg, layout=so.ParameterLayout().add("w", 4)) as opt:
            seen = []
            for _ in range(2):
                opt.zero_grad()
                opt.bucket_grad(0)[:] = backend.rank
                opt.step()
                seen.append(opt.get_parameters().copy())
            out["local"] = seen
        return out
    res = launch_in_memory(2, rank)
    assert res[0]["high"] > res[0]["default"] > res[0]["low"]
    (r0, r1) = (res[0]["local"], res[1]["local"])
    assert not np.allclose(r0[0], r1[0])            # after step 1: not averaged yet
    np.testing.assert_allclose(r0[1], r1[1])        # after step 2: averaged
    with so.InMemoryCommunicationBackend(0, 1, "cfg-errors") as b:
        cfg = so.ShardingConfiguration(b)
        assert cfg.enable_gradient_compression is False       # AiDotNet's default
        cfg.enable_gradient_compression = True                # compression is real now: no refusal
        assert cfg.gradient_compression is so.GradientCompression.INT8
        cfg.enable_gradient_compression = False
        cfg.auto_sync_gradients = False
        with pytest.raises(ValueError, match="Local SGD"):
            so.FSDPOptimizer(so.AdamOptimizer(), cfg)
        with pytest.raises(ValueError):
            so.ShardingConfiguration(b, learning_rate=-1)


def test_options_defaults_match_library():
    assert so.AdamOptimizerOptions().learning_rate == pytest.approx(1e-3)
    assert so.AdamOptimizerOptions().beta2 == pytest.approx(0.999)
    assert so.AdamWOptimizerOptions().weight_decay == pytest.approx(0.01)
    assert so.MomentumOptimizerOptions().momentum == pytest.approx(0.9)
    assert so.RootMeanSquarePropagationOptimizerOptions().decay == pytest.approx(0.9)  # AiDotNet's, from the preset
    assert so.StochasticGradientDescentOptimizerOptions().initial_learning_rate == pytest.approx(0.01)
    o = so.AdamOptimizerOptions()  # the training settings: AiDotNet's defaults, from shardopt_training_options_init
    assert (o.max_iterations, o.batch_size, o.shuffle_data, o.use_early_stopping, o.early_stopping_patience,
            o.tolerance, o.max_steps) == (100, 32, True, True, 10, 1e-6, 0)
    with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT: max_iterations = 0: .*max_epochs"):
        so.AdamOptimizerOptions(max_iterations=0)  # the library's check, at once
    with pytest.raises(ValueError, match="learning_rate = -1.0"):
        so.AdamOptimizerOptions(learning_rate=-1)
    assert so.AdamOptimizerOptions(max_iterations=7).max_iterations == 7
    assert so.LambOptimizerOptions().epsilon == pytest.approx(1e-6)
    assert so.AdamOptimizer(amsgrad=True).get_options().amsgrad is True
    with pytest.raises(TypeError):
        so.AdamOptimizerOptions(no_such_option=1)


def test_hybrid_and_local_sgd_and_zero1_and_zero3_train():
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        losses = []
        t = dict(batch_size=128, max_iterations=3, shuffle_data=False)
        for opt in (so.HybridShardedOptimizer(so.AdamWOptimizer(learning_rate=3e-3, **t), cfg, 1, 2, -1),
                    so.LocalSGDOptimizer(so.MomentumOptimizer(learning_rate=0.05, **t), cfg),
                    so.ZeRO1Optimizer(so.RootMeanSquarePropagationOptimizer(learning_rate=1e-3, **t), cfg),
                    so.ZeRO3Optimizer(so.LambOptimizer(learning_rate=1e-2, **t), cfg)):
            with opt:
                opt.initialize(MODEL.layout(), MODEL.initial_parameters())
                r = opt.optimize(MODEL, so.OptimizationInputData(num_samples=MODEL.samples))
                losses.append(r.fitness_history)
                opt.synchronize_optimizer_state()
                assert opt.should_early_stop(vote=backend.rank == 1)
                assert not opt.should_early_stop()
        return losses
    for hist in launch_in_memory(4, rank)[0]:
        assert hist[-1] < hist[0]


def test_two_ucx_processes():
    run = os.environ.get("SHARDOPT_RUN")
    if not run:
        pytest.skip("SHARDOPT_RUN not set")
    worker = os.path.join(os.path.dirname(__file__), "ucx_worker.py")
    p = subprocess.run([sys.executable, run, "-n", "2", "--timeout", "120", "--", sys.executable, worker],
                       capture_output=True, text=True, timeout=150)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("ucx ok") == 2, p.stdout


# ---- gradient compression ----
SGD_DATA = so.OptimizationInputData(num_samples=MODEL.samples)  # 80 steps: batch 64, 10 epochs


def train_compressed(make, world_size=4):
    """The demo MLP with SGD momentum 0.9, lr 0.05 (as the C++ accuracy test) on 4 in-memory ranks:
    (full-data loss at the end, rank 0's bytes moved by optimize, rank 0's compression bytes)."""
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        with make(so.MomentumOptimizer(learning_rate=0.05, momentum=0.9, batch_size=64, max_iterations=10,
                                       shuffle_data=False), cfg) as opt:
            opt.initialize(MODEL.layout(), MODEL.initial_parameters())
            before = opt.bytes_sent
            opt.optimize(MODEL, SGD_DATA)
            return MODEL.loss(opt.get_parameters()), opt.bytes_sent - before, opt.memory_stats().compression_bytes
    results = launch_in_memory(world_size, rank)
    for loss, _, _ in results[1:]:
        assert loss == pytest.approx(results[0][0], rel=1e-6)  # replicas agree
    return results[0]


def test_enable_gradient_compression_and_low_bandwidth():
    with so.InMemoryCommunicationBackend(0, 1, "cfg-compression") as b:
        cfg = so.ShardingConfiguration(b)
        assert (cfg.enable_gradient_compression, cfg.gradient_compression, cfg.compression_ratio,
                cfg.error_feedback, cfg.power_sgd_rank) == (False, so.GradientCompression.INT8, 0.1, True, 4)
        cfg.enable_gradient_compression = True
        for name, method in (("top_k", so.GradientCompression.TOP_K), ("TopK", so.GradientCompression.TOP_K),
                             ("PowerSGD", so.GradientCompression.POWER_SGD), ("bf16", so.GradientCompression.BF16),
                             (so.GradientCompression.INT4, so.GradientCompression.INT4)):
            cfg.gradient_compression = name
            assert cfg.gradient_compression is method
        low = so.ShardingConfiguration.create_for_low_bandwidth(b)
        assert low.enable_gradient_compression and low.gradient_compression is so.GradientCompression.INT8
        assert low.minimum_parameter_group_size == 4096
        high = so.ShardingConfiguration.create_for_high_bandwidth(b)
        assert not high.enable_gradient_compression


def test_compressed_training_reaches_uncompressed_loss_with_fewer_bytes():
    base_loss, base_bytes, base_cb = train_compressed(so.DDPOptimizer)
    q_loss, q_bytes, q_cb = train_compressed(lambda w, c: so.GradientCompressionOptimizer(w, c))
    s_loss, s_bytes, _ = train_compressed(
        lambda w, c: so.GradientCompressionOptimizer(w, c, compression_ratio=0.1, use_sparsification=True))

    def low_bandwidth(w, c):  # the configuration's switch, through plain DDP
        c.enable_gradient_compression = True
        return so.DDPOptimizer(w, c)
    c_loss, c_bytes, _ = train_compressed(low_bandwidth)
    # 80 steps take the demo close to zero loss; compressed training must get there too
    assert max(base_loss, q_loss, s_loss) < 0.01 * MODEL.loss(MODEL.initial_parameters())
    assert q_loss <= base_loss * 1.02, (q_loss, base_loss)
    assert s_loss <= base_loss * 1.05, (s_loss, base_loss)
    assert q_bytes * 3 <= base_bytes, (q_bytes, base_bytes)
    assert s_bytes < base_bytes, (s_bytes, base_bytes)
    assert c_bytes == q_bytes and c_loss == pytest.approx(q_loss)  # int8 either way
    assert base_cb == 0 < q_cb  # residuals and payload buffers show in memory_stats


def test_gradient_compression_optimizer_methods_and_step_bytes():
    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        sgd = so.StochasticGradientDescentOptimizer(learning_rate=0.1)
        out = {}
        for name, args in (("both", dict(use_sparsification=True)), ("none", dict(use_quantization=False)),
                           ("int8", {})):
            opt = so.GradientCompressionOptimizer(sgd, cfg, **args)
            out[name] = opt.compression
            assert isinstance(opt, so.IShardedOptimizer) and opt.wrapped_optimizer is sgd
            opt.initialize(so.ParameterLayout().add("w", 1000))
            for _ in range(2):  # the second step's bytes: the first's may include creation's broadcast
                opt.zero_grad()
                opt.bucket_grad(0)[:] = backend.rank + 1.0
                out[name + "_step"] = opt.step().bytes_sent
            opt.close()
        return out
    out = launch_in_memory(2, rank)[0]
    assert (out["both"], out["none"], out["int8"]) == (so.GradientCompression.TOP_K, so.GradientCompression.NONE,
                                                       so.GradientCompression.INT8)
    assert 0 < out["int8_step"] * 3 <= out["none_step"]
    assert 0 < out["both_step"] < out["none_step"]


def test_power_sgd_compresses_declared_matrices():
    """PowerSGD approximates tensors declared with add_matrix; a flat tensor of the same size goes
    uncompressed."""
    def rank(backend):
        cfg = so.ShardingConfiguration(backend, learning_rate=0.1)
        cfg.enable_gradient_compression = True
        cfg.gradient_compression = "power_sgd"
        cfg.power_sgd_rank = 2
        out = []
        for lay in (so.ParameterLayout().add_matrix("w", 64, 64), so.ParameterLayout().add("w", 64 * 64),
                    so.ParameterLayout().add("w", (64, 64))):
            with so.DDPOptimizer(so.StochasticGradientDescentOptimizer(), cfg, layout=lay) as opt:
                rng = np.random.RandomState(backend.rank)
                sent = 0
                for i in range(4):
                    opt.zero_grad()
                    opt.bucket_grad(0)[:] = rng.normal(size=64 * 64)
                    sent += opt.step().bytes_sent if i else 0  # not the first (creation's broadcast)
                out.append(sent)
        return out
    matrix, flat, shaped = launch_in_memory(2, rank)[0]
    assert matrix * 4 < flat and shaped == matrix


def test_invalid_compression_settings_raise():
    with so.InMemoryCommunicationBackend(0, 1, "cfg-compression-errors") as b:
        cfg = so.ShardingConfiguration(b)
        for bad in (0, -0.1, 1.5, float("nan")):
            with pytest.raises(ValueError, match="compression_ratio"):
                cfg.compression_ratio = bad
            with pytest.raises(ValueError, match="compression_ratio"):
                so.GradientCompressionOptimizer(so.AdamOptimizer(), cfg, compression_ratio=bad)
        with pytest.raises(ValueError, match="gradient compression"):
            cfg.gradient_compression = "zip"
        with pytest.raises(ValueError, match="gradient compression"):
            cfg.gradient_compression = 42
        with pytest.raises(ValueError, match="power_sgd_rank"):
            cfg.power_sgd_rank = 0
        with pytest.raises(ValueError):
            so.ParameterLayout().add_matrix("w", 0, 4)
        assert cfg.compression_ratio == 0.1  # unchanged by the failed sets
