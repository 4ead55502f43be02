"""Communication backends (AiDotNet's ICommunicationBackend): collectives on numpy arrays, whose element type
(float32, float64, float16, int32, int64, uint8) and count are the message's."""
import enum

import numpy as np

from . import shardopt_native as _n
from ._core import NativeArray, NativeResource, ObjectDisposedError


class ReductionOperation(enum.IntEnum):
    SUM, PRODUCT, MIN, MAX, AVERAGE = _n.SHARDOPT_SUM, _n.SHARDOPT_PROD, _n.SHARDOPT_MIN, _n.SHARDOPT_MAX, _n.SHARDOPT_AVG


def _array(data, contiguous=False):
    """A numpy array for a collective (a list is refused: its element type would be a guess)."""
    if isinstance(data, NativeArray):
        data._so_check()
    if not isinstance(data, np.ndarray):
        raise TypeError(f"data must be a numpy array (its element type is the message's), not {type(data).__name__}")
    return np.ascontiguousarray(data) if contiguous else data


class CommunicationBackend(NativeResource):
    """One rank's communicator: the library's collectives, in place where AiDotNet's are."""

    def __init__(self, handle):
        self._handle = handle

    @property
    def handle(self):
        if self._handle is None:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed")
        return self._handle

    rank = property(lambda self: _n.shardopt_comm_rank(self.handle))
    world_size = property(lambda self: _n.shardopt_comm_size(self.handle))
    is_initialized = property(lambda self: self._handle is not None)
    initialize = reset = lambda self: self.handle and self  # AiDotNet's: ready once constructed
    shutdown = NativeResource.close
    set_timeout = lambda self, milliseconds: _n.shardopt_comm_set_timeout(self.handle, int(milliseconds))
    barrier = lambda self: _n.shardopt_barrier(self.handle)
    abort = lambda self, reason=None: _n.shardopt_comm_abort(self.handle, reason)  # fails every rank
    _destroy = lambda self, handle: _n.shardopt_comm_destroy(handle)  # optimizers keep the communicator

    def all_reduce(self, data, operation=ReductionOperation.SUM):
        """Reduces `data` in place across ranks and returns it."""
        _n.shardopt_allreduce(self.handle, _array(data), int(operation))
        return data

    def broadcast(self, data, root=0):
        """Root's `data` into every rank's `data` (in place; same size and dtype everywhere)."""
        _n.shardopt_broadcast(self.handle, _array(data), int(root))
        return data

    def all_gather(self, data):
        """Every rank's `data`, concatenated in rank order (a new array)."""
        data = _array(data, True)
        return np.frombuffer(_n.shardopt_allgather(self.handle, data), data.dtype)

    def reduce_scatter(self, data, operation=ReductionOperation.SUM):
        """`data` (world_size * k elements on every rank) reduced across ranks: this rank's block of k (a new array)."""
        data = _array(data, True)
        return np.frombuffer(_n.shardopt_reduce_scatter(self.handle, data, int(operation)), data.dtype)

    def scatter(self, data=None, root=0, dtype=None):
        """Root's `data` (world_size * k elements) split in rank order: rank r gets block r (a new array). Other ranks
        pass no data, and root's dtype (default float64) when it is another: the library's shardopt_scatter."""
        data = np.empty(0, dtype or np.float64) if data is None else _array(data, True)
        return np.frombuffer(_n.shardopt_scatter(self.handle, data, int(root)), data.dtype).copy()

    def send(self, data, destination, tag=0):
        """Sends `data` to rank `destination` (buffered: returns once it is on its way)."""
        _n.shardopt_send(self.handle, _array(data, True), int(destination), int(tag))

    def receive(self, source, count, tag=0, dtype=np.float64):
        """Receives `count` elements of `dtype` from rank `source` (a new array), as the sender sent them."""
        if int(count) < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        out = np.empty(int(count), dtype=np.dtype(dtype))
        _n.shardopt_recv(self.handle, out, int(source), int(tag))
        return out

    def split(self, color, key=0):
        """Ranks with equal color form a new backend; color < 0 returns None."""
        h = _n.shardopt_comm_split(self.handle, int(color), int(key))
        return None if h is None else CommunicationBackend(h)


class InMemoryCommunicationBackend(CommunicationBackend):
    """Rank `rank` of an in-process group of `world_size` ranks (threads), made on the thread that drives it; ranks
    sharing `environment_id` form one group. Once it is closed and no optimizer over it is left (a `with` block its
    thread leaves by an exception), the other ranks fail at once with PeerLostError naming it."""

    def __init__(self, rank, world_size, environment_id="default"):
        self.environment_id = environment_id
        super().__init__(_n.shardopt_comm_create_inprocess_member(environment_id, int(rank), int(world_size)))


class UcxCommunicationBackend(CommunicationBackend):
    """This process's rank over UCX from a launcher's environment (shardopt-run, ...); single_process: a world of one."""

    def __init__(self, single_process=False):
        create = _n.shardopt_comm_create_single if single_process else _n.shardopt_comm_create_from_env
        super().__init__(create("ucx"))


class NcclCommunicationBackend(CommunicationBackend):
    """This process's rank over NCCL (CUDA device buffers) from a launcher's environment."""

    def __init__(self):
        super().__init__(_n.shardopt_comm_create_from_env("nccl"))
