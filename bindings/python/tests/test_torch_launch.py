"""shardopt.torch over UCX in separate processes: `python -m shardopt.run -n 2` and torchrun (non-elastic), each
rank checking its parameters against torch.optim.AdamW (torch_worker.py)."""
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_worker.py")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    return out


def test_shardopt_run_two_processes():
    out = run([sys.executable, "-m", "shardopt.run", "-n", "2", "--timeout", "200", WORKER, "zero2"])
    assert out.count("torch ok") == 2, out


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not found")
def test_torchrun_two_processes():
    """torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR; MASTER_PORT is its agent's store, so rank 0 publishes
    the library's rendezvous port there)."""
    out = run([shutil.which("torchrun"), "--standalone", "--nproc-per-node=2", WORKER, "fsdp"])
    assert out.count("torch ok") == 2, out
