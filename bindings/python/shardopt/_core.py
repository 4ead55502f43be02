"""What the classes share: the errors (README.md), settings over the C options structs, the lifetimes of native
handles, views of library memory (NativeArray), copies across callbacks, the checks of arrays crossing into C."""
import ctypes
import operator

import numpy as np

from . import _dlpack
from . import shardopt_native as _n
from ._shardopt_native import (CollectiveTimeoutError, CorruptDataError, FileIOError, InternalError,  # noqa: F401
                               InvalidArgumentError, InvalidStateError, MismatchError, OutOfMemoryError, PeerLostError,
                               ShardoptError, UnsupportedError)


class ObjectDisposedError(ValueError, RuntimeError):
    """A closed object, or a view of its memory, was used (ValueError as for a closed file; RuntimeError too)."""


def error(cls, status, message):
    """A ShardoptError of this layer's, as the library's are."""
    e = cls(f"{_n.shardopt_status_name(status)}: {message}")
    e.status, e.status_name, e.rank = status, _n.shardopt_status_name(status), -1
    return e


def refused(e, setting):
    """The library's error `e` for a value it refused, naming the Python `setting` first."""
    new = type(e)(f"{e.status_name}: {setting}: {str(e)[len(e.status_name) + 2:]}")
    new.__dict__.update(e.__dict__)
    return new


SWITCH = "switch"  # a shardopt_switch field, seen as a bool


def set_checked(struct, field, value, setting, validate):
    """struct.field = value if the library's `validate` accepts the struct, else the field stays and the library's
    error names `setting`."""
    old = getattr(struct, field)
    try:
        setattr(struct, field, value)
        return validate(struct)
    except ShardoptError as e:
        failure = refused(e, f"{setting} = {value!r}")
    setattr(struct, field, old)
    raise failure


def convert(kind, value):
    if isinstance(kind, type) and hasattr(kind, "parse"):  # an IntEnum with parse(): a member, its value or its name
        return kind.parse(value)
    if kind is SWITCH:
        return _n.SHARDOPT_ENABLE if value else _n.SHARDOPT_DISABLE
    return int(bool(value)) if kind is bool else operator.index(value) if kind is int else float(value)


class Setting:
    """A property over `field` of the C struct in attribute `struct`, of kind float, int, bool, SWITCH or an IntEnum
    with a parse() classmethod (set as a member, its value or its name; read as a member)."""

    def __init__(self, struct, field, kind=float, validate=None, doc=None):
        self.struct, self.field, self.kind, self.validate, self.__doc__ = struct, field, kind, validate, doc

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = getattr(getattr(obj, self.struct), self.field)
        if isinstance(self.kind, type) and hasattr(self.kind, "parse"):
            return self.kind(v)
        return v == _n.SHARDOPT_ENABLE if self.kind is SWITCH else bool(v) if self.kind is bool else v

    def __set__(self, obj, value):
        set_checked(getattr(obj, self.struct), self.field, convert(self.kind, value), self.name, self.validate)


def parse_enum(cls, value, what, aliases=None):
    """A member of the IntEnum cls from itself, its value, or its name in any case, with or without '_' and '-'."""
    names = dict({m.name.replace("_", ""): m for m in cls}, **(aliases or {}))
    if isinstance(value, str) and value.replace("_", "").replace("-", "").upper() in names:
        return names[value.replace("_", "").replace("-", "").upper()]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in set(cls):
        return cls(int(value))
    raise ValueError(f"unknown {what} {value!r} (one of {', '.join(m.name.lower() for m in cls)})")


class NativeResource:
    """close(), `with` and garbage collection of a handle kept in self._handle, freed by _destroy(handle)."""
    _handle = None

    def close(self):
        if self._handle is not None:
            h, self._handle = self._handle, None
            self._destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the native module may be gone
            pass


class Guard:
    """Valid until invalidate() (`reason`: the ObjectDisposedError's message then). A NativeOwner also owns a native
    handle, destroyed once nothing refers to it; `keep`: what the handle points into or calls."""
    __slots__ = ("alive", "reason", "handle", "_destroy", "keep", "__weakref__")

    def __init__(self, reason, handle=None, destroy=None, keep=None):
        self.alive, self.reason, self.handle, self._destroy, self.keep = True, reason, handle, destroy, keep

    def check(self):
        if not self.alive:
            raise ObjectDisposedError(self.reason)

    invalidate = lambda self: setattr(self, "alive", False)

    def __del__(self):
        h, self.handle = self.handle, None
        if h is not None:
            try:
                self._destroy(h)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


def NativeOwner(handle, destroy, reason, keep=None):  # noqa: N802 - a Guard that owns a handle
    return Guard(reason, handle, destroy, keep)


class _Interface:
    """The base of a view: numpy reads the address from __array_interface__; it holds the owner."""
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address, count, dtype, readonly, owner):
        self.__array_interface__, self.owner = {"data": (address, readonly), "shape": (count,), "typestr": dtype.str,
                                                "version": 3}, owner


def _plain(x):
    if isinstance(x, NativeArray):
        x._so_check()
        return x.view(np.ndarray)
    return x


class NativeArray(np.ndarray):
    """A numpy array over library memory that raises ObjectDisposedError once its owner is closed; arithmetic
    on it gives plain numpy arrays."""

    def __array_finalize__(self, obj):
        self._so_guards = getattr(obj, "_so_guards", ())

    def _so_check(self):
        for g in self._so_guards:
            g.check()

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*[_plain(x) for x in inputs], **kwargs)
        return (out[0] if len(out) == 1 else out) if out is not None and method != "at" else result

    def __array_function__(self, func, types, args, kwargs):
        self._so_check()
        return super().__array_function__(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        self._so_check()
        a = self.view(np.ndarray)
        return a if dtype is None else a.astype(dtype, copy=False)

    def _checked(name):  # noqa: N805 - builds the methods below
        def method(self, *args, **kwargs):
            self._so_check()
            return getattr(np.ndarray, name)(self, *args, **kwargs)
        method.__name__ = name
        return method

    for _name in ("__getitem__", "__setitem__", "__len__", "__iter__", "__repr__", "__str__", "__bool__", "__float__",
                  "__int__", "__index__", "__contains__", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__",
                  "tolist", "tobytes", "copy", "fill", "astype", "item", "itemset", "view", "reshape", "ravel",
                  "flatten", "sum", "mean", "min", "max", "dot", "clip", "any", "all", "argmax", "argmin", "cumsum",
                  "prod", "std", "var", "round", "sort", "put", "take", "byteswap", "tofile", "setfield", "getfield",
                  "squeeze", "transpose", "swapaxes", "repeat", "nonzero", "searchsorted", "partition", "argsort",
                  "compress", "diagonal", "trace", "conj", "choose", "__buffer__", "__dlpack__", "__dlpack_device__"):
        if hasattr(np.ndarray, _name):
            locals()[_name] = _checked(_name)
    del _name, _checked
    T = property(lambda self: (self._so_check(), np.ndarray.T.__get__(self))[1])
    flat = property(lambda self: (self._so_check(), np.ndarray.flat.__get__(self))[1])


class DeviceArray:
    """A view of CUDA device memory of the library's (an optimizer in MemorySpace.CUDA: parameters, gradients, gathered
    units): never readable on the host. It exports __cuda_array_interface__ v3 (torch.as_tensor(view, device="cuda"),
    cupy.asarray(view), numba: no copy; its "stream" is the optimizer's compute stream, which the consumer orders its
    stream after, as the interface says) and DLPack (__dlpack__, __dlpack_device__: kDLCUDA, device; the consumer's
    stream ordered after the optimizer's by an event). Every access raises ObjectDisposedError once the optimizer is
    closed or the view expired."""
    __slots__ = ("_address", "_dtype", "shape", "device_id", "_stream", "_owner", "_guards", "_readonly")

    def __init__(self, address, count, dtype, device, stream, owner, guards, readonly=False):
        self._address, self._dtype, self.shape, self.device_id = address, np.dtype(dtype), (int(count),), int(device)
        self._stream, self._owner, self._guards, self._readonly = stream, owner, tuple(guards), readonly

    def _so_check(self):
        for g in self._guards:
            g.check()

    dtype = property(lambda self: self._dtype)
    size = property(lambda self: self.shape[0])
    __len__ = lambda self: self.shape[0]

    @property
    def __cuda_array_interface__(self):
        self._so_check()
        return {"shape": self.shape, "typestr": self._dtype.str, "data": (self._address, self._readonly), "version": 3,
                "strides": None, "stream": self._stream or 1}  # 1: the legacy default stream (CAI v3)

    def __dlpack_device__(self):
        self._so_check()
        return (_dlpack.K_DL_CUDA, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack (1.x, and the unversioned capsule for older consumers): the library's device memory, no copy. The
        consumer's `stream` waits on the device for what the optimizer enqueued so far (an event of the library's;
        -1: no ordering), as the DLPack specification says. torch.from_dlpack(view), cupy.from_dlpack(view)."""
        self._so_check()
        if copy:
            raise BufferError("copy=True: this view exports the library's device memory itself, never a copy")
        if dl_device is not None and tuple(dl_device) != (_dlpack.K_DL_CUDA, self.device_id):
            raise BufferError(f"dl_device={tuple(dl_device)}: this view is CUDA device {self.device_id}'s memory "
                              f"({_dlpack.K_DL_CUDA}, {self.device_id}); it cannot be exported elsewhere without a copy")
        consumer = _dlpack.consumer_stream(stream)
        if consumer != -1:
            _n.shardopt_optimizer_order_stream(self._owner.handle, consumer)
        return _dlpack.export(self._address, self.shape[0], self._dtype, self.device_id, self._readonly, self._owner,
                              versioned=max_version is not None and tuple(max_version)[0] >= 1)

    def __array__(self, *args, **kwargs):
        self._so_check()
        raise TypeError(f"this view is CUDA device memory (device {self.device_id}): it cannot be read on the host; "
                        f"use it on the device (__cuda_array_interface__), or get_parameters() for a host copy")

    __getitem__ = __setitem__ = __iter__ = lambda self, *a: DeviceArray.__array__(self)

    def __repr__(self):
        return f"DeviceArray(cuda:{self.device_id}, {self.shape[0]} x {self._dtype})"


def native_view(address, count, dtype, owner, guards, readonly=False):
    """A NativeArray of `count` elements at `address`, holding `owner` and checking `guards`."""
    dtype = np.dtype(dtype)
    a = (np.asarray(_Interface(address, count, dtype, readonly, owner)) if count else np.empty(0, dtype)).view(NativeArray)
    a._so_guards = tuple(guards)
    return a


def copy_in(address, count, dtype):
    """A read-only copy of `count` elements at `address`: what a callback gets (nothing it keeps points into C)."""
    a = np.empty(count, dtype)
    if count:
        ctypes.memmove(a.ctypes.data, address, a.nbytes)
    a.flags.writeable = False
    return a


def copy_out(address, array):
    ctypes.memmove(address, array.ctypes.data, array.nbytes)


_DL_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
               10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}


def host_array(values, name):
    """`values` as a numpy array without a copy: numpy arrays, buffers and __array_interface__ as numpy reads them;
    other DLPack producers (torch CPU tensors, JAX, ...) through np.from_dlpack. A tensor in device memory
    (DLPack on another device, __cuda_array_interface__) is InvalidArgumentError naming both sides: never copied."""
    if isinstance(values, np.ndarray):
        return values
    device = getattr(values, "__dlpack_device__", None)
    if device is not None:
        kind, index = (int(v) for v in device())
        if kind not in (1, 3):  # kDLCPU, kDLCUDAHost: host memory
            raise error(InvalidArgumentError, 1, f"{name} is in {_DL_DEVICES.get(kind, f'DLPack device type {kind}')} "
                                                 f"memory (device {index}), where host memory is expected (a host tensor; "
                                                 f"device memory only as an optimizer's in MemorySpace.CUDA)")
        if hasattr(values, "__dlpack__"):
            return np.from_dlpack(values)
    if hasattr(values, "__cuda_array_interface__") and not hasattr(values, "__array_interface__"):
        raise error(InvalidArgumentError, 1, f"{name} is in CUDA device memory (__cuda_array_interface__), where "
                                             f"host memory is expected (a host tensor; device memory only as an "
                                             f"optimizer's in MemorySpace.CUDA)")
    return np.asarray(values)


def dlpack_device(values):
    """(DLPack device type, index) of a tensor with __dlpack_device__, else None."""
    device = getattr(values, "__dlpack_device__", None)
    return None if device is None else tuple(int(v) for v in device())


def in_device_memory(values):
    """Whether `values` says it is in memory other than the host's: DLPack on another device, or
    __cuda_array_interface__ without a host __array_interface__."""
    device = dlpack_device(values)
    if device is not None:
        return device[0] not in (1, 3)  # kDLCPU, kDLCUDAHost
    return hasattr(values, "__cuda_array_interface__") and not hasattr(values, "__array_interface__")


def memory_name(device):
    kind, index = device
    return f"{_DL_DEVICES.get(kind, f'DLPack device type {kind}')} memory (device {index})"


def _c_order(shape, strides):
    """Whether strides (in elements) are C order for shape: one flat run (a dimension of 1 may have any stride)."""
    expected = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True


def _dlpack_capsule(values, stream):
    try:
        return values.__dlpack__(stream=stream, max_version=_dlpack.VERSION)
    except TypeError:  # a producer of DLPack < 1.0 takes no max_version
        return values.__dlpack__(stream=stream)


def device_parameters(values, dtype, count, stream, device_id, name="parameters"):
    """`values`, the caller's tensor in CUDA device (or managed) memory, checked as an optimizer's parameter buffer of
    `count` elements of `dtype`: (its address, what keeps its memory while the optimizer uses it). A DLPack producer
    (__dlpack__ with __dlpack_device__ kDLCUDA or kDLCUDAManaged) is preferred: asked for the tensor on `stream`, the
    optimizer's compute stream (None or 0: the legacy default stream), it orders that stream after its own work on the
    tensor, as DLPack says; its consumed tensor is kept, and its deleter runs once the optimizer is freed. Else
    __cuda_array_interface__ (version 2 or 3), the object itself kept; its "stream" is not waited for: the producer's work
    on the tensor must have finished. InvalidArgumentError naming both sides for another element type or count, another
    device than `device_id` (-1: not checked), a read-only, strided or masked tensor, and memory that is not CUDA's."""
    dtype, kind = np.dtype(dtype), type(values).__name__

    def fail(message):
        raise error(InvalidArgumentError, _n.SHARDOPT_ERR_INVALID_ARGUMENT, f"{name} ({kind}) {message}")

    def check(elements, shape, strides, readonly):  # strides in elements, None: C order
        if readonly:
            fail("is read-only; the optimizer writes its parameters there")
        if elements != dtype:
            fail(f"holds {elements} elements, the layout's are {dtype}")
        if (n := int(np.prod(shape, dtype=np.int64))) != count:
            fail(f"has {n} elements, the optimizer needs {count} (padded_count_for(layout))")
        if strides is not None and not _c_order(shape, strides):
            fail(f"is not C-contiguous (shape {tuple(shape)}, strides {tuple(strides)} in elements): the parameters "
                 f"are one flat run of memory")

    device = dlpack_device(values)
    if not in_device_memory(values):
        raise error(InvalidArgumentError, _n.SHARDOPT_ERR_INVALID_ARGUMENT, f"{name} is host memory ({kind}), the "
                    f"optimizer's memory is CUDA device memory: pass a tensor in CUDA memory (DLPack or "
                    f"__cuda_array_interface__), or leave {name} out (the library's own device memory)")
    if device is not None and hasattr(values, "__dlpack__"):
        if device[0] not in (_dlpack.K_DL_CUDA, _dlpack.K_DL_CUDA_MANAGED):
            fail(f"is in {memory_name(device)}, the optimizer's memory is CUDA device memory")
        if device[0] == _dlpack.K_DL_CUDA and device_id >= 0 and device[1] != device_id:
            fail(f"is memory of CUDA device {device[1]}, the optimizer's device is {device_id}")

        def accept(t):
            if t.device != device:
                fail(f"is in {memory_name(t.device)} though its __dlpack_device__ said {memory_name(device)}")
            check(t.dtype, t.shape, t.strides, t.readonly)
        imported = _dlpack.consume(_dlpack_capsule(values, stream or 1), accept)  # 1: the legacy default stream
        return imported.data, imported
    cai = getattr(values, "__cuda_array_interface__", None)
    if cai is None:
        fail(f"is in {memory_name(device)} and has no __dlpack__, the optimizer's memory is CUDA device memory")
    if not isinstance(cai, dict) or cai.get("version", 0) < 2:
        fail(f"has __cuda_array_interface__ version {cai.get('version') if isinstance(cai, dict) else cai!r}; "
             f"version 2 or 3 is read")
    if cai.get("mask") is not None:
        fail("has a mask (__cuda_array_interface__): the parameters are every element")
    try:
        elements = np.dtype(cai["typestr"])
    except TypeError:
        elements = cai["typestr"]
    address, readonly = cai["data"]
    strides = cai.get("strides")
    size = getattr(elements, "itemsize", 1) or 1
    check(elements, cai["shape"], None if strides is None else [s / size for s in strides], readonly)
    return int(address), values


def as_native_array(values, dtype, name, count=None):
    """`values` as a C-contiguous 1-D array of `dtype` (and `count` elements): numpy arrays and other buffers
    must hold `dtype` already (TypeError: never converted or reinterpreted); lists are converted by value."""
    if values is None:
        raise TypeError(f"{name} must not be None")
    dtype = np.dtype(dtype)
    if isinstance(values, NativeArray):
        values._so_check()
    if isinstance(values, (list, tuple)):
        arr = np.asarray(values, dtype=dtype)  # converted by value
    elif (arr := host_array(values, name)).dtype != dtype:
        raise TypeError(f"{name} holds {arr.dtype} elements, the parameters are {dtype} (convert it explicitly, "
                        f"e.g. {name}.astype(numpy.{dtype.name}))")
    arr = np.ascontiguousarray(arr).reshape(-1)
    if count is not None and arr.size != count:
        raise error(InvalidArgumentError, 1, f"{name} has {arr.size} elements, {count} expected")
    return arr


def writable_native_array(values, dtype, name, count):
    """As as_native_array, for an array the library writes into: a writable C-contiguous numpy array."""
    if not isinstance(values, np.ndarray) and (hasattr(values, "__dlpack_device__")
                                               or hasattr(values, "__cuda_array_interface__")):
        values = host_array(values, name)  # a DLPack tensor in host memory (torch CPU, ...), not copied
    if not isinstance(values, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of {np.dtype(dtype)}, not {type(values).__name__}")
    if not values.flags.c_contiguous or not values.flags.writeable:
        raise ValueError(f"{name} must be a writable C-contiguous array")
    return as_native_array(values, dtype, name, count)
