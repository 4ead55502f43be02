"""Issue 34: the GPU from Python. NCCLCommunicationBackend(rank, world_size, device_id) and StagedCommunicationBackend
are the C ABI's shardopt_comm_create: they construct where a GPU (for NCCL, libnccl) is usable and skip otherwise on
the library's UnsupportedError; ShardingConfiguration.memory and cuda_stream reach the library for every strategy and
the ZeRO-Offload flags; an optimizer in CUDA memory over a communicator without a device is the library's clear error."""
import numpy as np
import pytest

import shardopt as so


def construct_or_skip(cls, backend, *args):
    try:
        return cls(*args)
    except so.UnsupportedError as e:
        assert str(e).startswith("SHARDOPT_ERR_UNSUPPORTED") and f"'{backend}'" in str(e), str(e)
        pytest.skip(f"no usable GPU for {backend}: {e}")


@pytest.mark.parametrize("cls,backend,args", [
    (so.NCCLCommunicationBackend, "nccl", ()), (so.NCCLCommunicationBackend, "nccl", (0, 1, -1)),
    (so.NcclCommunicationBackend, "nccl", (0, 1)), (so.StagedCommunicationBackend, "staged", (0, 1))])
def test_gpu_backend_constructs_or_skips(cls, backend, args):
    with construct_or_skip(cls, backend, *args) as b:
        assert (b.rank, b.world_size) == (0, 1) and b.device_id >= 0


def test_nccl_alias_is_aidotnets_class():
    assert so.NcclCommunicationBackend is so.NCCLCommunicationBackend


def test_arguments_are_the_librarys_to_check():
    with pytest.raises(so.InvalidArgumentError, match="rank 2 of worldSize 2"):
        so.NCCLCommunicationBackend(2, 2)
    with pytest.raises(so.InvalidArgumentError, match="deviceId -5"):
        so.StagedCommunicationBackend(0, 1, -5)
    with pytest.raises(so.InvalidArgumentError, match="give both"):
        so.NCCLCommunicationBackend(0, -1)
    with so.InMemoryCommunicationBackend(0, 1, "py-gpu-dev") as b:
        assert b.device_id == -1


STRATEGIES = [so.DDPOptimizer, so.ZeRO1Optimizer, so.ZeRO2Optimizer, so.FSDPOptimizer, so.LocalSGDOptimizer,
              so.HybridShardedOptimizer]


def test_memory_and_cuda_stream_reach_the_library():
    with so.InMemoryCommunicationBackend(0, 1, "py-gpu-mem") as b:
        c = so.ShardingConfiguration(b)
        assert c.memory == so.MemorySpace.HOST and c.cuda_stream == 0
        with pytest.raises(so.InvalidArgumentError, match="cuda_stream"):  # the library: no stream with host memory
            c.cuda_stream = 0x1000
        assert c.cuda_stream == 0
        c.memory = "cuda"
        c.cuda_stream = 0x1000
        assert c.memory == so.MemorySpace.CUDA and c._s.memory == so.native.SHARDOPT_MEMORY_CUDA
        assert c.cuda_stream == 0x1000

        class TorchLikeStream:
            cuda_stream = 0x2000
        c.cuda_stream = TorchLikeStream()
        assert c.cuda_stream == 0x2000
        c.cuda_stream = None
        assert c.cuda_stream == 0
        with pytest.raises(TypeError):
            c.cuda_stream = "stream"
        with pytest.raises(ValueError, match="memory space"):
            c.memory = "tpu"
        # every strategy, and the ZeRO-Offload presets, reach the library's creation: the library's errors
        cases = [(cls, so.ShardingConfiguration, "backend 'inprocess' has no device") for cls in STRATEGIES] + [
            (cls, so.ShardingConfiguration.create_for_zero_offload, "backend 'inprocess' has no device")
            for cls in STRATEGIES if cls is not so.LocalSGDOptimizer] + [
            (so.LocalSGDOptimizer, so.ShardingConfiguration.create_for_zero_offload, "local_sgd averages its parameters"),
            (so.FSDPOptimizer, so.ShardingConfiguration.create_for_zero_offload_full, "backend 'inprocess' has no device"),
            (so.DDPOptimizer, so.ShardingConfiguration.create_for_zero_offload_full, "cpu_offload_params needs parameters "
                                                                                     "sharded at rest")]
        for cls, preset, message in cases:
            cfg = preset(b)
            cfg.memory = so.MemorySpace.CUDA
            opt = cls(so.AdamOptimizer(), cfg)
            with pytest.raises(so.InvalidArgumentError, match=message):
                opt.initialize(so.ParameterLayout(np.float32).add("w", 4))
            opt.close()
