"""What the classes share: the errors (README.md), settings over the C options structs, the lifetimes of native
handles, views of library memory (NativeArray), copies across callbacks, the checks of arrays crossing into C."""
import ctypes
import operator

import numpy as np

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
    if kind is SWITCH:
        return _n.SHARDOPT_ENABLE if value else _n.SHARDOPT_DISABLE
    return int(bool(value)) if kind is bool else operator.index(value) if kind is int else float(value)


class Setting:
    """A property over `field` of the C struct in attribute `struct`, of kind float, int, bool or SWITCH."""

    def __init__(self, struct, field, kind=float, validate=None, doc=None):
        self.struct, self.field, self.kind, self.validate, self.__doc__ = struct, field, kind, validate, doc

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = getattr(getattr(obj, self.struct), self.field)
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
                  "compress", "diagonal", "trace", "conj", "choose", "__buffer__", "__dlpack__"):
        if hasattr(np.ndarray, _name):
            locals()[_name] = _checked(_name)
    del _name, _checked
    T = property(lambda self: (self._so_check(), np.ndarray.T.__get__(self))[1])
    flat = property(lambda self: (self._so_check(), np.ndarray.flat.__get__(self))[1])


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
    elif (arr := np.asarray(values)).dtype != dtype:
        raise TypeError(f"{name} holds {arr.dtype} elements, the parameters are {dtype} (convert it explicitly, "
                        f"e.g. {name}.astype(numpy.{dtype.name}))")
    arr = np.ascontiguousarray(arr).reshape(-1)
    if count is not None and arr.size != count:
        raise error(InvalidArgumentError, 1, f"{name} has {arr.size} elements, {count} expected")
    return arr


def writable_native_array(values, dtype, name, count):
    """As as_native_array, for an array the library writes into: a writable C-contiguous numpy array."""
    if not isinstance(values, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of {np.dtype(dtype)}, not {type(values).__name__}")
    if not values.flags.c_contiguous or not values.flags.writeable:
        raise ValueError(f"{name} must be a writable C-contiguous array")
    return as_native_array(values, dtype, name, count)
