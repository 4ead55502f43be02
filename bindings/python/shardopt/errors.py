"""The errors shardopt raises. A failed library call raises the ShardoptError subclass of its status,
each also the builtin exception Python code catches for it; the message reads "SHARDOPT_ERR_X: <the
library's words>", and .status, .status_name and .rank (the failing rank, -1 when none) say more.

    InvalidArgumentError   ValueError          CollectiveTimeoutError  RuntimeError, TimeoutError
    InvalidStateError      RuntimeError        PeerLostError           RuntimeError, ConnectionError
    MismatchError          RuntimeError        FileIOError, CorruptDataError      OSError
    UnsupportedError       NotImplementedError OutOfMemoryError        MemoryError
    InternalError          RuntimeError

A closed optimizer, backend or runner, and every view of memory it owned, raise ObjectDisposedError."""
from ._shardopt_native import (CollectiveTimeoutError, CorruptDataError, FileIOError, InternalError,  # noqa: F401
                               InvalidArgumentError, InvalidStateError, MismatchError, OutOfMemoryError, PeerLostError,
                               ShardoptError, UnsupportedError)

__all__ = ["ShardoptError", "InvalidArgumentError", "InvalidStateError", "CollectiveTimeoutError", "MismatchError",
           "PeerLostError", "FileIOError", "CorruptDataError", "OutOfMemoryError", "UnsupportedError", "InternalError",
           "ObjectDisposedError"]


class ObjectDisposedError(ValueError, RuntimeError):
    """A closed object, or a view of its memory, was used (Python's closed-file convention is ValueError;
    it is a RuntimeError too, what a closed object raised before)."""


def refused(error, setting):
    """The library's `error` for a value it refused, naming the Python `setting` first."""
    name = error.status_name
    new = type(error)(f"{name}: {setting}: {str(error)[len(name) + 2:]}")
    new.__dict__.update(error.__dict__)
    return new


def error(cls, status, message):
    """A ShardoptError raised by this layer, as the library's are."""
    from . import shardopt_native as _n
    e = cls(f"{_n.shardopt_status_name(status)}: {message}")
    e.status, e.status_name, e.rank = status, _n.shardopt_status_name(status), -1
    return e
