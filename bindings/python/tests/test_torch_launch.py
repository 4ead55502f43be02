"""shardopt.torch over UCX in separate processes: `python -m shardopt.run -n 2` and torchrun, each rank checking its
parameters against torch.optim.AdamW (torch_worker.py); and torchrun's elastic mode, a worker SIGKILLed and the group
restarted by torchrun, resuming from the elastic optimizer's checkpoint (torch_elastic_worker.py)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_worker.py")
ELASTIC_WORKER = os.path.join(HERE, "torch_elastic_worker.py")


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not found")
def test_torchrun_elastic_restart_resumes_from_checkpoint(tmp_path):
    """torchrun's elastic mode on one host: --nnodes=1:2 (one agent here; the range counts agents, each running
    --nproc-per-node workers, so on one host a restart is at the same size: 2) with c10d rendezvous and
    --max-restarts=1. Rank 1 SIGKILLs itself before step 14 of 20 on the first attempt; torchrun stops the group and
    starts it again (TORCHELASTIC_RESTART_COUNT 1), each rank resuming from the last published checkpoint (every 5
    steps). The final parameters equal, bit for bit (f64), those of a run that was not killed and stopped and
    resumed at the same checkpoint."""
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS="30000", OMP_NUM_THREADS="1")  # a lost peer fails within 30 s
    started = time.monotonic()
    killed = tmp_path / "killed"
    killed.mkdir()
    out = run([shutil.which("torchrun"), "--nnodes=1:2", "--nproc-per-node=2", "--max-restarts=1",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--rdzv-id=shardopt-elastic-test",
               "--rdzv-conf=last_call_timeout=1",  # else each round waits 30 s for a second agent
               "--local-addr=127.0.0.1", "--monitor-interval=0.1",
               ELASTIC_WORKER, str(tmp_path / "ckpt-killed"), str(killed), "20", "14"], env)
    elastic_s = time.monotonic() - started
    assert "exitcode: -9" in out, out[-4000:]  # the kill happened, and torchrun saw it
    # (by pattern, not by line: the two workers' prints may share a line of torchrun's output)
    done = re.findall(r"elastic ok rank (\d+) of 2 generation (\d+) resumed_step (-?\d+)", out)
    assert sorted(r for r, _, _ in done) == ["0", "1"] and all(g == "1" for _, g, _ in done), out[-4000:]
    resumed = {int(step) for _, _, step in done}
    assert len(resumed) == 1 and next(iter(resumed)) in (5, 10), out[-4000:]  # a checkpoint before the kill

    # the reference, without a kill: the same training saved at that step and loaded (a stop and a resume), on
    # in-memory ranks (the library's collectives give the same bits over UCX and in memory at a world size)
    from torch_cases import elastic_run, make_data, make_model
    template, data = make_model("mlp", torch.float64), make_data("mlp", torch.float64)
    step = next(iter(resumed))
    elastic_run(template, data, 2, tmp_path / "ckpt-reference", 20, stop_after=step)
    reference = elastic_run(template, data, 2, tmp_path / "ckpt-reference", 20)
    want = reference[0][3]
    assert reference[0][:2] == (step, step)
    for r in range(2):
        got = torch.load(killed / f"rank{r}.pt")
        assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want)), f"rank {r} differs"
    print(f"torchrun elastic: killed and resumed at step {resumed} in {elastic_s:.1f} s")


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun not found")
def test_torchrun_elastic_agent_lost_resumes_at_the_smaller_size(tmp_path):
    """Two torchrun agents on this host stand for two hosts (--nnodes=1:2, one worker each, c10d rendezvous on the
    first): the second agent's worker SIGKILLs its agent and itself before step 14 of the first attempt (a host
    lost). The first agent's worker fails (peer lost), its agent restarts it in a group of one, and it resumes from
    the checkpoint saved at 2 ranks, resharded to 1. Its parameters equal, bit for bit (f64), those of a run stopped
    at that checkpoint at 2 ranks and resumed at 1."""
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS="30000", OMP_NUM_THREADS="1")
    # the last call waits for the second agent to join the first round (then the round completes at once): 30 s,
    # room for a slow import of torch on a loaded machine; a restart with one agent waits it out
    args = [shutil.which("torchrun"), "--nnodes=1:2", "--nproc-per-node=1", "--max-restarts=1",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--rdzv-id=shardopt-agent-lost",
            "--rdzv-conf=last_call_timeout=30", "--local-addr=127.0.0.1", "--monitor-interval=0.1",
            ELASTIC_WORKER, str(tmp_path / "ckpt"), str(tmp_path), "20", "14"]
    started = time.monotonic()
    agents = []
    try:  # each agent in a session of its own, so whatever is left of it goes in the end
        agents.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       start_new_session=True))
        time.sleep(1)  # the first agent hosts the rendezvous store
        agents.append(subprocess.Popen(args, env=dict(env, KILL_AGENT="1"), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, start_new_session=True))
        outs = [a.communicate(timeout=200)[0] for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                os.killpg(a.pid, 9)
                a.wait(timeout=10)
    elapsed = time.monotonic() - started
    survivor, lost = outs
    assert agents[0].returncode == 0, survivor[-4000:]
    assert agents[1].returncode == -9, lost[-4000:]  # the agent was killed
    assert "elastic start rank" in lost and " of 2 generation 0" in lost, lost[-4000:]  # both formed the first group
    done = [line for line in survivor.splitlines() if "elastic ok" in line]
    assert len(done) == 1 and "rank 0 of 1 generation 1" in done[0], survivor[-4000:]
    step = int(done[0].split("resumed_step ")[1].split()[0])
    assert step in (5, 10), survivor[-4000:]

    from torch_cases import elastic_run, make_data, make_model
    template, data = make_model("mlp", torch.float64), make_data("mlp", torch.float64)
    elastic_run(template, data, 2, tmp_path / "ckpt-reference", 20, stop_after=step)
    reference = elastic_run(template, data, 1, tmp_path / "ckpt-reference", 20)
    assert reference[0][:2] == (step, step)
    got, want = torch.load(tmp_path / "rank0.pt"), reference[0][3]
    assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
    print(f"torchrun elastic, an agent lost: 2 -> 1 ranks, resumed at step {step} in {elapsed:.1f} s")
