"""shardopt.ckpt: checkpoints without a job, the C++ tool shardopt-ckpt from Python.

    python -m shardopt.ckpt inspect PATH [--verify]
    python -m shardopt.ckpt verify PATH
    python -m shardopt.ckpt convert SRC DST [--consolidated | --sharded] [--world-size N]
    python -m shardopt.ckpt export SRC PARAMS.safetensors [--state STATE.safetensors]

or inspect()/verify()/convert()/export() below. A thin module: the work (bounded memory, atomic
files, checksums) is the tool's, found as $SHARDOPT_CKPT, next to this package, or on PATH (it
installs with the library into bin/). Its failures raise CheckpointToolError with its message.
"""
import json
import os
import shutil
import subprocess
import sys

__all__ = ["CheckpointToolError", "tool", "inspect", "verify", "convert", "export", "main"]


class CheckpointToolError(RuntimeError):
    """shardopt-ckpt refused (status 1: the checkpoint is bad or unreadable; 2: a usage error)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def tool():
    """The shardopt-ckpt executable's path."""
    candidates = [os.environ.get("SHARDOPT_CKPT"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "shardopt-ckpt"),
                  shutil.which("shardopt-ckpt")]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise CheckpointToolError(2, "shardopt-ckpt not found: set SHARDOPT_CKPT, or put the tool (installed with "
                                 "the library into bin/) on PATH")


def _run(args):
    done = subprocess.run([tool()] + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if done.returncode != 0:
        raise CheckpointToolError(done.returncode, done.stderr.strip())
    return done.stdout


def inspect(path, verify=False):
    """The checkpoint at path (a directory or its manifest) as a dict; verify=True reads every
    segment, checks its checksum and adds each part's digest under "digests"."""
    return json.loads(_run(["inspect", path] + (["--verify"] if verify else [])))


def verify(path):
    """inspect(path, verify=True): raises CheckpointToolError when anything is wrong."""
    return inspect(path, verify=True)


def convert(src, dst, consolidated=True, world_size=None):
    """The checkpoint at src written into directory dst, consolidated or sharded, at world_size
    ranks (default: the source's)."""
    args = ["convert", src, dst, "--consolidated" if consolidated else "--sharded"]
    if world_size is not None:
        args += ["--world-size", int(world_size)]
    _run(args)


def export(src, params, state=None):
    """The parameters as the safetensors file params; with state, the optimizer state too (one
    tensor "<name>.<slot>" per parameter tensor and slot, torch.optim's slot names)."""
    _run(["export", src, params] + (["--state", state] if state else []))


def main(argv=None):
    """The tool's command line; its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return subprocess.call([tool()] + list(argv))
    except CheckpointToolError as e:
        print("shardopt.ckpt: " + str(e), file=sys.stderr)
        return e.status


if __name__ == "__main__":
    sys.exit(main())
