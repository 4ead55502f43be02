#!/usr/bin/env python3
"""The elastic launcher on one host (no namespaces, no root). Usage:
    elastic_local_test.py ELASTIC_TRAIN SHARDOPT_RUN CASE [STRATEGY [COMPRESSION]]

Cases:
  kill_rank     shardopt-run --elastic --min 2 --max 3 -n 3 trains the demo MLP (ZeRO-2 over Adam,
                a checkpoint every 10 steps); once rank 1 has passed step 40 the test SIGKILLs it.
                The launcher must retire that slot (not a survivor's), restart on 2 ranks from
                the last checkpoint, and finish: the resumed step is a checkpoint the first
                generation reached, and the final parameters equal, bit for bit, those of a
                reference run that trains 3 ranks to that step (saving there) and 2 ranks from it.
                STRATEGY (zero2) and COMPRESSION (none) choose what trains.
  join_replace  the coordinator runs 2 ranks (FSDP) and listens; mid-run an agent joins with one
                slot: it waits (the world stays 2) until rank 1 is killed, then replaces it (the
                next generation is rank 0 here and rank 1 on the agent). Reference: 2 ranks to the
                resumed step, 2 ranks from it.
  below_min     --min 3 with 3 ranks: the killed rank leaves 2, so the launcher gives up at once, saying
                so, with the killed rank's status (137), and starts no second generation.
kill_rank and join_replace print the recovery time: from the kill to the first step of the new
generation.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

TRAIN, RUN, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
STRATEGY = sys.argv[4] if len(sys.argv) > 4 else "zero2"
COMPRESSION = sys.argv[5] if len(sys.argv) > 5 else "none"
STEPS, EVERY = 160, 10
ENV = dict(os.environ, SHARDOPT_TIMEOUT_MS="5000")


class Job:
    """A launcher process whose output lines are collected as they come."""

    def __init__(self, args, env=None):
        self.lines = []
        self.lock = threading.Lock()
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or ENV,
                                  start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.p.stdout.readline, b""):
            with self.lock:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def text(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text(), re.M)
            if m:
                return m
            if self.p.poll() is not None:
                break
            time.sleep(0.01)
        fail(f"no line matching {pattern!r} within {timeout} s", self.text())

    def finish(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            fail(f"the job did not end within {timeout} s", self.text())
        time.sleep(0.05)
        return self.p.returncode


def fail(why, text=""):
    print(text)
    print(f"FAIL: {why}")
    sys.exit(1)


def expect(cond, why, text=""):
    if not cond:
        fail(why, text)


def train_args(strategy, *extra):
    return [TRAIN, "--steps", str(STEPS), "--every", str(EVERY), "--strategy", strategy, "--print-every", "10",
            "--compression", COMPRESSION, *extra]


def reference(tmp, strategy, first_world, second_world, switch_step):
    """An uninterrupted run that switches from first_world to second_world ranks at switch_step."""
    ckpt, out = os.path.join(tmp, "ref-ckpt"), os.path.join(tmp, "ref.bin")
    env = dict(ENV, SHARDOPT_CHECKPOINT_DIR=ckpt)
    for world, extra in ((first_world, ["--stop-at", str(switch_step)]), (second_world, ["--out", out])):
        r = subprocess.run([RUN, "-n", str(world), "--timeout", "60", "--", *train_args(strategy, *extra)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=90)
        text = r.stdout.decode(errors="replace")
        expect(r.returncode == 0, f"reference run on {world} ranks failed ({r.returncode})", text)
        if world == second_world and extra[0] == "--out":
            expect(f"RESUMED step {switch_step}" in text, f"the reference did not resume at {switch_step}", text)
    with open(out, "rb") as f:
        return f.read()


def check_recovery(job, killed_at, gen0_world, gen1_world, slot_line):
    text = job.text()
    expect(re.search(slot_line, text, re.M), f"the launcher did not retire the killed rank's slot ({slot_line})", text)
    m = re.search(r"^\[g1:0\] RESUMED step (\d+)$", text, re.M)
    expect(m, "generation 1 did not resume from a checkpoint", text)
    resumed = int(m.group(1))
    published = [int(x) for x in re.findall(r"^\[g0:0\] CHECKPOINT step (\d+)", text, re.M)]
    reached = max(int(x) for x in re.findall(r"^\[g0:\d+\] STEP (\d+)$", text, re.M))
    expect(published and resumed % EVERY == 0 and max(published) <= resumed <= reached,
           f"resumed at {resumed}: not the last checkpoint generation 0 completed (published {published}, "
           f"reached {reached})", text)
    expect(len(re.findall(r"^\[g0:\d+\] START rank \d+ world %d " % gen0_world, text, re.M)) == gen0_world,
           f"generation 0 did not run {gen0_world} ranks", text)
    firsts = re.findall(r"^\[g1:\d+\] FIRST_STEP step (\d+) world (\d+) wall ([0-9.]+)$", text, re.M)
    expect(len(firsts) == gen1_world and all(int(w) == gen1_world and int(s) == resumed + 1 for s, w, _ in firsts),
           f"generation 1 did not continue on {gen1_world} ranks from step {resumed}", text)
    expect(len(re.findall(r"^\[g1:\d+\] DONE step %d world %d" % (STEPS, gen1_world), text, re.M)) == gen1_world,
           "generation 1 did not finish", text)
    expect("[g2:" not in text, "a third generation ran", text)
    recovered = min(float(w) for _, _, w in firsts) - killed_at
    print(f"recovered in {recovered:.2f} s (kill -> first step on {gen1_world} ranks); lost "
          f"{reached - resumed} step(s) at most (resumed at {resumed}, generation 0 reached {reached})")
    return resumed


def kill_rank(job, rank, generation=0):
    m = job.wait_for(r"^\[g%d:%d\] START rank %d world \d+ pid (\d+)$" % (generation, rank, rank), 30)
    job.wait_for(r"^\[g%d:%d\] STEP 40$" % (generation, rank), 30)
    killed_at = time.time()
    os.kill(int(m.group(1)), signal.SIGKILL)
    return killed_at


def case_kill_rank(tmp):
    out = os.path.join(tmp, "elastic.bin")
    job = Job([RUN, "--elastic", "--min", "2", "--max", "3", "-n", "3", "--checkpoint-dir", os.path.join(tmp, "ckpt"),
               "--timeout", "60", "--", *train_args(STRATEGY, "--sleep-ms", "5", "--out", out)])
    killed_at = kill_rank(job, 1)
    code = job.finish(60)
    expect(code == 0, f"the elastic job failed ({code})", job.text())
    resumed = check_recovery(job, killed_at, 3, 2, r"^shardopt-run: slot 1 of this host \(rank 1\) is out of the job$")
    with open(out, "rb") as f:
        got = f.read()
    expect(got == reference(tmp, STRATEGY, 3, 2, resumed),
           f"final parameters differ from the reference run switching from 3 to 2 ranks at step {resumed}")
    print(f"PASS: rank 1 killed ({STRATEGY}, compression {COMPRESSION}); the job finished on 2 ranks, equal bit for "
          f"bit to the reference switch at {resumed}")


def case_join_replace(tmp):
    out = os.path.join(tmp, "elastic.bin")
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "t" + os.urandom(8).hex()
    control = ["--token", token, "--heartbeat", "0.2", "--heartbeat-timeout", "2"]
    job = Job([RUN, "--elastic", "--min", "2", "--max", "3", "-n", "2", "--listen", f"127.0.0.1:{port}", *control,
               "--checkpoint-dir", os.path.join(tmp, "ckpt"), "--timeout", "60", "--",
               *train_args("fsdp", "--sleep-ms", "5", "--out", out)])
    job.wait_for(r"^\[g0:1\] STEP 10$", 30)
    agent = Job([RUN, "--elastic", "--join", f"127.0.0.1:{port}", "-n", "1", *control, "--",
                 *train_args("fsdp", "--sleep-ms", "5")])
    job.wait_for(r"joined with 1 slot\(s\) \(it waits for the next restart\)$", 10)
    killed_at = kill_rank(job, 1)
    code = job.finish(60)
    agent_code = agent.finish(10)
    text = job.text() + "\n--- agent ---\n" + agent.text()
    expect(code == 0 and agent_code == 0, f"the elastic job failed (coordinator {code}, agent {agent_code})", text)
    expect("[g0:" not in agent.text(), "the agent ran ranks of generation 0 (it joined mid-run)", text)
    expect(re.search(r"^\[g1:1\] DONE step %d world 2" % STEPS, agent.text(), re.M),
           "the agent did not run rank 1 of generation 1", text)
    job.lines += agent.lines
    resumed = check_recovery(job, killed_at, 2, 2, r"^shardopt-run: slot 1 of this host \(rank 1\) is out of the job$")
    with open(out, "rb") as f:
        got = f.read()
    expect(got == reference(tmp, "fsdp", 2, 2, resumed),
           f"final parameters differ from the reference run resuming 2 ranks at step {resumed}")
    print(f"PASS: a host joined mid-run and waited; it replaced the killed rank; equal bit for bit to the reference")


def case_below_min(tmp):
    job = Job([RUN, "--elastic", "--min", "3", "--max", "3", "-n", "3", "--checkpoint-dir", os.path.join(tmp, "ckpt"),
               "--timeout", "60", "--", *train_args(STRATEGY, "--sleep-ms", "5")])
    kill_rank(job, 1)
    code = job.finish(30)
    text = job.text()
    expect(code == 137, f"exit code {code}, not 137 (the killed rank's)", text)
    expect(re.search(r"^shardopt-run: 2 slot\(s\) left, fewer than --min 3: giving up$", text, re.M),
           "the launcher did not say why it gave up", text)
    expect("[g1:" not in text, "a second generation ran", text)
    print("PASS: below --min the job fails at once, saying so")


def main():
    cases = {"kill_rank": case_kill_rank, "join_replace": case_join_replace, "below_min": case_below_min}
    tmp = tempfile.mkdtemp(prefix="shardopt-elastic-")
    try:
        cases[CASE](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
