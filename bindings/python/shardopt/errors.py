"""The errors shardopt raises. A failed library call raises the ShardoptError subclass of its status, each also
the builtin exception Python code catches for it: InvalidArgumentError (ValueError), InvalidStateError,
MismatchError, InternalError (RuntimeError), CollectiveTimeoutError (RuntimeError, TimeoutError), PeerLostError
(RuntimeError, ConnectionError), FileIOError, CorruptDataError (OSError), UnsupportedError
(NotImplementedError), OutOfMemoryError (MemoryError). The message reads "SHARDOPT_ERR_X: <the library's
words>"; .status, .status_name and .rank (of the failed call; -1: none) say more. A closed object, and every
view of memory it owned, raises ObjectDisposedError."""
from . import shardopt_native as _n
from ._shardopt_native import (CollectiveTimeoutError, CorruptDataError, FileIOError, InternalError,  # noqa: F401
                               InvalidArgumentError, InvalidStateError, MismatchError, OutOfMemoryError, PeerLostError,
                               ShardoptError, UnsupportedError)


class ObjectDisposedError(ValueError, RuntimeError):
    """A closed object, or a view of its memory, was used (ValueError as for a closed file; RuntimeError too)."""


def error(cls, status, message):
    """A ShardoptError raised by this layer, as the library's are."""
    e = cls(f"{_n.shardopt_status_name(status)}: {message}")
    e.status, e.status_name, e.rank = status, _n.shardopt_status_name(status), -1
    return e


def refused(e, setting):
    """The library's error `e` for a value it refused, naming the Python `setting` first."""
    new = type(e)(f"{e.status_name}: {setting}: {str(e)[len(e.status_name) + 2:]}")
    new.__dict__.update(e.__dict__)
    return new
