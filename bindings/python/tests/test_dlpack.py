"""Issue 34: zero-copy both ways in host memory. The library's parameter and gradient views export DLPack (numpy's
versioned __dlpack__(stream=, max_version=, dl_device=, copy=) and __dlpack_device__, checked against the optimizer's
lifetime): np.from_dlpack(view) is the library's memory, writes go both ways, and a view after close raises. The
caller's own DLPack tensors in host memory are taken without a copy; a tensor in device memory is a clear error."""
import numpy as np
import pytest

import shardopt as so

INITIAL = np.array([0.5, -1.0, 2.0, 0.25], np.float32)


class HostProducer:
    """A DLPack producer that is not a numpy array (as a torch CPU tensor is to this layer)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class CudaProducer(HostProducer):
    """A tensor that says it is in CUDA memory of device 0 (kDLCUDA = 2), and whose capsule is numpy's: host memory."""

    def __dlpack__(self, stream=None, **kwargs):  # numpy takes no stream
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (2, 0)


class CaiProducer:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False), "version": 3}


def make(backend, parameters=None):
    opt = so.DDPOptimizer(so.StochasticGradientDescentOptimizer(so.StochasticGradientDescentOptimizerOptions(
        learning_rate=0.5)), so.ShardingConfiguration(backend))
    return opt.initialize(so.ParameterLayout(np.float32).add("w", 4), INITIAL, parameters)


def test_views_export_dlpack_both_ways():
    with so.InMemoryCommunicationBackend(0, 1, "py-dlpack") as b:
        opt = make(b)
        view = opt.parameters
        assert view.__dlpack_device__() == (1, 0)
        t = np.from_dlpack(view)
        assert t.ctypes.data == view.ctypes.data  # no copy
        t[0] = 42.0  # written through the consumer: the library sees it
        assert opt.get_parameters()[0] == 42.0
        opt.set_parameters(np.arange(4, dtype=np.float32))  # written by the library: the consumer sees it
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        capsule = view.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
        assert "dltensor" in repr(capsule)
        with pytest.raises(BufferError):
            view.__dlpack__(dl_device=(2, 0))  # no silent copy to another device
        opt.zero_grad()
        g = np.from_dlpack(opt.tensor_grad(0))
        g[:] = 1.0  # the gradient written through DLPack
        opt.step()
        assert np.allclose(t, [-0.5, 0.5, 1.5, 2.5])  # sgd lr 0.5 on the library's parameters
        opt.close()
        with pytest.raises(so.ObjectDisposedError):
            view.__dlpack__()
        with pytest.raises(so.ObjectDisposedError):
            np.from_dlpack(view)
        with pytest.raises(so.ObjectDisposedError):
            view.__dlpack_device__()


def test_caller_dlpack_tensor_is_the_parameter_buffer():
    with so.InMemoryCommunicationBackend(0, 1, "py-dlpack-own") as b:
        probe = so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b))
        n = probe.padded_count_for(so.ParameterLayout(np.float32).add("w", 4))
        mine = np.zeros(n, np.float32)
        with make(b, HostProducer(mine)) as opt:
            assert mine[:4].tolist() == INITIAL.tolist()  # the library wrote into the caller's memory
            mine[1] = 7.0
            assert opt.get_parameters()[1] == 7.0
            opt.set_parameters(HostProducer(np.ones(4, np.float32)))  # a DLPack host tensor as values
            assert mine[:4].tolist() == [1.0] * 4


def test_device_tensor_where_host_memory_is_expected_raises():
    with so.InMemoryCommunicationBackend(0, 1, "py-dlpack-dev") as b:
        with pytest.raises(so.InvalidArgumentError, match=r"CUDA memory \(device 0\), where host memory is expected"):
            make(b, CudaProducer(np.zeros(4, np.float32)))
        with pytest.raises(so.InvalidArgumentError, match="__cuda_array_interface__"):
            make(b, CaiProducer())
        with make(b) as opt:
            with pytest.raises(so.InvalidArgumentError, match=r"CUDA memory \(device 0\)"):
                opt.set_parameters(CudaProducer(np.zeros(4, np.float32)))
            with pytest.raises(TypeError, match="float64"):
                opt.set_parameters(HostProducer(np.zeros(4, np.float64)))  # a wrong dtype is never converted


def test_device_views_export_cuda_array_interface_and_never_reach_the_host():
    # an optimizer in CUDA memory hands out DeviceArray views (sharding.py _view); here one over a stand-in address
    from shardopt._core import DeviceArray, Guard
    guard = Guard("the DDPOptimizer was closed (this view of its memory is invalid)")
    backing = np.zeros(4, np.float32)
    view = DeviceArray(backing.ctypes.data, 4, np.float32, 0, None, None, (guard,))
    cai = view.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4,) and cai["typestr"] == "<f4"
    assert cai["data"] == (backing.ctypes.data, False) and cai["stream"] == 1  # the legacy default stream
    assert DeviceArray(1, 1, np.float32, 1, 0x1234, None, ()).__cuda_array_interface__["stream"] == 0x1234
    assert view.__dlpack_device__() == (2, 0) and len(view) == 4 and view.dtype == np.float32
    with pytest.raises(TypeError, match="CUDA device memory"):
        np.asarray(view)  # never read on the host
    with pytest.raises(TypeError, match="CUDA device memory"):
        view[0]
    with pytest.raises(BufferError, match=r"CUDA device 0's memory"):  # a host consumer's request: never a copy
        view.__dlpack__(dl_device=(1, 0))
    guard.invalidate()
    with pytest.raises(so.ObjectDisposedError):
        view.__cuda_array_interface__
    with pytest.raises(so.ObjectDisposedError):
        view.__dlpack_device__()


def test_host_parameters_for_an_optimizer_in_device_memory_raise():
    with so.InMemoryCommunicationBackend(0, 1, "py-dlpack-cuda") as b:
        cfg = so.ShardingConfiguration(b)
        cfg.memory = so.MemorySpace.CUDA
        opt = so.DDPOptimizer(so.AdamOptimizer(), cfg)
        with pytest.raises(so.InvalidArgumentError, match=r"parameters is host memory \(ndarray\), the optimizer's "
                                                          r"memory is CUDA device memory"):
            opt.initialize(so.ParameterLayout(np.float32).add("w", 4), parameters=np.zeros(4, np.float32))
        # a device tensor reaches the library, whose error names the communicator without a device
        with pytest.raises(so.InvalidArgumentError, match="backend 'inprocess' has no device"):
            opt.initialize(so.ParameterLayout(np.float32).add("w", 4), parameters=CaiProducer())
        # a DLPack tensor whose capsule is not what its __dlpack_device__ said: refused, left to its producer
        with pytest.raises(so.InvalidArgumentError, match=r"is in CPU memory \(device 0\) though its __dlpack_device__ "
                                                          r"said CUDA memory \(device 0\)"):
            opt.initialize(so.ParameterLayout(np.float32).add("w", 4), parameters=CudaProducer(np.zeros(4, np.float32)))
        opt.close()
