"""Views of library memory that cannot outlive it, and the checks every array crossing into native
code goes through.

A view (`parameters`, `tensor_parameters`, `bucket_grad`, `tensor_grad`, `gather`) is a numpy array
over the optimizer's own buffers, without a copy. It keeps the native optimizer alive (its memory
is freed only when the optimizer was closed *and* the last view is gone, so no access can touch
freed memory), and once the optimizer is closed (or a gathered unit released) every use of the
view raises ObjectDisposedError.
"""
import numpy as np

__all__ = ["ObjectDisposedError", "NativeArray"]


class ObjectDisposedError(ValueError, RuntimeError):
    """A closed optimizer or backend, or a view of its memory, was used (Python's closed-file
    convention is ValueError; it is also a RuntimeError, what a closed object raised before)."""


class Guard:
    """Valid until invalidate(); `reason` is the ObjectDisposedError's message then."""
    __slots__ = ("alive", "reason")

    def __init__(self, reason):
        self.alive = True
        self.reason = reason

    def check(self):
        if not self.alive:
            raise ObjectDisposedError(self.reason)

    def invalidate(self):
        self.alive = False


class NativeOwner(Guard):
    """Owns a native handle: destroyed once nothing refers to it (the Python object that made it
    dropped it at close(), and every view made from it is gone)."""
    __slots__ = ("handle", "_destroy", "keep", "__weakref__")

    def __init__(self, handle, destroy, reason, keep=None):
        super().__init__(reason)
        self.handle = handle
        self._destroy = destroy
        self.keep = keep  # caller memory the handle points into (external parameters)

    def __del__(self):
        h, self.handle = self.handle, None
        if h is not None:
            try:
                self._destroy(h)
            except Exception:  # interpreter shutdown
                pass


class _Interface:
    """The base of a view: its __array_interface__ gives numpy the address; it holds the owner."""
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address, count, dtype, readonly, owner):
        self.__array_interface__ = {"data": (address, readonly), "shape": (count,), "typestr": dtype.str,
                                    "version": 3}
        self.owner = owner


def _plain(x):
    if isinstance(x, NativeArray):
        x._so_check()
        return x.view(np.ndarray)
    return x


class NativeArray(np.ndarray):
    """A numpy array over library memory that raises ObjectDisposedError once its owner is closed.
    Arithmetic on it gives plain numpy arrays."""

    def __array_finalize__(self, obj):
        self._so_guards = getattr(obj, "_so_guards", ())

    def _so_check(self):
        for g in self._so_guards:
            if not g.alive:
                raise ObjectDisposedError(g.reason)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        args = [_plain(x) for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None and method != "at":
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func, types, args, kwargs):
        self._so_check()
        return super().__array_function__(func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        self._so_check()
        a = self.view(np.ndarray)
        return a if dtype is None else a.astype(dtype, copy=False)

    def _checked(name):  # noqa: N805 - builds methods below
        base = getattr(np.ndarray, name)

        def method(self, *args, **kwargs):
            self._so_check()
            return base(self, *args, **kwargs)
        method.__name__ = name
        return method

    for _name in ("__getitem__", "__setitem__", "__len__", "__iter__", "__repr__", "__str__", "__bool__",
                  "__float__", "__int__", "__index__", "__contains__", "__copy__", "__deepcopy__", "__reduce__",
                  "__reduce_ex__", "tolist", "tobytes", "copy", "fill", "astype", "item", "itemset", "view",
                  "reshape", "ravel", "flatten", "sum", "mean", "min", "max", "dot", "clip", "any", "all",
                  "argmax", "argmin", "cumsum", "prod", "std", "var", "round", "sort", "put", "take", "byteswap",
                  "tofile", "setfield", "getfield", "squeeze", "transpose", "swapaxes", "repeat", "nonzero",
                  "searchsorted", "partition", "argsort", "compress", "diagonal", "trace", "conj", "choose",
                  "__buffer__", "__dlpack__"):
        if hasattr(np.ndarray, _name):
            locals()[_name] = _checked(_name)
    del _name, _checked

    @property
    def T(self):  # noqa: N802
        self._so_check()
        return super().T

    @property
    def flat(self):
        self._so_check()
        return super().flat


def native_view(address, nbytes, dtype, owner, guards, readonly=False):
    """A NativeArray over [address, address + nbytes) holding `owner` and checking `guards`."""
    dtype = np.dtype(dtype)
    count = nbytes // dtype.itemsize
    if count == 0:
        a = np.empty(0, dtype).view(NativeArray)
    else:
        base = np.asarray(_Interface(address, count, dtype, readonly, owner))
        a = base.view(NativeArray)
    a._so_guards = tuple(guards)
    return a


def as_native_array(values, dtype, name, count=None, exact_count=True):
    """`values` as a C-contiguous 1-D array of `dtype` for the library, checked.

    numpy arrays and other buffers must already hold `dtype` (TypeError otherwise: no silent
    conversion or bit reinterpretation); lists and tuples are converted. count: the number of
    elements the library will read (ValueError when there are fewer, or others with exact_count)."""
    if values is None:
        raise TypeError(f"{name} must not be None")
    dtype = np.dtype(dtype)
    if isinstance(values, NativeArray):
        values._so_check()
    if isinstance(values, (list, tuple)):
        try:
            arr = np.asarray(values, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must hold numbers convertible to {dtype} ({e})") from None
    else:
        try:
            arr = np.asarray(values)
        except Exception as e:  # noqa: BLE001
            raise TypeError(f"{name} must be an array of {dtype}, not {type(values).__name__}") from e
        if arr.dtype != dtype:
            raise TypeError(f"{name} holds {arr.dtype} elements, the parameters are {dtype} "
                            f"(convert it explicitly, e.g. {name}.astype(numpy.{dtype.name}))")
    arr = np.ascontiguousarray(arr).reshape(-1)
    if count is not None:
        if arr.size < count or (exact_count and arr.size != count):
            raise ValueError(f"SHARDOPT_ERR_INVALID_ARGUMENT: {name} has {arr.size} elements, {count} expected")
    return arr


def writable_native_array(values, dtype, name, count):
    """Like as_native_array for an array the library writes into: it must be a writable
    C-contiguous numpy array of `dtype` and `count` elements (no copy may be made)."""
    if values is None:
        raise TypeError(f"{name} must not be None")
    if isinstance(values, NativeArray):
        values._so_check()
    if not isinstance(values, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of {np.dtype(dtype)}, not {type(values).__name__}")
    if values.dtype != np.dtype(dtype):
        raise TypeError(f"{name} holds {values.dtype} elements, the parameters are {np.dtype(dtype)}")
    if not values.flags.c_contiguous or not values.flags.writeable:
        raise ValueError(f"{name} must be a writable C-contiguous array")
    if values.size != count:
        raise ValueError(f"SHARDOPT_ERR_INVALID_ARGUMENT: {name} has {values.size} elements, {count} expected")
    return values
