"""DLPack export of the library's device views (DeviceArray.__dlpack__): the structs of dlpack.h (1.x) and a
PyCapsule holding one, as the DLPack Python specification asks. The capsule and then the consumer hold the view's
owner (the optimizer's native handle): its device memory stays allocated until the consumer's deleter runs, even when
the optimizer is closed in between. And the import of a producer's tensor (consume: the caller's device parameters),
whose deleter runs once nothing holds the Imported tensor any more."""
import ctypes

import numpy as np

from . import shardopt_native as _n

K_DL_CUDA = 2
K_DL_CUDA_MANAGED = 13
K_DL_FLOAT = 2
FLAG_READ_ONLY = 1 << 0
VERSION = (1, 0)  # nothing of 1.1 is used


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensor(ctypes.Structure):
    pass


class DLManagedTensorVersioned(ctypes.Structure):
    pass


Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", Deleter), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

# What each exported tensor keeps alive (the struct, its shape, the owner), by the struct's address, until its
# deleter runs: the consumer's call, or the capsule's destructor (shardopt_python.i) when nobody consumed it.
_live = {}


@Deleter
def _delete(address):
    _live.pop(address, None)


def export(address, count, dtype, device_id, readonly, owner, versioned):
    """A DLPack capsule for `count` elements of `dtype` at device address `address` of CUDA device `device_id`,
    holding `owner`: "dltensor_versioned" (DLPack 1.0) when the consumer said it takes one, else "dltensor"."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise BufferError(f"DLPack export of {dtype} views is not supported (the library's views are float)")
    shape = (ctypes.c_int64 * 1)(count)
    managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    managed.dl_tensor = DLTensor(address, DLDevice(K_DL_CUDA, device_id), 1, DLDataType(K_DL_FLOAT, dtype.itemsize * 8, 1),
                                 shape, None, 0)
    managed.manager_ctx, managed.deleter = None, _delete
    if versioned:
        managed.version = DLPackVersion(*VERSION)
        managed.flags = FLAG_READ_ONLY if readonly else 0
    at = ctypes.addressof(managed)
    _live[at] = (managed, shape, owner)
    return _n.so_dlpack_capsule(at, int(versioned))  # its destructor (C) deletes a tensor nobody consumed


def consumer_stream(stream):
    """The cudaStream_t the DLPack specification's `stream` argument names for CUDA, as an address (None: the legacy
    default stream); -1 asks for no ordering (returns -1)."""
    if stream is None or stream == 1:
        return None  # the legacy default stream
    if stream == 0:
        raise ValueError("__dlpack__(stream=0) is ambiguous for CUDA (DLPack): pass 1 (legacy default stream), 2 "
                         "(per-thread default stream) or a stream handle")
    if not isinstance(stream, int) or stream < -1:
        raise ValueError(f"__dlpack__(stream={stream!r}): a CUDA stream is an int (1, 2, a handle) or -1")
    return stream  # -1, 2 (cudaStreamPerThread is the handle 0x2) or a handle


_capsule_call = lambda result, name: ctypes.PYFUNCTYPE(result, ctypes.py_object, ctypes.c_char_p)(  # noqa: E731
    (name, ctypes.pythonapi))
_capsule_valid = _capsule_call(ctypes.c_int, "PyCapsule_IsValid")
_capsule_pointer = _capsule_call(ctypes.c_void_p, "PyCapsule_GetPointer")
_capsule_rename = _capsule_call(ctypes.c_int, "PyCapsule_SetName")
# The names a consumed capsule takes; the capsule keeps a pointer to its name, so these live as long as the module.
_NAMES = ((b"dltensor_versioned", b"used_dltensor_versioned", DLManagedTensorVersioned),
          (b"dltensor", b"used_dltensor", DLManagedTensor))


class Imported:
    """A producer's tensor taken from its capsule: (device type, index), data (the address with byte_offset), dtype
    (numpy's for ints and floats, else a description), shape, strides (in elements, None: C order),
    readonly. Its deleter (the producer's) runs when this is collected: whoever uses the memory holds this."""
    __slots__ = ("device", "data", "dtype", "shape", "strides", "readonly", "_managed", "_delete")

    def __init__(self, managed, versioned):
        t = managed.dl_tensor
        self.device = (int(t.device.device_type), int(t.device.device_id))
        self.data = (t.data or 0) + int(t.byte_offset)
        code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        kind = {0: "i", 1: "u", K_DL_FLOAT: "f"}.get(code) if lanes == 1 and bits in (8, 16, 32, 64) else None
        self.dtype = np.dtype(f"<{kind}{bits // 8}") if kind and (kind, bits) != ("f", 8) else \
            f"DLPack type (code {code}, {bits} bits, {lanes} lanes)"
        self.shape = tuple(int(t.shape[i]) for i in range(t.ndim))
        self.strides = tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else None
        self.readonly = bool(versioned and managed.flags & FLAG_READ_ONLY)
        self._managed, self._delete = managed, managed.deleter

    def __del__(self):
        managed, self._managed = self._managed, None
        if managed is not None and self._delete:  # a NULL deleter: nothing to release (DLPack)
            self._delete(ctypes.addressof(managed))


def consume(capsule, accept):
    """The tensor of a DLPack capsule (an Imported) if accept(tensor) returns without raising: the capsule is renamed as
    consumed and the tensor's deleter is the Imported's to run. If accept raises, the capsule is left as it was (its
    destructor, the producer's, deletes the tensor) and the error propagates."""
    for name, used, struct in _NAMES:
        if _capsule_valid(capsule, name):
            managed = struct.from_address(_capsule_pointer(capsule, name))
            if struct is DLManagedTensorVersioned and managed.version.major != VERSION[0]:
                raise BufferError(f"a DLPack {managed.version.major}.{managed.version.minor} tensor; this consumer "
                                  f"reads DLPack {VERSION[0]}.x")  # the capsule still owns it
            imported = Imported(managed, struct is DLManagedTensorVersioned)
            try:
                accept(imported)
            except BaseException:
                imported._managed = None  # not ours to delete: the capsule still owns it
                raise
            if _capsule_rename(capsule, used) != 0:
                imported._managed = None
                raise BufferError("the DLPack capsule could not be marked consumed")
            return imported
    raise BufferError(f"__dlpack__ returned {type(capsule).__name__}, not an unconsumed DLPack capsule "
                      f"('dltensor' or 'dltensor_versioned')")
