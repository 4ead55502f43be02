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
