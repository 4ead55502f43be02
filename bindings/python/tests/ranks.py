"""launch_in_memory: the tests' ranks, threads of this process over in-memory backends."""
import threading
import uuid

import shardopt as so


def launch_in_memory(world_size, fn, environment_id=None):
    """Runs fn(backend) on `world_size` threads, each with its InMemoryCommunicationBackend; returns the results in
    rank order, or raises the first rank's own exception (after aborting the group, so the others stop at once)."""
    env = environment_id or f"launch-{uuid.uuid4()}"
    results, errors = [None] * world_size, [None] * world_size

    def body(rank):
        backend = None
        try:
            backend = so.InMemoryCommunicationBackend(rank, world_size, env)
            results[rank] = fn(backend)
        except BaseException as e:  # noqa: BLE001 - reported to the caller below
            errors[rank] = e
            if backend is not None:
                backend.abort(f"rank {rank} failed: {type(e).__name__}: {e}")
        finally:
            if backend is not None:
                backend.close()
    threads = [threading.Thread(target=body, args=(r,), name=f"shardopt-rank-{r}") for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not isinstance(e, RuntimeError)), None)
    if first or any(errors):
        raise first or next(e for e in errors if e is not None)
    return results
