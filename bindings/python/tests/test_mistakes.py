"""Issue 19: ordinary mistakes raise the right Python exception with a clear message (never crash
or corrupt), and ranks that disagree are caught on every rank. Whatever could crash runs in a
subprocess, so a crash fails the test instead of killing the runner."""
import math
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import numpy as np
import pytest

import shardopt as so

F32 = np.float32
F64 = np.float64


def run_ranks(world_size, fn, timeout_ms=10000):
    """fn(backend) on every rank's thread; returns (results, errors) in rank order (no raising)."""
    env = f"mistakes-{uuid.uuid4()}"
    results, errors = [None] * world_size, [None] * world_size

    def body(rank):
        try:
            with so.InMemoryCommunicationBackend(rank, world_size, env) as b:
                b.set_timeout(timeout_ms)
                results[rank] = fn(b)
        except BaseException as e:  # noqa: BLE001
            errors[rank] = e
    threads = [threading.Thread(target=body, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def run_python(code, env=None, timeout=60):
    """Runs `code` in a fresh interpreter with this test's environment; returns (exit code, output)."""
    e = dict(os.environ)
    if env is not None:
        e = {k: v for k, v in e.items() if not k.startswith("SHARDOPT_") or k == "SHARDOPT_LIBRARY"}
        e.update(env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def one_rank(cls=so.DDPOptimizer, dtype=F32, count=9, **kw):
    b = so.InMemoryCommunicationBackend(0, 1, f"one-{uuid.uuid4()}")
    opt = cls(so.AdamOptimizer(), so.ShardingConfiguration(b), layout=so.ParameterLayout(dtype).add("w", count), **kw)
    return b, opt


# ------------------------------------------------------------------ 2. arrays: length and element type
@pytest.mark.parametrize("dtype", [F32, F64])
def test_short_array_is_value_error_not_out_of_bounds(dtype):
    b, opt = one_rank(dtype=dtype)
    with b, opt:
        short = np.ones(3, dtype)
        with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT: values has 3 elements, 9 expected"):
            opt.set_parameters(short)
        with pytest.raises(ValueError, match="out has 3 elements, 9 expected"):
            opt.get_parameters(out=short)
        assert np.all(opt.get_parameters() == 0)  # nothing was read out of bounds
    with so.InMemoryCommunicationBackend(0, 1, f"short-{uuid.uuid4()}") as b:
        with pytest.raises(ValueError, match="initial has 3 elements, 9 expected"):
            so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                            layout=so.ParameterLayout(dtype).add("w", 9), initial=np.ones(3, dtype))
        opt = so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b))
        with pytest.raises(ValueError, match="parameters has 3 elements"):
            opt.initialize(so.ParameterLayout(dtype).add("w", 9), parameters=np.zeros(3, dtype))


@pytest.mark.parametrize("layout_dtype,wrong", [(F32, F64), (F64, F32), (F64, np.int64)])
def test_wrong_element_type_is_type_error_not_reinterpreted(layout_dtype, wrong):
    b, opt = one_rank(dtype=layout_dtype)
    with b, opt:
        msg = f"holds {np.dtype(wrong)} elements, the parameters are {np.dtype(layout_dtype)}"
        with pytest.raises(TypeError, match=msg):
            opt.set_parameters(np.ones(9, wrong))
        with pytest.raises(TypeError, match=msg):
            opt.get_parameters(out=np.zeros(9, wrong))
        opt.set_parameters([1.5] * 9)  # a list is converted by value
        assert np.all(opt.get_parameters() == 1.5)
    with so.InMemoryCommunicationBackend(0, 1, f"wrong-{uuid.uuid4()}") as b:
        with pytest.raises(TypeError, match="initial holds"):
            so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                            layout=so.ParameterLayout(layout_dtype).add("w", 9), initial=np.ones(9, wrong))


def test_negative_or_bad_tensor_count_is_caught_when_added():
    with pytest.raises(ValueError, match="tensor 'w': count must be >= 1 \\(got -5\\)"):
        so.ParameterLayout().add("w", -5)
    with pytest.raises(TypeError, match="count must be an integer"):
        so.ParameterLayout().add("w", 2.5)
    with pytest.raises(ValueError, match="name must not be empty"):  # the library's check
        so.ParameterLayout().add("", 3)
    with pytest.raises(ValueError, match="float32 or float64"):
        so.ParameterLayout(np.int32)


def test_collective_buffers_are_checked():
    def rank(b):
        with pytest.raises(TypeError, match="must be a numpy array"):
            b.all_reduce([1.0, 2.0])
        with pytest.raises(ValueError, match="unsupported dtype"):
            b.all_reduce(np.ones(2, np.complex128))
        with pytest.raises(ValueError, match="writable C-contiguous"):
            b.all_reduce(np.ones(4)[::2])
        with pytest.raises(ValueError, match="multiple of the world size"):
            b.reduce_scatter(np.ones(3))
        with pytest.raises(ValueError, match="count must be >= 0"):
            b.receive(0, -1)
        return True
    results, errors = run_ranks(2, rank)
    assert errors == [None, None] and results == [True, True]


# ------------------------------------------------------------------ 2. views after close
def test_views_after_close_raise_object_disposed_error():
    b, opt = one_rank(so.DDPOptimizer)
    with b:
        params, grad, tparams = opt.parameters, opt.bucket_grad(0), opt.tensor_parameters(0)
        tgrad = opt.tensor_grad(0)
        part = params[2:5]           # a slice is a view too
        params[:] = 1.0
        assert float(np.sum(part)) == 3.0
        opt.close()
        for view in (params, grad, tparams, tgrad, part):
            for use in (lambda v: v[0], lambda v: v.__setitem__(0, 1.0), lambda v: v + 1, lambda v: np.sum(v),
                        lambda v: v.sum(), lambda v: repr(v), lambda v: v.tolist(), lambda v: v * 2,
                        lambda v: v.copy(), lambda v: len(v)):
                with pytest.raises(so.ObjectDisposedError, match="DDPOptimizer was closed"):
                    use(view)
        # the closed optimizer names what happened (not "pass layout=")
        with pytest.raises(so.ObjectDisposedError, match="the DDPOptimizer was closed"):
            opt.get_parameters()
        with pytest.raises(so.ObjectDisposedError):
            opt.step()
        assert isinstance(so.ObjectDisposedError("x"), ValueError)
    with pytest.raises(so.ObjectDisposedError, match="InMemoryCommunicationBackend was closed"):
        b.barrier()


def test_gathered_unit_view_is_invalid_after_release():
    b, opt = one_rank(so.FSDPOptimizer)
    with b, opt:
        view = opt.gather(0)
        assert float(view[0]) == 0.0
        opt.release(0)
        with pytest.raises(so.ObjectDisposedError, match="unit 0 was released"):
            view[0]


def test_kept_views_never_crash_the_process():
    """What used to segfault (exit 139): views used after close, after the model callback and after
    the optimizer was garbage collected, in a child process."""
    code = """
        import gc, numpy as np, shardopt as so
        kept = []
        for i in range(50):
            b = so.InMemoryCommunicationBackend(0, 1, "crash")
            opt = so.ZeRO2Optimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                                    layout=so.ParameterLayout(np.float64).add("w", 100000))
            g, p = opt.tensor_grad(0), opt.parameters
            raw = np.asarray(p)            # an unguarded view taken while it was valid
            def model(params, grad, samples):
                kept.append((params, grad))
                grad[:] = 1.0
                return 1.0
            opt.optimize(model, so.OptimizationInputData(num_samples=4))
            opt.close(); b.close(); del opt; gc.collect()
            for v in (g, p):
                try:
                    v[:] = 7.0
                    raise SystemExit("no error")
                except so.ObjectDisposedError:
                    pass
            raw[:] = 3.0                   # memory is still owned (by the view): no corruption
            for params, grad in kept:
                grad[:] = 5.0              # arrays owned by Python, not library memory
            del g, p, raw
            gc.collect()
        print("alive")
    """
    rc, out = run_python(code)
    assert rc == 0 and "alive" in out, out


# ------------------------------------------------------------------ 3. ranks that disagree
def test_layouts_that_differ_fail_on_every_rank_naming_the_first_difference():
    def rank(b):
        lay = so.ParameterLayout().add("w1", 8).add("w2" if b.rank != 2 else "w3", 8)  # same padded size
        so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b), layout=lay)
    _, errors = run_ranks(4, rank)
    for e in errors:
        assert isinstance(e, RuntimeError), errors
        assert "SHARDOPT_ERR_MISMATCH" in str(e) and "ranks disagree on the parameter layout at tensor 1" in str(e)
        assert "name" in str(e)


def test_options_that_differ_fail_on_every_rank():
    def rank(b):
        cfg = so.ShardingConfiguration(b)
        cfg.gradient_accumulation_steps = 2 if b.rank == 1 else 1
        so.DDPOptimizer(so.AdamOptimizer(), cfg, layout=so.ParameterLayout().add("w", 8))
    _, errors = run_ranks(2, rank)
    for e in errors:
        assert isinstance(e, RuntimeError) and "SHARDOPT_ERR_MISMATCH" in str(e), errors
        assert "gradient_accumulation_steps" in str(e)


@pytest.mark.parametrize("broadcast", [True, False])
def test_initial_parameters_are_rank_zeros_unless_kept_local(broadcast):
    def rank(b):
        cfg = so.ShardingConfiguration(b)
        cfg.broadcast_initial_parameters = broadcast
        with so.DDPOptimizer(so.AdamOptimizer(), cfg, layout=so.ParameterLayout(F64).add("w", 5),
                             initial=np.full(5, float(b.rank + 1))) as opt:
            return opt.get_parameters()
    results, errors = run_ranks(3, rank)
    assert errors == [None] * 3
    for r, p in enumerate(results):
        assert np.all(p == (1.0 if broadcast else r + 1.0))


def test_world_size_that_differs_in_memory_is_value_error():
    env = f"ws-{uuid.uuid4()}"
    a = so.InMemoryCommunicationBackend(0, 2, env)
    with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
        so.InMemoryCommunicationBackend(1, 3, env)
    a.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_world_size_that_differs_over_ucx_fails_at_rendezvous_naming_both():
    port = free_port()
    code = "import shardopt as so\nso.UcxCommunicationBackend()\nprint('joined')"
    procs = []
    for rank, world in ((0, 2), (1, 3)):
        env = dict(os.environ, SHARDOPT_RANK=str(rank), SHARDOPT_WORLD_SIZE=str(world), SHARDOPT_MASTER_ADDR="127.0.0.1",
                   SHARDOPT_MASTER_PORT=str(port), SHARDOPT_JOB_TOKEN="py-ws", SHARDOPT_TIMEOUT_MS="8000")
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=40)
        assert p.returncode != 0 and "joined" not in out, out
        assert "world size disagrees across ranks" in out and "world size 3" in out and "has 2" in out, out
        assert "Segmentation" not in out


def test_ucx_backend_without_environment_raises_unless_single_process():
    rc, out = run_python("""
        import shardopt as so
        try:
            so.UcxCommunicationBackend()
            print("no error")
        except ValueError as e:
            print("ValueError", e)
        with so.UcxCommunicationBackend(single_process=True) as b:
            print("single", b.rank, b.world_size)
    """, env={})
    assert rc == 0, out
    assert "ValueError SHARDOPT_ERR_INVALID_ARGUMENT" in out and "found no world size in the environment" in out, out
    assert "single 0 1" in out, out


def test_model_exception_fails_every_rank_naming_rank_and_message():
    class DataError(Exception):
        pass

    def rank(b):
        with so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(b),
                             layout=so.ParameterLayout().add("w", 4)) as opt:
            def model(p, g, s):
                if b.rank == 2:
                    raise DataError("bad row 17")
                return 1.0
            opt.optimize(model, so.OptimizationInputData(num_samples=16))
    _, errors = run_ranks(4, rank)
    assert isinstance(errors[2], DataError) and "bad row 17" in str(errors[2])
    assert any("rank 2" in n for n in getattr(errors[2], "__notes__", []))
    for r in (0, 1, 3):
        e = errors[r]
        assert isinstance(e, RuntimeError), errors
        assert "SHARDOPT_ERR_INVALID_STATE" in str(e) and "on rank 2" in str(e), str(e)
        assert "DataError: bad row 17" in str(e), str(e)


@pytest.mark.parametrize("first_nan", [1, 3])
def test_nan_loss_is_reported_on_every_rank(first_nan):
    """The library's message names the epoch and step where the NaN first appeared (one step an epoch here)."""
    def rank(b):
        calls = []
        with so.DDPOptimizer(so.AdamOptimizer(max_iterations=5), so.ShardingConfiguration(b),
                             layout=so.ParameterLayout().add("w", 4)) as opt:
            def model(p, g, s):
                calls.append(s)
                return math.nan if b.rank == 1 and len(calls) >= first_nan else 0.5
            opt.optimize(model, so.OptimizationInputData(num_samples=8))
    _, errors = run_ranks(2, rank)
    for e in errors:
        assert isinstance(e, so.InvalidStateError) and isinstance(e, RuntimeError), errors
        assert f"the training loss is NaN at epoch {first_nan}, step {first_nan}" in str(e), errors


# ------------------------------------------------------------------ issue 32: a rank that leaves, threads
@pytest.mark.parametrize("how", ["closes its backend", "raises before optimize"])
def test_a_rank_that_leaves_fails_the_others_at_once_naming_it(how):
    """A rank whose InMemoryCommunicationBackend is closed, or whose thread raises before optimize() (its
    `with` blocks close the optimizer and the backend), fails the other ranks at once with PeerLostError
    naming it: well under the backend's default timeout (5 minutes), which nothing here shortens."""
    env, errors = f"lost-{uuid.uuid4()}", [None] * 3

    def body(rank):
        try:
            with so.InMemoryCommunicationBackend(rank, 3, env) as b:
                if rank == 2 and how == "closes its backend":
                    return  # before the collective creation of the optimizer
                with so.DDPOptimizer(so.AdamOptimizer(max_iterations=2), so.ShardingConfiguration(b),
                                     layout=so.ParameterLayout().add("w", 4)) as opt:
                    if rank == 2:
                        raise KeyError("rank 2 found no data")
                    opt.optimize(lambda p, g, s: 1.0, so.OptimizationInputData(num_samples=16))
        except BaseException as e:  # noqa: BLE001
            errors[rank] = e
    start = time.monotonic()
    threads = [threading.Thread(target=body, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert time.monotonic() - start < 20 and not any(t.is_alive() for t in threads)
    for r in (0, 1):
        e = errors[r]
        assert isinstance(e, so.PeerLostError) and isinstance(e, RuntimeError), errors
        assert str(e).startswith("SHARDOPT_ERR_PEER_LOST: ") and "rank 2 was lost" in str(e), str(e)
        assert e.status == so.native.SHARDOPT_ERR_PEER_LOST and e.rank == r
    assert (errors[2] is None) if how == "closes its backend" else isinstance(errors[2], KeyError)


def test_an_optimizer_used_while_it_trains_is_a_clear_error():
    """From its own model callback, or from another thread while optimize() runs: InvalidStateError saying so."""
    seen = []

    def rank(b):
        with so.DDPOptimizer(so.AdamOptimizer(max_iterations=1), so.ShardingConfiguration(b),
                             layout=so.ParameterLayout().add("w", 4)) as opt:
            def model(p, g, s):
                for call in (opt.zero_grad, lambda: threading_call(opt.zero_grad)):
                    try:
                        call()
                    except so.InvalidStateError as e:
                        seen.append(str(e))
                return 1.0
            opt.optimize(model, so.OptimizationInputData(num_samples=4))
            assert opt.learning_rate > 0  # usable again once optimize() returned

    def threading_call(fn):
        out = []
        t = threading.Thread(target=lambda: out.append(_raised(fn)))
        t.start()
        t.join()
        if out[0] is not None:
            raise out[0]
    _, errors = run_ranks(1, rank)
    assert errors == [None], errors
    assert "called from inside this optimizer's training loop" in seen[0], seen
    assert "called from another thread while this optimizer trains" in seen[1], seen


def _raised(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    return None
