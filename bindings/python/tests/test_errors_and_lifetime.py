"""Each error kind maps to its Python exception with the library's message; create/dispose cycles
do not leak."""
import gc
import threading
import time

import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_invalid_argument_is_value_error():
    with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT: .*out of range") as e:
        so.InMemoryCommunicationBackend(5, 4, "bad-rank")
    assert isinstance(e.value, so.InvalidArgumentError) and isinstance(e.value, so.ShardoptError)
    assert (e.value.status, e.value.status_name, e.value.rank) == (1, "SHARDOPT_ERR_INVALID_ARGUMENT", -1)
    with so.InMemoryCommunicationBackend(0, 1, "inv") as b:
        opt = so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b), layout=so.ParameterLayout().add("w", 4))
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
            opt.set_parameters(np.zeros(3, np.float32))  # wrong count: the library says so
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
            opt.learning_rate = -1.0
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
            opt.tensor_size(7)
        opt.close()
    with so.InMemoryCommunicationBackend(0, 1, "dup") as b:
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
            so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                            layout=so.ParameterLayout().add("w", 4).add("w", 4))


def test_invalid_state_is_runtime_error():
    with so.InMemoryCommunicationBackend(0, 1, "state") as b:
        with so.FSDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                              layout=so.ParameterLayout().add("w", 4)) as opt:
            with pytest.raises(RuntimeError, match="SHARDOPT_ERR_INVALID_STATE"):
                opt.parameters  # FSDP parameters are sharded at rest
            with pytest.raises(RuntimeError, match="not initialized|closed"):
                so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b)).step()


def test_timeout_and_abort_are_runtime_errors():
    def rank(backend):
        backend.set_timeout(200)
        if backend.rank == 0:
            backend.barrier()  # rank 1 never arrives
        else:
            time.sleep(1.0)  # ...but stays (a rank that leaves is a lost peer: test_mistakes.py)
    with pytest.raises(RuntimeError, match="SHARDOPT_ERR_TIMEOUT") as e:
        launch_in_memory(2, rank)
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, so.CollectiveTimeoutError)
    assert e.value.status == so.native.SHARDOPT_ERR_TIMEOUT and e.value.rank == 0


def test_unsupported_is_not_implemented_error():
    # NCCLCommunicationBackend constructs, or skips without a GPU: test_gpu.py
    with so.InMemoryCommunicationBackend(0, 1, "unsup") as b:
        opt = so.FSDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b))
        with pytest.raises(NotImplementedError, match="SHARDOPT_ERR_UNSUPPORTED"):
            opt.initialize(so.ParameterLayout().add("w", 4), parameters=np.zeros(4, np.float32))
        opt.initialize(so.ParameterLayout().add("w", 4))
        opt.close()


def test_io_and_corrupt_are_os_errors(tmp_path):
    with so.InMemoryCommunicationBackend(0, 1, "ckpt-errors") as b:
        with so.FSDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                              layout=so.ParameterLayout().add("w", 4)) as opt:
            with pytest.raises(OSError, match="SHARDOPT_ERR_IO"):
                opt.load_model(tmp_path / "missing")
            with pytest.raises(OSError, match="SHARDOPT_ERR_CORRUPT"):
                opt.deserialize(b"not a checkpoint")
            blocker = tmp_path / "file"
            blocker.write_text("x")
            with pytest.raises(OSError, match="SHARDOPT_ERR_IO"):
                opt.save_model(blocker / "sub")  # a file where a directory must go


def test_null_arguments_are_type_errors():
    with so.InMemoryCommunicationBackend(0, 1, "null") as b:
        cfg = so.ShardingConfiguration(b)
        for cls in (so.DDPOptimizer, so.ZeRO1Optimizer, so.ZeRO2Optimizer, so.FSDPOptimizer, so.ZeRO3Optimizer,
                    so.HybridShardedOptimizer, so.LocalSGDOptimizer):
            with pytest.raises(TypeError):
                cls(None, cfg)
            with pytest.raises(TypeError):
                cls(so.AdamOptimizer(), None)
    with pytest.raises(TypeError):
        so.ShardingConfiguration(None)


def test_model_exception_propagates_and_aborts_peers():
    class Boom(Exception):
        pass

    def rank(backend):
        cfg = so.ShardingConfiguration(backend)
        with so.DDPOptimizer(so.AdamOptimizer(), cfg, layout=so.ParameterLayout().add("w", 4)) as opt:
            def model(p, g, s):
                if backend.rank == 1:
                    raise Boom("model failed on rank 1")
                g[:] = 1
                return 1.0
            opt.optimize(model, so.OptimizationInputData(num_samples=8))
    with pytest.raises(Boom, match="rank 1"):
        launch_in_memory(2, rank)


def test_10000_create_dispose_cycles_do_not_grow_memory():
    layout = so.ParameterLayout().add("w", 256).add("b", 16)

    def cycle(i):
        with so.InMemoryCommunicationBackend(0, 1, "cycles") as b:
            with so.ZeRO2Optimizer(so.AdamOptimizer(), so.ShardingConfiguration(b), layout=layout) as opt:
                opt.zero_grad()
                opt.step()
    for i in range(500):
        cycle(i)
    gc.collect()
    before = rss_kib()
    for i in range(10000):
        cycle(i)
    gc.collect()
    grown = rss_kib() - before
    assert grown < 4096, f"RSS grew by {grown} KiB over 10000 cycles"
