"""Issue 34, label gpu_emulated: the Python layer over the C ABI built against the CUDA stand-in (capi/tests:
shardopt_standin, loaded in place of libshardopt.so.2 through LD_PRELOAD), so an optimizer in CUDA memory exists without
a GPU. Its views are DeviceArrays whose __cuda_array_interface__ is the library's device memory: a write there (the
stand-in's cudaMemcpy, as a CUDA consumer would) is what the library reads, and the library's update is what a read
there sees. Run by ctest (bindings.python_gpu_emulated); skipped when the stand-in is not what is loaded."""
import numpy as np
import pytest

import shardopt as so
from standin import INITIAL, copy, needed

pytestmark = needed


def test_device_views_are_the_librarys_memory():
    with so.StagedCommunicationBackend(0, 1) as b:
        assert b.device_id >= 0
        cfg = so.ShardingConfiguration(b)
        cfg.memory = so.MemorySpace.CUDA
        opt = so.DDPOptimizer(so.StochasticGradientDescentOptimizer(so.StochasticGradientDescentOptimizerOptions(
            learning_rate=0.5)), cfg).initialize(so.ParameterLayout(np.float32).add("w", 4), INITIAL)
        view = opt.parameters
        assert isinstance(view, so.DeviceArray) and view.__dlpack_device__() == (2, b.device_id)
        cai = view.__cuda_array_interface__
        assert cai["typestr"] == "<f4" and cai["shape"][0] >= 4 and cai["stream"] == 1  # the legacy default stream
        host = np.empty(4, np.float32)
        copy(host.ctypes.data, cai["data"][0], 16)  # a consumer's read of the device view
        assert host.tolist() == INITIAL.tolist()
        mine = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
        copy(cai["data"][0], mine.ctypes.data, 16)  # a consumer's write: the library sees it
        assert opt.get_parameters().tolist() == mine.tolist()
        opt.zero_grad()
        grad = opt.tensor_grad(0)
        assert isinstance(grad, so.DeviceArray)
        ones = np.ones(4, np.float32)
        copy(grad.__cuda_array_interface__["data"][0], ones.ctypes.data, 16)  # the gradient, written on the device
        opt.step()
        copy(host.ctypes.data, cai["data"][0], 16)  # the library's update, read through the view
        assert host.tolist() == [0.5, 1.5, 2.5, 3.5]
        with pytest.raises(TypeError, match="CUDA device memory"):
            np.asarray(view)
        with pytest.raises(so.InvalidArgumentError, match="parameters is host memory"):
            so.DDPOptimizer(so.AdamOptimizer(), cfg).initialize(so.ParameterLayout(np.float32).add("w", 4),
                                                                parameters=np.zeros(4, np.float32))
        opt.close()
        with pytest.raises(so.ObjectDisposedError):
            view.__cuda_array_interface__
