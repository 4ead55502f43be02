"""Issue 34, label gpu_emulated: DLPack export of the library's device views, on the CUDA stand-in (see
test_device_views.py). The consumer here is the test's own, as a CUDA library would be one: it takes the capsule,
reads the DLTensor, marks the capsule used and later calls the tensor's deleter; its device reads and writes are the
stand-in's CUDA copies. The stream case holds the optimizer's compute stream at a gate, so the order between the two
streams is the library's event and nothing else: without it the consumer's copy would run at once."""
import ctypes
import time

import numpy as np
import pytest

import shardopt as so
from shardopt import _dlpack
from standin import INITIAL, copy, cuda, needed, ok

pytestmark = needed


def stream():
    s = ctypes.c_void_p()
    ok(cuda.test_cuda_stream_create(ctypes.byref(s)))
    return s.value


_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", ctypes.pythonapi))
_rename = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
USED = b"used_dltensor_versioned"


def consume(capsule):
    """What a DLPack consumer does with a versioned capsule: its managed tensor, the capsule renamed as used."""
    managed = _dlpack.DLManagedTensorVersioned.from_address(_pointer(capsule, b"dltensor_versioned"))
    assert _rename(capsule, USED) == 0
    return managed


def optimizer(backend, cuda_stream=None):
    cfg = so.ShardingConfiguration(backend)
    cfg.memory = so.MemorySpace.CUDA
    if cuda_stream is not None:
        cfg.cuda_stream = cuda_stream
    sgd = so.StochasticGradientDescentOptimizer(so.StochasticGradientDescentOptimizerOptions(learning_rate=0.5))
    return so.DDPOptimizer(sgd, cfg).initialize(so.ParameterLayout(np.float32).add("w", 4), INITIAL)


def test_dlpack_export_is_the_librarys_device_memory():
    with so.StagedCommunicationBackend(0, 1) as b:
        opt = optimizer(b)
        view = opt.parameters
        capsule = view.__dlpack__(max_version=(1, 0))
        managed = consume(capsule)
        t = managed.dl_tensor
        assert (managed.version.major, managed.version.minor) == (1, 0) and managed.flags == 0
        assert (t.device.device_type, t.device.device_id) == (2, b.device_id) == view.__dlpack_device__()
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes, t.ndim, t.byte_offset) == (2, 32, 1, 1, 0)
        assert t.shape[0] == view.size and not t.strides
        assert t.data == view.__cuda_array_interface__["data"][0]
        host = np.empty(4, np.float32)
        copy(host.ctypes.data, t.data, 16)  # the consumer reads the library's parameters
        assert host.tolist() == INITIAL.tolist()
        mine = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
        copy(t.data, mine.ctypes.data, 16)  # ... and its writes are the library's
        assert opt.get_parameters().tolist() == mine.tolist()
        # the consumer's tensor keeps the memory: closing the optimizer does not free it under the consumer
        opt.close()
        copy(host.ctypes.data, t.data, 16)
        assert host.tolist() == mine.tolist()
        managed.deleter(ctypes.addressof(managed))  # the consumer is done
        with pytest.raises(so.ObjectDisposedError):
            view.__dlpack__()


def test_an_unconsumed_capsule_frees_its_tensor_and_old_consumers_get_the_unversioned_one():
    with so.StagedCommunicationBackend(0, 1) as b, optimizer(b) as opt:
        live = len(_dlpack._live)
        capsule = opt.parameters.__dlpack__()  # no max_version: a consumer of DLPack < 1.0
        managed = _dlpack.DLManagedTensor.from_address(_pointer(capsule, b"dltensor"))
        assert managed.dl_tensor.device.device_type == 2 and len(_dlpack._live) == live + 1
        del managed, capsule  # never consumed: the capsule's destructor deletes the tensor
        assert len(_dlpack._live) == live


def test_what_cannot_be_exported_raises():
    with so.StagedCommunicationBackend(0, 1) as b, optimizer(b) as opt:
        view = opt.parameters
        with pytest.raises(BufferError, match="never a copy"):
            view.__dlpack__(copy=True)
        with pytest.raises(BufferError, match=r"cannot be exported elsewhere"):
            view.__dlpack__(dl_device=(1, 0))  # the host
        with pytest.raises(BufferError, match=r"cannot be exported elsewhere"):
            view.__dlpack__(dl_device=(2, b.device_id + 1))  # another GPU
        with pytest.raises(ValueError, match="ambiguous"):
            view.__dlpack__(stream=0)
        live = len(_dlpack._live)
        with pytest.raises((BufferError, RuntimeError), match="device"):  # numpy takes host tensors only, and says
            np.from_dlpack(view)                                          # so; nothing is left behind
        assert len(_dlpack._live) == live


def test_the_consumers_stream_waits_for_the_optimizers_work():
    compute, consumer = stream(), stream()
    scratch, gate = ctypes.c_void_p(), ctypes.c_void_p()
    ok(cuda.test_cuda_malloc(ctypes.byref(scratch), ctypes.c_size_t(16)))
    try:
        with so.StagedCommunicationBackend(0, 1) as b, optimizer(b, cuda_stream=compute) as opt:
            view = opt.parameters
            assert view.__cuda_array_interface__["stream"] == compute
            address = view.__cuda_array_interface__["data"][0]
            # The optimizer's stream is held at the gate; behind it, a write of new parameters (its "work").
            ok(cuda.test_cuda_gate_enqueue(ctypes.c_void_p(compute), ctypes.byref(gate)))
            new = np.array([7.0, 8.0, 9.0, 10.0], np.float32)
            ok(cuda.test_cuda_copy_async(ctypes.c_void_p(address), ctypes.c_void_p(new.ctypes.data), ctypes.c_size_t(16),
                                         ctypes.c_void_p(compute)))
            managed = consume(view.__dlpack__(stream=consumer, max_version=(1, 0)))
            # The consumer reads the tensor on its own stream, device to device (the call does not wait).
            ok(cuda.test_cuda_copy_async(scratch, ctypes.c_void_p(managed.dl_tensor.data), ctypes.c_size_t(16),
                                         ctypes.c_void_p(consumer)))
            # Ordered after the gated work, the consumer's copy cannot run yet; without the library's event it would
            # have run at once (the stand-in runs a free stream's work within milliseconds).
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                assert cuda.test_cuda_stream_query(ctypes.c_void_p(consumer)) == 3, \
                    "the consumer's stream ran before the optimizer's work it was handed"
                time.sleep(0.02)
            cuda.test_cuda_gate_open(gate, 0)
            ok(cuda.test_cuda_stream_synchronize(ctypes.c_void_p(consumer)))
            seen = np.empty(4, np.float32)
            copy(seen.ctypes.data, scratch.value, 16)
            assert seen.tolist() == new.tolist()  # the consumer saw the finished work
            ok(cuda.test_cuda_stream_synchronize(ctypes.c_void_p(compute)))
            cuda.test_cuda_gate_open(gate, 1)
            managed.deleter(ctypes.addressof(managed))
            # stream=-1: no ordering asked, none made (the consumer's copy is free to run)
            view.__dlpack__(stream=-1)
    finally:
        ok(cuda.test_cuda_free(scratch))
        ok(cuda.test_cuda_stream_destroy(ctypes.c_void_p(consumer)))
        ok(cuda.test_cuda_stream_destroy(ctypes.c_void_p(compute)))
