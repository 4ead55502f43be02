"""What the gpu_emulated tests share: the C ABI built on the CUDA stand-in (capi/tests: shardopt_standin, preloaded in
place of libshardopt.so.2; its path in SHARDOPT_STANDIN_LIBRARY), the skip without it, and its test-only CUDA calls
(capi/tests/cuda_copy.cpp), made as a CUDA library would make them."""
import ctypes
import os

import numpy as np
import pytest

LIBRARY = os.environ.get("SHARDOPT_STANDIN_LIBRARY")
needed = pytest.mark.skipif(not LIBRARY, reason="needs the CUDA stand-in library (SHARDOPT_STANDIN_LIBRARY)")
cuda = ctypes.CDLL(LIBRARY) if LIBRARY else None
INITIAL = np.array([0.5, -1.0, 2.0, 0.25], np.float32)  # the parameters the tests' optimizers start from


def ok(status):
    assert status == 0, f"stand-in CUDA call failed ({status})"


def copy(dst, src, nbytes):
    """A synchronous copy between host and device memory (the stand-in's cudaMemcpy)."""
    ok(cuda.test_cuda_copy(ctypes.c_void_p(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes)))


def malloc(nbytes):
    """Stand-in device memory (cudaMalloc), freed with free()."""
    p = ctypes.c_void_p()
    ok(cuda.test_cuda_malloc(ctypes.byref(p), ctypes.c_size_t(nbytes)))
    return p.value


def free(address):
    ok(cuda.test_cuda_free(ctypes.c_void_p(address)))


class CudaBuffer:
    """A test-only CUDA tensor, as a CUDA library's would be: `count` elements of `dtype` in stand-in device memory (its
    own, freed when it is collected), exported through __cuda_array_interface__ v3 only (no DLPack, no host
    interface). `interface` overrides keys of the interface (a read-only flag, strides, a version...)."""

    def __init__(self, count, dtype=np.float32, values=None, **interface):
        self.dtype, self.count = np.dtype(dtype), count
        self.address = malloc(max(count, 1) * self.dtype.itemsize)
        self.interface = interface
        if values is not None:
            self.write(values)

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.count,), "typestr": self.dtype.str, "data": (self.address, False), "version": 3,
                "strides": None, "stream": None, **self.interface}

    def write(self, values):
        values = np.ascontiguousarray(values, self.dtype)
        copy(self.address, values.ctypes.data, values.nbytes)

    def read(self):
        host = np.empty(self.count, self.dtype)
        copy(host.ctypes.data, self.address, host.nbytes)
        return host

    def __del__(self):
        if cuda is not None and self.address:
            free(self.address)
