"""Start N local ranks of a Python script (or any program) over UCX: the packaged launcher.

    python -m shardopt.run -n 4 script.py ARGS        # 4 processes of `python script.py ARGS`
    python -m shardopt.run -n 2 -m package.module ARGS
    python -m shardopt.run -n 2 --no-python -- ./prog ARGS
    shardopt-run -n 2 script.py                        # the same, as a console script

Options (before the script): -n/--nprocs N, --master-addr A, --master-port P, --timeout S,
--keep-going, --bind none|core, --no-python; --elastic with its options (--min, --max,
--checkpoint-dir, ...) restarts the job at another world size when ranks are lost (docs/elastic.md,
shardopt.elastic_agent). Each rank gets SHARDOPT_RANK, SHARDOPT_WORLD_SIZE,
SHARDOPT_MASTER_ADDR/PORT, a fresh SHARDOPT_JOB_TOKEN and SHARDOPT_BACKEND=ucx, as with the
repository's tools/shardopt-run, a thin entry to launch() here.
A script (a path, or -m module) runs under this interpreter (sys.executable), so the ranks use
the same virtual environment as the launcher.
"""
import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from . import elastic_agent

# launch()'s own description (shardopt-run -h).
_LAUNCHER_DOC = """shardopt-run: start N local ranks of a shardopt program.

    shardopt-run -n N [--master-addr A] [--master-port P] [--timeout S] [--keep-going]
                 [--bind none|core] -- PROGRAM ARGS

Each rank gets SHARDOPT_RANK, SHARDOPT_WORLD_SIZE, SHARDOPT_LOCAL_RANK, SHARDOPT_LOCAL_WORLD_SIZE,
SHARDOPT_MASTER_ADDR, SHARDOPT_MASTER_PORT, SHARDOPT_JOB_TOKEN (fresh and random per job) and
SHARDOPT_BACKEND=ucx (unless already set). Every output line is prefixed with "[rank] ".
When a rank fails (non-zero exit or signal), the others are killed and shardopt-run exits
non-zero (the failing rank's exit code, 128+signal for a signal); --keep-going waits for all
ranks instead. --timeout S kills the whole job after S seconds (exit code 124).
--bind core pins rank i to the i-th CPU this launcher may use (round robin), as mpirun's
--bind-to core does: ranks that busy-poll then never lose their core to each other.

    shardopt-run --elastic --min N --max M -n L [--checkpoint-dir D] ... -- PROGRAM ARGS

restarts the job with the ranks left when one dies or a host is cut off, at a world size from N
to M, each rank resuming from the last checkpoint (ElasticOptimizer); across hosts, an agent
(--elastic --join) on each other host. See shardopt.elastic_agent and docs/elastic.md.
"""

_VALUE_OPTIONS = {"-n", "--nprocs", "--master-addr", "--master-port", "--timeout", "--bind",
                  # --elastic (docs/elastic.md)
                  "--min", "--max", "--hosts", "--listen", "--join", "--token", "--checkpoint-dir", "--max-restarts",
                  "--join-timeout", "--heartbeat", "--heartbeat-timeout", "--settle", "--stop-timeout"}
_FLAG_OPTIONS = {"--keep-going", "--elastic"}


free_port = elastic_agent.free_port


def pump(rank, stream, out, lock):
    prefix = f"[{rank}] ".encode()
    for line in iter(stream.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def launch(argv=None):
    """The launcher: shardopt-run -n N [options] -- PROGRAM ARGS (argv: sys.argv[1:] when None), as
    tools/shardopt-run runs it. Returns the exit status."""
    ap = argparse.ArgumentParser(prog="shardopt-run", description=_LAUNCHER_DOC.split("\n")[0])
    ap.add_argument("-n", "--nprocs", type=int, required=True, help="number of ranks to start")
    ap.add_argument("--master-addr", default=None, help="rendezvous address (default 127.0.0.1)")
    ap.add_argument("--master-port", type=int, default=0, help="rendezvous port (default: a free one)")
    ap.add_argument("--timeout", type=float, default=0, help="kill the job after this many seconds")
    ap.add_argument("--keep-going", action="store_true", help="do not kill other ranks when one fails")
    ap.add_argument("--bind", choices=["none", "core"], default="none",
                    help="pin each rank to one CPU (core) or leave placement to the kernel (none)")
    elastic_agent.add_arguments(ap)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no program given (shardopt-run -n N -- PROGRAM ARGS)")
    if args.elastic:
        return elastic_agent.main(args, cmd)
    if args.nprocs < 1:
        ap.error("-n must be at least 1")
    args.master_addr = args.master_addr or "127.0.0.1"
    port = args.master_port or free_port(args.master_addr)
    token = secrets.token_hex(16)

    cpus = sorted(os.sched_getaffinity(0))
    out = sys.stdout.buffer
    lock = threading.Lock()
    procs, pumps = [], []
    for rank in range(args.nprocs):
        env = dict(os.environ)
        env.update({
            "SHARDOPT_RANK": str(rank),
            "SHARDOPT_WORLD_SIZE": str(args.nprocs),
            "SHARDOPT_LOCAL_RANK": str(rank),
            "SHARDOPT_LOCAL_WORLD_SIZE": str(args.nprocs),
            "SHARDOPT_MASTER_ADDR": args.master_addr,
            "SHARDOPT_MASTER_PORT": str(port),
            "SHARDOPT_JOB_TOKEN": token,
        })
        env.setdefault("SHARDOPT_BACKEND", "ucx")
        pin = None
        if args.bind == "core":
            cpu = cpus[rank % len(cpus)]
            pin = lambda cpu=cpu: os.sched_setaffinity(0, {cpu})  # in the child, before exec
        try:
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=pin)
        except OSError as e:
            print(f"shardopt-run: cannot start {cmd[0]}: {e}", file=sys.stderr)
            for q in procs:
                q.kill()
            return 127
        procs.append(p)
        t = threading.Thread(target=pump, args=(rank, p.stdout, out, lock), daemon=True)
        t.start()
        pumps.append(t)

    def kill_all(sig=signal.SIGKILL):
        for q in procs:
            if q.poll() is None:
                try:
                    os.killpg(q.pid, sig)
                    # A stopped rank (SIGSTOP, a debugger detached) acts on any signal but
                    # SIGKILL only once continued: continue it, or it would be waited on for ever.
                    if sig != signal.SIGKILL:
                        os.killpg(q.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum
        kill_all(signal.SIGTERM)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
    first_failure = None
    codes = [None] * len(procs)
    while any(c is None for c in codes):
        for i, p in enumerate(procs):
            if codes[i] is None and p.poll() is not None:
                codes[i] = p.returncode
                if p.returncode != 0 and first_failure is None:
                    first_failure = i
                    how = (f"killed by signal {-p.returncode}" if p.returncode < 0
                           else f"exited with code {p.returncode}")
                    with lock:
                        print(f"shardopt-run: rank {i} {how}" +
                              ("" if args.keep_going else "; stopping the other ranks"),
                              file=sys.stderr, flush=True)
                    if not args.keep_going:
                        kill_all()
        if deadline is not None and time.monotonic() > deadline:
            with lock:
                print(f"shardopt-run: job timed out after {args.timeout:g} s; killing all ranks",
                      file=sys.stderr, flush=True)
            kill_all()
            for p in procs:
                p.wait()
            for t in pumps:
                t.join(timeout=2)
            return 124
        time.sleep(0.02)
    for t in pumps:
        t.join(timeout=5)
    if stop["signal"] is not None:
        return 128 + stop["signal"]
    if first_failure is not None:
        c = codes[first_failure]
        return 128 - c if c < 0 else c
    return 0


def split_args(argv):
    """(launcher options, program command, run under python?) from python -m shardopt.run's argv."""
    opts, python = [], True
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "--no-python":
            python = False
        elif a in ("-h", "--help") or a in _FLAG_OPTIONS:
            opts.append(a)
        elif a in _VALUE_OPTIONS:
            opts += argv[i:i + 2]
            i += 1
        elif a.startswith("--") and a.split("=", 1)[0] in _VALUE_OPTIONS:
            opts.append(a)
        elif a.startswith("-n") and a[2:].isdigit():
            opts.append(a)
        else:
            break  # the script (or -m) starts here
        i += 1
    cmd = argv[i:]
    if python and cmd:
        cmd = [sys.executable] + cmd
    return opts, cmd, python


def main(argv=None):
    """python -m shardopt.run / the shardopt-run console script: a script runs under this Python."""
    argv = sys.argv[1:] if argv is None else list(argv)
    opts, cmd, _ = split_args(argv)
    if any(o in ("-h", "--help") for o in opts):
        print(__doc__)
        return 0
    return launch(opts + ["--"] + cmd)


if __name__ == "__main__":
    sys.exit(main())
