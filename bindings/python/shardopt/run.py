"""Start N local ranks of a Python script (or any program) over UCX: the packaged launcher.

    python -m shardopt.run -n 4 script.py ARGS        # 4 processes of `python script.py ARGS`
    python -m shardopt.run -n 2 -m package.module ARGS
    python -m shardopt.run -n 2 --no-python -- ./prog ARGS
    shardopt-run -n 2 script.py                        # the same, as a console script

Options (before the script): -n/--nprocs N, --master-addr A, --master-port P, --timeout S,
--keep-going, --bind none|core, --no-python; --elastic with its options (--min, --max,
--checkpoint-dir, ...) restarts the job at another world size when ranks are lost (docs/elastic.md). Each rank gets SHARDOPT_RANK, SHARDOPT_WORLD_SIZE,
SHARDOPT_MASTER_ADDR/PORT, a fresh SHARDOPT_JOB_TOKEN and SHARDOPT_BACKEND=ucx, as with the
repository's tools/shardopt-run, whose code this runs (the wheel carries a copy of it).
A script (a path, or -m module) runs under this interpreter (sys.executable), so the ranks use
the same virtual environment as the launcher.
"""
import importlib.machinery
import importlib.util
import os
import sys

_VALUE_OPTIONS = {"-n", "--nprocs", "--master-addr", "--master-port", "--timeout", "--bind",
                  # --elastic (docs/elastic.md)
                  "--min", "--max", "--hosts", "--listen", "--join", "--token", "--checkpoint-dir", "--max-restarts",
                  "--join-timeout", "--heartbeat", "--heartbeat-timeout", "--settle", "--stop-timeout"}
_FLAG_OPTIONS = {"--keep-going", "--elastic"}


def _load_launcher():
    """The launcher module: the wheel's bundled copy, else tools/shardopt-run ($SHARDOPT_RUN or
    the repository this file sits in)."""
    try:
        from . import _shardopt_run  # copied from tools/shardopt-run when the wheel is built
        return _shardopt_run
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("SHARDOPT_RUN"), os.path.join(here, "..", "..", "..", "tools", "shardopt-run")):
        if path and os.path.isfile(path):
            loader = importlib.machinery.SourceFileLoader("_shardopt_run", path)
            spec = importlib.util.spec_from_loader("_shardopt_run", loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            return module
    raise ImportError("shardopt.run: the launcher is missing (install the shardopt wheel, or set SHARDOPT_RUN "
                      "to tools/shardopt-run)")


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
    argv = sys.argv[1:] if argv is None else list(argv)
    opts, cmd, _ = split_args(argv)
    if any(o in ("-h", "--help") for o in opts):
        print(__doc__)
        return 0
    launcher = _load_launcher()
    saved = sys.argv
    sys.argv = ["python -m shardopt.run"] + opts + ["--"] + cmd
    try:
        return launcher.main()
    finally:
        sys.argv = saved


if __name__ == "__main__":
    sys.exit(main())
