"""Issue 34, label gpu_emulated: the caller's own device tensor as the parameter buffer of an optimizer in CUDA memory
(initialize(layout, initial, parameters=tensor)), on the CUDA stand-in (see test_device_views.py). The tensors are the
test's own, as a CUDA library's would be: stand-in device memory (cudaMalloc) exported through
__cuda_array_interface__ (standin.CudaBuffer) or through DLPack only (DlpackTensor); their contents are read back with
the stand-in's cudaMemcpy. The optimizer keeps its parameters in that memory: what it computes is in the caller's
buffer, equal bit for bit to the same run in the library's own device memory."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import shardopt as so
from shardopt import _dlpack
from standin import CudaBuffer, copy, cuda, needed, ok

pytestmark = needed

LAYOUT = lambda: so.ParameterLayout(np.float32).add("w", 5).add("v", 3)  # noqa: E731
RNG = np.random.default_rng(34)
X = RNG.standard_normal((32, 8)).astype(np.float32)
Y = (X @ np.linspace(-1.0, 1.0, 8, dtype=np.float32)).astype(np.float32)
INITIAL = np.linspace(0.5, -0.5, 8, dtype=np.float32)


def model(params, grad, samples):
    """Least squares of a linear model over the samples (host memory: the library copies around each call)."""
    x, y = X[samples], Y[samples]
    r = x @ params - y
    if grad is not None:
        grad[:] = x.T @ r / len(samples)
    return float(np.mean(r * r) / 2)


class DlpackTensor:
    """A CUDA tensor exported through DLPack only (no __cuda_array_interface__): `buffer`'s memory, as a DLPack
    producer gives it (the layer's own export: the capsule, the tensor's deleter). It records the consumer's
    streams."""

    def __init__(self, buffer, device_id, readonly=False):
        self.buffer, self.device_id, self.readonly, self.streams = buffer, device_id, readonly, []

    def __dlpack_device__(self):
        return (_dlpack.K_DL_CUDA, self.device_id)

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        return _dlpack.export(self.buffer.address, self.buffer.count, self.buffer.dtype, self.device_id, self.readonly,
                              self.buffer, versioned=max_version is not None and max_version[0] >= 1)


def config(backend, memory=so.MemorySpace.CUDA, **settings):
    cfg = so.ShardingConfiguration(backend)
    cfg.memory = memory
    for k, v in settings.items():
        setattr(cfg, k, v)
    return cfg


def adam():
    return so.AdamOptimizer(learning_rate=0.05, batch_size=8, max_iterations=3, shuffle_data=False,
                            use_early_stopping=False)


def device_read(view):
    """A device view's contents, read as a CUDA consumer would (its __cuda_array_interface__)."""
    host = np.empty(view.size, view.dtype)
    copy(host.ctypes.data, view.__cuda_array_interface__["data"][0], host.nbytes)
    return host


def trained(backend, parameters=None):
    """3 epochs of Adam over the model: (the optimizer's packed parameters, its full device buffer)."""
    opt = so.DDPOptimizer(adam(), config(backend)).initialize(LAYOUT(), INITIAL, parameters)
    r = opt.optimize(model, so.OptimizationInputData(num_samples=len(X)))
    assert r.steps == 12
    return opt, opt.get_parameters(), device_read(opt.parameters)


@pytest.mark.parametrize("form", ["cuda_array_interface", "dlpack"])
def test_the_callers_device_tensor_is_the_parameter_buffer(form):
    with so.StagedCommunicationBackend(0, 1) as b:
        ref, want_packed, want_full = trained(b)  # the library's own device memory
        ref.close()
        count = so.DDPOptimizer(adam(), config(b)).padded_count_for(LAYOUT())
        buffer = CudaBuffer(count, values=np.full(count, 99.0, np.float32))
        tensor = buffer if form == "cuda_array_interface" else DlpackTensor(buffer, b.device_id)
        opt, packed, full = trained(b, tensor)
        assert opt.parameters.__cuda_array_interface__["data"][0] == buffer.address  # the library's view: the caller's
        assert packed.tobytes() == want_packed.tobytes() and full.tobytes() == want_full.tobytes()
        assert buffer.read().tobytes() == want_full.tobytes()  # the updates are in the caller's buffer
        assert not np.array_equal(packed, INITIAL)
        if form == "dlpack":
            assert tensor.streams == [1]  # the optimizer's compute stream: the legacy default stream
        opt.reset()  # re-created over the same tensor, back to the initial parameters
        assert opt.parameters.__cuda_array_interface__["data"][0] == buffer.address
        assert opt.get_parameters().tolist() == INITIAL.tolist() and buffer.read()[:5].tolist() == INITIAL[:5].tolist()
        # the step protocol on the caller's memory: a gradient written on the device, the update seen there
        sgd = so.DDPOptimizer(so.StochasticGradientDescentOptimizer(so.StochasticGradientDescentOptimizerOptions(
            learning_rate=0.5)), config(b)).initialize(LAYOUT(), INITIAL, CudaBuffer(count) if form != "dlpack" else
                                                       DlpackTensor(CudaBuffer(count), b.device_id))
        sgd.zero_grad()
        for t in range(2):
            grad = sgd.tensor_grad(t)
            ones = np.ones(grad.size, np.float32)
            copy(grad.__cuda_array_interface__["data"][0], ones.ctypes.data, ones.nbytes)
        sgd.step()
        assert sgd.get_parameters().tolist() == (INITIAL - 0.5).tolist()
        opt.close()
        sgd.close()


def test_without_initial_the_buffer_holds_the_initial_parameters():
    with so.StagedCommunicationBackend(0, 1) as b:
        opt = so.DDPOptimizer(adam(), config(b))
        layout = LAYOUT()
        buffer = CudaBuffer(opt.padded_count_for(layout))
        with so.DDPOptimizer(adam(), config(b)).initialize(layout, INITIAL) as ref:
            buffer.write(device_read(ref.parameters))  # INITIAL where the layout places it
        opt.initialize(layout, parameters=buffer)
        assert opt.get_parameters().tolist() == INITIAL.tolist()
        opt.close()


def test_a_stream_of_the_configuration_is_the_one_a_dlpack_producer_orders():
    s = ctypes.c_void_p()
    ok(cuda.test_cuda_stream_create(ctypes.byref(s)))
    try:
        with so.StagedCommunicationBackend(0, 1) as b:
            cfg = config(b, cuda_stream=s.value)
            opt = so.DDPOptimizer(adam(), cfg)
            tensor = DlpackTensor(CudaBuffer(opt.padded_count_for(LAYOUT())), b.device_id)
            opt.initialize(LAYOUT(), INITIAL, tensor)
            assert tensor.streams == [s.value]
            assert opt.get_parameters().tolist() == INITIAL.tolist()
            opt.close()
    finally:
        ok(cuda.test_cuda_stream_destroy(s))


def test_the_optimizer_keeps_the_callers_tensor_alive():
    with so.StagedCommunicationBackend(0, 1) as b:
        opt = so.DDPOptimizer(adam(), config(b))
        buffer = CudaBuffer(opt.padded_count_for(LAYOUT()))
        alive = weakref.ref(buffer)
        opt.initialize(LAYOUT(), INITIAL, buffer)
        del buffer
        gc.collect()
        assert alive() is not None  # the optimizer holds it (its memory is the optimizer's parameters)
        opt.optimize(model, so.OptimizationInputData(num_samples=len(X)))
        assert alive().read()[:5].tolist() == opt.get_parameters()[:5].tolist()
        view = opt.parameters
        opt.close()
        gc.collect()
        assert alive() is not None  # a view of it is left: the native optimizer is not freed yet
        del view
        gc.collect()
        assert alive() is None  # freed after the optimizer (cudaFree in the buffer's __del__)
        # DLPack: the consumed tensor's deleter runs once the optimizer is freed, not before
        opt = so.DDPOptimizer(adam(), config(b))
        tensor = DlpackTensor(CudaBuffer(opt.padded_count_for(LAYOUT())), b.device_id)
        live = len(_dlpack._live)
        opt.initialize(LAYOUT(), INITIAL, tensor)
        assert len(_dlpack._live) == live + 1  # exported to the optimizer, not deleted
        del tensor
        gc.collect()
        assert len(_dlpack._live) == live + 1
        opt.step()
        opt.close()
        gc.collect()
        assert len(_dlpack._live) == live  # the deleter ran


def test_what_cannot_be_the_parameter_buffer_raises():
    with so.StagedCommunicationBackend(0, 1) as b:
        opt = so.DDPOptimizer(adam(), config(b))
        n = opt.padded_count_for(LAYOUT())
        cases = [
            (CudaBuffer(n, np.float64), r"parameters \(CudaBuffer\) holds float64 elements, the layout's are float32"),
            (CudaBuffer(n + 1), rf"parameters \(CudaBuffer\) has {n + 1} elements, the optimizer needs {n} "),
            (CudaBuffer(n, data=(0, True)), r"is read-only"),
            (CudaBuffer(n, strides=(8,)), r"is not C-contiguous"),
            (CudaBuffer(n, version=1), r"version 2 or 3"),
            (CudaBuffer(n, mask=object()), r"has a mask"),
            (DlpackTensor(CudaBuffer(n, np.float64), b.device_id), r"\(DlpackTensor\) holds float64 elements, the "
                                                                  r"layout's are float32"),
            (DlpackTensor(CudaBuffer(n - 1), b.device_id), rf"has {n - 1} elements, the optimizer needs {n} "),
            (DlpackTensor(CudaBuffer(n), b.device_id, readonly=True), r"is read-only"),
            (DlpackTensor(CudaBuffer(n), b.device_id + 1), rf"is memory of CUDA device {b.device_id + 1}, the "
                                                           rf"optimizer's device is {b.device_id}"),
            (np.zeros(n, np.float32), r"parameters is host memory \(ndarray\), the optimizer's memory is CUDA device "
                                      r"memory"),
        ]
        for tensor, message in cases:
            live = len(_dlpack._live)
            with pytest.raises(so.InvalidArgumentError, match=message):
                opt.initialize(LAYOUT(), INITIAL, tensor)
            gc.collect()
            assert len(_dlpack._live) == live  # a refused DLPack tensor is deleted (the capsule still owned it)
            assert not opt.is_initialized
        # a tensor that says it is device memory but is the host's: the library's check
        host = np.zeros(n, np.float32)

        class Liar:
            __cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (host.ctypes.data, False),
                                        "version": 3}
        with pytest.raises(so.InvalidArgumentError, match=r"is host memory; the CUDA optimizer needs device"):
            opt.initialize(LAYOUT(), INITIAL, Liar())
        # a device tensor for an optimizer in host memory: refused, naming both sides, never read
        host_opt = so.DDPOptimizer(adam(), config(b, memory=so.MemorySpace.HOST))
        for tensor in (CudaBuffer(n), DlpackTensor(CudaBuffer(n), b.device_id)):
            with pytest.raises(so.InvalidArgumentError, match=rf"parameters \({type(tensor).__name__}\) is in CUDA "
                                                              rf"(device )?memory.*where host memory is expected: the "
                                                              rf"optimizer's memory is host memory"):
                host_opt.initialize(LAYOUT(), INITIAL, tensor)
        # FSDP keeps parameters sharded: the library's refusal
        with pytest.raises(so.UnsupportedError, match="caller-owned parameters"):
            so.FSDPOptimizer(adam(), config(b)).initialize(LAYOUT(), INITIAL, CudaBuffer(n))
