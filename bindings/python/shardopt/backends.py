"""Communication backends (AiDotNet's ICommunicationBackend, in Python naming)."""
import enum
import os
import threading
import uuid

import numpy as np

from . import shardopt_native as _n
from ._native_resource import NativeResource
from ._views import NativeArray, ObjectDisposedError

__all__ = ["ReductionOperation", "CommunicationBackend", "InMemoryCommunicationBackend",
           "UcxCommunicationBackend", "NcclCommunicationBackend", "launch_in_memory"]


_ENV_LOCK = threading.Lock()


class ReductionOperation(enum.IntEnum):
    SUM = _n.SHARDOPT_SUM
    PRODUCT = _n.SHARDOPT_PROD
    MIN = _n.SHARDOPT_MIN
    MAX = _n.SHARDOPT_MAX
    AVERAGE = _n.SHARDOPT_AVG


_DTYPES = {np.dtype(np.float32): _n.SHARDOPT_F32, np.dtype(np.float64): _n.SHARDOPT_F64,
           np.dtype(np.int32): _n.SHARDOPT_I32, np.dtype(np.int64): _n.SHARDOPT_I64,
           np.dtype(np.uint8): _n.SHARDOPT_U8}


def _dtype_code(array):
    try:
        return _DTYPES[array.dtype]
    except KeyError:
        raise ValueError(f"unsupported dtype {array.dtype} (float32, float64, int32, int64, uint8)") from None


def _contiguous(array, name="data"):
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(array).__name__}")
    if isinstance(array, NativeArray):
        array._so_check()
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError(f"{name} must be a writable C-contiguous array (collectives work in place)")
    return array


def _readable(array, name="data"):
    if isinstance(array, NativeArray):
        array._so_check()
    if not isinstance(array, np.ndarray):
        if isinstance(array, (list, tuple)):
            raise TypeError(f"{name} must be a numpy array (its element type is the message's), "
                            f"not {type(array).__name__}")
        array = np.asarray(array)
    return np.ascontiguousarray(array)


class CommunicationBackend(NativeResource):
    """One rank's communicator. Collectives are in place on numpy arrays (no copies)."""

    def __init__(self, handle):
        self._handle = handle

    @property
    def handle(self):
        if self._handle is None:
            raise ObjectDisposedError(f"the {type(self).__name__} was closed")
        return self._handle

    @property
    def rank(self):
        return _n.so_comm_rank(self.handle)

    @property
    def world_size(self):
        return _n.so_comm_size(self.handle)

    @property
    def is_initialized(self):
        return self._handle is not None

    def initialize(self):
        """AiDotNet's Initialize(): the backend is ready once constructed (the rendezvous ran then);
        raises ObjectDisposedError after close()."""
        self.handle  # noqa: B018 - raises when closed
        return self

    def set_timeout(self, milliseconds):
        _n.so_comm_set_timeout(self.handle, int(milliseconds))

    def barrier(self):
        _n.so_barrier(self.handle)

    def all_reduce(self, data, operation=ReductionOperation.SUM):
        """Reduces `data` in place across ranks and returns it."""
        data = _contiguous(data)
        _n.so_py_allreduce(self.handle, data, data.size, _dtype_code(data), int(operation))
        return data

    def broadcast(self, data, root=0):
        """Root's `data` into every rank's `data` (in place; same size and dtype everywhere)."""
        data = _contiguous(data)
        _n.so_py_broadcast(self.handle, data, data.size, _dtype_code(data), int(root))
        return data

    def all_gather(self, data):
        """Every rank's `data`, concatenated in rank order (a new array)."""
        data = _readable(data)
        out = np.empty(data.size * self.world_size, dtype=data.dtype)
        _n.so_py_allgather(self.handle, data, out, data.size, _dtype_code(data))
        return out

    def reduce_scatter(self, data, operation=ReductionOperation.SUM):
        """`data` (world_size * k elements on every rank) reduced across ranks; this rank gets its
        block [rank * k, (rank + 1) * k) of the result (a new array of k elements)."""
        data = _readable(data)
        ws = self.world_size
        if data.size % ws:
            raise ValueError(f"reduce_scatter needs a multiple of the world size ({ws}) elements, got {data.size}")
        out = np.empty(data.size // ws, dtype=data.dtype)
        _n.so_py_reduce_scatter(self.handle, data, out, out.size, _dtype_code(data), int(operation))
        return out

    def scatter(self, data=None, root=0, count=None, dtype=None):
        """Root's `data` (world_size * k elements) split in rank order: rank r gets block r (a new
        array of k elements). Other ranks pass an array of root's size and dtype (its content is
        ignored) or data=None with count=k and dtype=.

        Cost: the C ABI has no scatter, so this is a broadcast of all world_size * k elements from
        root, each rank then keeping its block: world_size times the bytes a true scatter moves."""
        ws, rank = self.world_size, self.rank
        if data is not None:
            data = _readable(data)
            if data.size % ws:
                raise ValueError(f"scatter needs a multiple of the world size ({ws}) elements, got {data.size}")
            k, dt = data.size // ws, data.dtype
        elif rank == root:
            raise TypeError("data must not be None on the root rank")
        elif count is None:
            raise TypeError("with data=None, pass count= (elements per rank) and dtype=")
        else:
            k, dt = int(count), np.dtype(dtype or np.float64)
        buf = data.copy() if rank == root else np.empty(k * ws, dt)
        _n.so_py_broadcast(self.handle, buf, buf.size, _dtype_code(buf), int(root))
        return buf[rank * k:(rank + 1) * k].copy()

    def send(self, data, destination, tag=0):
        """Sends `data` to rank `destination` (buffered: returns once it is on its way)."""
        data = _readable(data)
        if int(tag) < 0:
            raise ValueError(f"tag must be >= 0 (got {tag})")
        _n.so_py_send(self.handle, data, data.size, _dtype_code(data), int(destination), int(tag))

    def receive(self, source, count, tag=0, dtype=np.float64):
        """Receives `count` elements of `dtype` from rank `source` (a new array). The sender's
        element type and count must match."""
        if int(count) < 0:
            raise ValueError(f"count must be >= 0 (got {count})")
        if int(tag) < 0:
            raise ValueError(f"tag must be >= 0 (got {tag})")
        out = np.empty(int(count), dtype=np.dtype(dtype))
        _n.so_py_recv(self.handle, out, out.size, _dtype_code(out), int(source), int(tag))
        return out

    def abort(self, reason=None):
        """Makes pending and later collectives fail on every rank (in-process: the whole group)."""
        _n.so_comm_abort(self.handle, reason)

    def split(self, color, key=0):
        """Ranks with equal color form a new backend; color < 0 returns None."""
        h = _n.so_comm_split(self.handle, int(color), int(key))
        return None if h is None else CommunicationBackend(h)

    def _destroy(self, handle):
        # Optimizers built over this rank keep the communicator alive.
        _n.so_comm_destroy(handle)

    def shutdown(self):
        self.close()

    def reset(self):
        """Nothing to reset in a communicator (AiDotNet's backends have no Reset); raises
        ObjectDisposedError after close()."""
        self.handle  # noqa: B018

    def __repr__(self):
        if self._handle is None:
            return f"<{type(self).__name__} closed>"
        return f"<{type(self).__name__} rank {self.rank} of {self.world_size}>"


class InMemoryCommunicationBackend(CommunicationBackend):
    """Rank `rank` of an in-process group of `world_size` ranks (threads of this process).

    Ranks sharing `environment_id` form one group; construct each rank's object on the thread that
    drives it. The id may be reused once every rank of the previous group was constructed.
    """

    def __init__(self, rank, world_size, environment_id="default"):
        self.environment_id = environment_id
        super().__init__(_n.so_comm_inmemory(environment_id, int(rank), int(world_size)))


class UcxCommunicationBackend(CommunicationBackend):
    """This process's rank over UCX, from the environment (tools/shardopt-run, torchrun, mpirun, srun).

    Without a launcher's environment it raises ValueError (SHARDOPT_ERR_INVALID_ARGUMENT: found no
    world size in the environment ...) instead of quietly becoming rank 0 of 1; pass
    single_process=True to ask for a world of one explicitly."""

    def __init__(self, single_process=False):
        if not single_process:
            super().__init__(_n.so_comm_from_env("ucx"))
            return
        size = os.environ.get("SHARDOPT_WORLD_SIZE")
        if size is not None and size.strip() != "1":
            raise ValueError(f"single_process=True, but the environment says SHARDOPT_WORLD_SIZE={size}")
        saved = {k: os.environ.get(k) for k in ("SHARDOPT_WORLD_SIZE", "SHARDOPT_RANK")}
        with _ENV_LOCK:
            try:
                os.environ["SHARDOPT_WORLD_SIZE"] = "1"
                os.environ.setdefault("SHARDOPT_RANK", "0")
                super().__init__(_n.so_comm_from_env("ucx"))
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v


class NcclCommunicationBackend(CommunicationBackend):
    """NCCL (device buffers). Raises NotImplementedError until NCCL lands in the C ABI."""

    def __init__(self, rank=0, world_size=1, device_id=-1):
        super().__init__(_n.so_comm_nccl(int(rank), int(world_size), int(device_id)))


def launch_in_memory(world_size, fn, environment_id=None):
    """Runs fn(backend) on `world_size` threads, each with its InMemoryCommunicationBackend;
    returns the results in rank order and re-raises the first rank's exception (after aborting
    the group so the other ranks stop waiting)."""
    env = environment_id or f"launch-{uuid.uuid4()}"
    results = [None] * world_size
    errors = [None] * world_size

    def body(rank):
        backend = None
        try:
            backend = InMemoryCommunicationBackend(rank, world_size, env)
            results[rank] = fn(backend)
        except BaseException as e:  # noqa: BLE001 - reported to the caller below
            errors[rank] = e
            if backend is not None and backend.is_initialized:
                try:
                    backend.abort(f"rank {rank} failed: {e}")
                except Exception:
                    pass
        finally:
            if backend is not None:
                backend.close()

    threads = [threading.Thread(target=body, args=(r,), name=f"shardopt-rank-{r}") for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, RuntimeError)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results
