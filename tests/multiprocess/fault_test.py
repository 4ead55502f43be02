#!/usr/bin/env python3
"""Fault tests for the UCX backend and its bootstrap. Usage: fault_test.py FAULT_MAIN SHARDOPT_RUN CASE

Cases:
  peer_kill       4 ranks loop allreduces; rank 2 SIGKILLs itself; the 3 survivors must fail with
                  peer_lost naming rank 2, within the communicator timeout (10 s).
  peer_kill_root  the same with rank 0 (the liveness hub) as the victim.
  peer_exit       rank 2 closes its communicator cleanly (and stays alive): the others fail at once
                  with peer_lost naming rank 2 as having left the job, instead of timing out.
  wrong_token     rank 1 joins with another job token: refused at once with a clear error; rank 0
                  times out naming the missing rank and the refused join.
  unreachable     no master listening: error within the bootstrap timeout (1.5 s), naming it.
  port_in_use     the rendezvous port is taken: rank 0 fails at once saying so.
  world_size      rank 1 believes in another world size: both fail saying so.
  duplicate_rank  two processes claim rank 1: the rendezvous fails saying so.
  kill_random     20 times: 4 ranks train ZeRO-2; a random rank is SIGKILLed at a random step and
                  delay (often mid-collective); the 3 survivors fail naming it, within the timeout.
                  The job saves a sharded checkpoint every 3 steps; after each kill, the last
                  one that completed loads into a fresh 4-rank job and matches the closed form
                  at its step.
  kill_consolidated_save, kill_consolidated_save_root, kill_consolidated_save_rank0_writer
                  4 ranks train ZeRO-2 and save a consolidated checkpoint every 3 steps; rank 2
                  (_root: rank 0, which creates and publishes the files; _rank0_writer: rank 1,
                  streaming its pieces to rank 0, SHARDOPT_CHECKPOINT_WRITER=rank0) SIGKILLs itself
                  inside the 3rd save, its part written, nothing published. The survivors fail
                  naming it; the directory still holds the 2nd save (step 6), which loads into a
                  fresh job at the closed form. The interrupted save's temporary files went (rank
                  0 removed them) or, rank 0 killed, stay until the next save clears them.
  sigstop         a rank is SIGSTOPped for 2 s (timeout 8 s) then SIGCONTed: training completes
                  with the right parameters on every rank.
  rogue_client    while 4 ranks assemble, a rogue client sends garbage, an oversized frame, an
                  unknown protocol version and a wrong token: each refused, the job trains fine.
  silent_client   clients connect to the master and say nothing (or half a frame) before the
                  ranks join: the job still assembles at once, not after the silent ones time out.
  stall_*         a rank is SIGSTOPped (alive, not dead) at a fixed point inside a one-host
                  collective by the test hook SHARDOPT_TEST_STOP_AT (src/comm/ucx/test_hook.hpp),
                  set in that rank only; timeout 2 s. The survivors must fail with timeout naming
                  it, within the timeout plus 1 s, and nothing may write into their buffers after
                  they left. Then they exit non-zero and shardopt-run must kill the stopped rank.
    stall_shm               1 KiB allreduces (the arena): rank 2 stops in #3 after publishing its
                            input; the others finish #3 and time out in #4 ("never arrived: 2").
    stall_cma_allreduce     64 MiB allreduces (process_vm_readv/writev): rank 1 stops in #2 after
                            its first copy; the others time out waiting for it to finish ("rank 1
                            made no progress").
    stall_cma_reduce_scatter, stall_cma_allgather   the same with 16 MiB per rank.
    stall_cma_resume        as stall_cma_allreduce, but once the others have failed the test
                            SIGCONTs rank 1: it must fail (it was given up on) instead of writing
                            into the others' outputs, which they keep and check.
    stall_attach            rank 0 stops while creating the communicator, after offering the
                            shared-memory arena (its name) and before the vote: the others time
                            out naming rank 0 and remove the name, so no /dev/shm/shardopt-* file
                            is left although rank 0 never gets to.
    stall_attach_kill       the same with rank 0 SIGKILLed there: the others fail with peer_lost.
"""
import queue
import random
import re
import shutil
import signal
import struct
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

FAULT_MAIN, SHARDOPT_RUN, CASE = sys.argv[1], sys.argv[2], sys.argv[3]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(rank, world, port, token="t0k3n", timeout_ms=3000, extra=None):
    env = dict(os.environ)
    env.update({"SHARDOPT_RANK": str(rank), "SHARDOPT_WORLD_SIZE": str(world),
                "SHARDOPT_MASTER_ADDR": "127.0.0.1", "SHARDOPT_MASTER_PORT": str(port),
                "SHARDOPT_JOB_TOKEN": token, "SHARDOPT_TIMEOUT_MS": str(timeout_ms)})
    env.update(extra or {})
    return subprocess.Popen([FAULT_MAIN, "join"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(p, limit=30):
    out, _ = p.communicate(timeout=limit)
    return p.returncode, out


def expect(cond, what, out=""):
    if not cond:
        print(f"FAIL: {what}\n--- output ---\n{out}")
        sys.exit(1)


def case_peer_kill(victim=2):
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS="10000")
    t0 = time.monotonic()
    p = subprocess.run([SHARDOPT_RUN, "-n", "4", "--keep-going", "--timeout", "60", "--", FAULT_MAIN,
                        "peer-kill", str(victim)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=90)
    took = time.monotonic() - t0
    out = p.stdout
    print(out)
    oks = [l for l in out.splitlines() if "] OK " in l]
    expect(len(oks) == 3, f"3 survivors report peer_lost naming rank {victim} (got {len(oks)})", out)
    expect(f"rank {victim} killed by signal 9" in out, "the victim died by SIGKILL", out)
    expect(took < 30, f"job ended promptly ({took:.1f} s)", out)


def case_peer_kill_root():
    case_peer_kill(0)


def case_peer_exit():
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS="30000")
    p = subprocess.run([SHARDOPT_RUN, "-n", "4", "--keep-going", "--timeout", "60", "--", FAULT_MAIN,
                        "peer-exit", "2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=90)
    out = p.stdout
    print(out)
    oks = [l for l in out.splitlines() if "] OK " in l]
    expect(len(oks) == 3 and all("left the job" in l for l in oks),
           f"3 survivors report peer_lost naming rank 2 as having left (got {len(oks)})", out)
    expect("[2] LEFT" in out and p.returncode == 0, "rank 2 left cleanly and every rank exited 0", out)


def case_wrong_token():
    port = free_port()
    r0 = spawn(0, 2, port, token="right", timeout_ms=3000)
    time.sleep(0.2)
    t0 = time.monotonic()
    r1 = spawn(1, 2, port, token="wrong", timeout_ms=3000)
    c1, o1 = finish(r1)
    took = time.monotonic() - t0
    c0, o0 = finish(r0)
    print(o1, o0)
    expect(c1 == 3 and "wrong job token" in o1 and "refused" in o1, "rank 1 refused for its token", o1)
    expect(took < 2.5, f"refusal is immediate ({took:.1f} s)", o1)
    expect(c0 == 3 and "ERROR timeout" in o0 and "never joined: 1" in o0 and "wrong job token" in o0,
           "rank 0 times out naming rank 1 and the refused join", o0)


def case_unreachable():
    port = free_port()  # nobody listens there
    t0 = time.monotonic()
    c, o = finish(spawn(1, 2, port, timeout_ms=1500))
    took = time.monotonic() - t0
    print(o)
    expect(c == 3 and "ERROR timeout" in o and "unreachable" in o and str(port) in o,
           "unreachable master reported as a timeout naming it", o)
    expect(1.4 < took < 6, f"gave up after about the timeout ({took:.1f} s)", o)


def case_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        c, o = finish(spawn(0, 2, port, timeout_ms=3000))
    print(o)
    expect(c == 3 and "already in use" in o, "port in use reported", o)


def case_world_size():
    port = free_port()
    r0 = spawn(0, 2, port)
    time.sleep(0.2)
    r1 = spawn(1, 3, port)
    c1, o1 = finish(r1)
    c0, o0 = finish(r0)
    print(o0, o1)
    for c, o in ((c0, o0), (c1, o1)):
        expect(c == 3 and "world size disagrees" in o, "world size disagreement reported on both", o)


def case_duplicate_rank():
    port = free_port()
    procs = [spawn(0, 3, port)]
    time.sleep(0.2)
    procs.append(spawn(1, 3, port))
    time.sleep(0.3)
    procs.append(spawn(1, 3, port))
    results = [finish(p) for p in procs]
    for c, o in results:
        print(o)
    expect(all(c == 3 and "joined twice" in o for c, o in results), "duplicate rank reported everywhere",
           "\n".join(o for _, o in results))


def case_kill_random():
    seed = int(os.environ.get("SHARDOPT_FAULT_SEED", str(int(time.time()))))
    rng = random.Random(seed)
    runs = int(os.environ.get("SHARDOPT_FAULT_RUNS", "20"))
    timeout_ms = 5000
    steps = 25
    print(f"seed {seed}: {runs} kills, timeout {timeout_ms} ms")
    t_all = time.monotonic()
    for i in range(runs):
        victim, step, delay_us = rng.randrange(4), rng.randrange(steps), rng.randrange(0, 3000)
        ckpt = tempfile.mkdtemp(prefix="shardopt-fault-ckpt-")
        env = dict(os.environ, SHARDOPT_TIMEOUT_MS=str(timeout_ms), SHARDOPT_FAULT_CHECKPOINT_DIR=ckpt)
        t0 = time.monotonic()
        p = subprocess.run([SHARDOPT_RUN, "-n", "4", "--keep-going", "--timeout", "40", "--", FAULT_MAIN, "train",
                            str(steps), str(victim), str(step), str(delay_us)], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        took = time.monotonic() - t0
        out = p.stdout
        lost = [l for l in out.splitlines() if "] LOST " in l]
        what = f"run {i} (seed {seed}): kill rank {victim} at step {step} +{delay_us} us"
        expect(len(lost) == 3, f"{what}: 3 survivors name the lost rank (got {len(lost)})", out)
        expect(f"rank {victim} killed by signal 9" in out, f"{what}: the victim died by SIGKILL", out)
        # Startup (~1 s) + the kill point + detection, which must be within the timeout.
        expect(took < 3 + timeout_ms / 1000, f"{what}: survivors failed within the timeout ({took:.1f} s)", out)
        # The manifest is written last: when it exists, a checkpoint completed before the kill.
        if os.path.exists(os.path.join(ckpt, "checkpoint.shardopt")):
            v = subprocess.run([SHARDOPT_RUN, "-n", "4", "--timeout", "40", "--", FAULT_MAIN, "verify-checkpoint", ckpt],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
            loaded = [l for l in v.stdout.splitlines() if "] CHECKPOINT " in l]
            expect(v.returncode == 0 and len(loaded) == 4, f"{what}: the last checkpoint loads", v.stdout)
            what += "; " + loaded[0].split("] ", 1)[1]
        shutil.rmtree(ckpt, ignore_errors=True)
        print(f"{what}: ok in {took:.1f} s; {lost[0][:160]}")
    print(f"{runs} kills in {time.monotonic() - t_all:.1f} s")


def kill_consolidated_save(victim, writer="every_rank"):
    ckpt = tempfile.mkdtemp(prefix="shardopt-fault-ckpt-")
    try:
        env = dict(os.environ, SHARDOPT_TIMEOUT_MS="5000", SHARDOPT_FAULT_CHECKPOINT_DIR=ckpt,
                   SHARDOPT_FAULT_CHECKPOINT_FORM="consolidated", SHARDOPT_CHECKPOINT_WRITER=writer)
        t0 = time.monotonic()
        p = subprocess.run([SHARDOPT_RUN, "-n", "4", "--keep-going", "--timeout", "40", "--", FAULT_MAIN, "train",
                            "12", str(victim), "save", "3"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
        took = time.monotonic() - t0
        out = p.stdout
        what = f"rank {victim} killed in the 3rd consolidated save ({writer})"
        lost = [l for l in out.splitlines() if "] LOST " in l]
        expect(len(lost) == 3, f"{what}: 3 survivors name the lost rank (got {len(lost)})", out)
        expect(f"rank {victim} killed by signal 9" in out, f"{what}: the victim died by SIGKILL", out)
        expect(took < 8 + 5, f"{what}: survivors failed within the timeout ({took:.1f} s)", out)
        # Rank 0 makes the files: alive, it removed them when the save failed; killed, they stay.
        names = sorted(os.listdir(ckpt))
        temporaries = [n for n in names if ".tmp." in n]
        expect(bool(temporaries) == (victim == 0),
               f"{what}: the interrupted save's temporary files {'stay' if victim == 0 else 'went'} ({names})", out)
        v = subprocess.run([SHARDOPT_RUN, "-n", "4", "--timeout", "40", "--", FAULT_MAIN, "verify-checkpoint", ckpt],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        loaded = [l for l in v.stdout.splitlines() if "] CHECKPOINT " in l]
        expect(v.returncode == 0 and len(loaded) == 4 and all(" step 6 " in l for l in loaded),
               f"{what}: the 2nd save (step 6) loads at the closed form", v.stdout)
        # A save after the interrupted one clears its debris.
        n = subprocess.run([SHARDOPT_RUN, "-n", "4", "--timeout", "40", "--", FAULT_MAIN, "train", "3"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        left = [f for f in os.listdir(ckpt) if ".tmp." in f]
        expect(n.returncode == 0 and not left, f"{what}: the next save leaves no temporary file ({left})", n.stdout)
        print(f"{what}: ok in {took:.1f} s; {lost[0][:160]}; left before the next save: {names}")
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def case_kill_consolidated_save():
    kill_consolidated_save(2)


def case_kill_consolidated_save_root():
    kill_consolidated_save(0)


def case_kill_consolidated_save_rank0_writer():
    kill_consolidated_save(1, "rank0")


def spawn_train(rank, world, port, args, token="t0k3n", timeout_ms=8000, extra=None):
    env = dict(os.environ)
    env.update({"SHARDOPT_RANK": str(rank), "SHARDOPT_WORLD_SIZE": str(world),
                "SHARDOPT_MASTER_ADDR": "127.0.0.1", "SHARDOPT_MASTER_PORT": str(port),
                "SHARDOPT_JOB_TOKEN": token, "SHARDOPT_TIMEOUT_MS": str(timeout_ms)})
    env.update(extra or {})
    return subprocess.Popen([FAULT_MAIN, "train"] + [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def case_sigstop():
    port = free_port()
    extra = {"SHARDOPT_FAULT_STEP_SLEEP_MS": "10"}
    procs = [spawn_train(r, 4, port, [200], extra=extra) for r in range(4)]
    try:
        time.sleep(1.0)
        procs[2].send_signal(signal.SIGSTOP)
        time.sleep(2.0)  # less than the 8 s timeout
        procs[2].send_signal(signal.SIGCONT)
        results = [finish(p, limit=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    outs = "\n".join(o for _, o in results)
    print(outs)
    expect(all(c == 0 and "TRAINED" in o for c, o in results), "every rank trained correctly after SIGCONT", outs)


def rogue(port, data, read_reply=True):
    """Connects, sends data, returns the refusal text the master sent back (or what happened)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with s:
        s.settimeout(8)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError as e:
            return f"send failed: {e}"
        reply = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except OSError as e:
            return f"recv failed: {e}"
    if len(reply) < 16:
        return f"closed ({len(reply)} bytes)"
    magic, version, ftype, length = struct.unpack("<IHHI", reply[:12])
    n = struct.unpack("<I", reply[12:16])[0]
    return f"type {ftype}: " + reply[16:16 + n].decode(errors="replace")


# Must match kProtocolVersion in src/comm/bootstrap/frame.hpp.
PROTOCOL_VERSION = 2


def header(ftype, length, version=PROTOCOL_VERSION):
    return struct.pack("<IHHI", 0x44524853, version, ftype, length)


def case_rogue_client():
    port = free_port()
    r0 = spawn_train(0, 4, port, [20])
    token = b"wrong-token"
    join = struct.pack("<II", 4, 1) + struct.pack("<I", len(token)) + token + struct.pack("<I", 0)
    replies = {
        # 12 bytes: the master reads a header's worth and refuses (more unread bytes would make
        # its close a reset, and the refusal could be lost; it is refused all the same).
        "garbage": rogue(port, b"GET / HTTP/1"),
        "garbage_long": rogue(port, b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256))),
        "oversized": rogue(port, header(1, 0xFFFFFFF0)),
        "version": rogue(port, header(1, 0, version=99)),
        "malformed": rogue(port, header(1, 5) + b"\x01\x02\x03\x04\x05"),
        "wrong_token": rogue(port, header(1, len(join)) + join),
    }
    for k, v in replies.items():
        print(f"rogue {k}: {v}")
    procs = [r0] + [spawn_train(r, 4, port, [20]) for r in range(1, 4)]
    results = [finish(p, limit=60) for p in procs]
    outs = "\n".join(o for _, o in results)
    print(outs)
    expect("magic" in replies["garbage"], "garbage refused", replies["garbage"])
    expect("exceeds the limit" in replies["oversized"], "oversized frame refused before allocation",
           replies["oversized"])
    expect("protocol version 99" in replies["version"], "unknown protocol version refused", replies["version"])
    expect("truncated" in replies["malformed"], "malformed join refused", replies["malformed"])
    expect("wrong job token" in replies["wrong_token"], "wrong token refused", replies["wrong_token"])
    expect(all(c == 0 and "TRAINED" in o for c, o in results), "the job trained correctly", outs)


def case_silent_client():
    port = free_port()
    r0 = spawn(0, 4, port, timeout_ms=20000)
    silent = []
    deadline = time.monotonic() + 10
    while len(silent) < 3:
        try:
            silent.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    silent[1].sendall(header(1, 64)[:7])  # half a header
    silent[2].sendall(header(1, 64) + b"x" * 10)  # a header and part of its payload
    t0 = time.monotonic()
    others = [spawn(r, 4, port, timeout_ms=20000) for r in range(1, 4)]
    results = [finish(p) for p in [r0] + others]
    took = time.monotonic() - t0
    for s in silent:
        s.close()
    outs = "\n".join(o for _, o in results)
    print(outs)
    expect(all(c == 0 and "JOINED" in o for c, o in results), "the job assembled", outs)
    # Reading joins one at a time, each silent connection would hold the others up ~5 s.
    expect(took < 4.0, f"silent connections did not delay the job ({took:.1f} s)", outs)


def still_running(pid):
    """Whether pid is still a fault_main process (not reaped, and not reused by another)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(FAULT_MAIN).encode() in f.read()
    except OSError:
        return False


def run_stalled(args, victim, stop_at, n=4, resume=False, timeout_ms=2000, keep_going=False):
    """Runs FAULT_MAIN ARGS on n ranks, rank `victim` with SHARDOPT_TEST_STOP_AT=stop_at. With
    resume, SIGCONTs the victim once the n - 1 others reported. Returns (output, returncode,
    seconds, victim pid); the victim is never left behind."""
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS=str(timeout_ms))
    env.pop("SHARDOPT_TEST_STOP_AT", None)
    only_victim = (f'if [ "$SHARDOPT_RANK" = "{victim}" ]; then export SHARDOPT_TEST_STOP_AT={stop_at}; fi; '
                   'exec "$0" "$@"')
    cmd = ([SHARDOPT_RUN, "-n", str(n), "--timeout", "25"] + (["--keep-going"] if keep_going else []) +
           ["--", "sh", "-c", only_victim, FAULT_MAIN] + args)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()

    def read():
        for line in p.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out, pid, continued = [], None, False
    deadline = t0 + 30
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                expect(False, "the job ended (the test's own deadline passed)", "".join(out))
            if line is None:
                break
            out.append(line)
            m = re.search(r"shardopt test hook: pid (\d+) (stopping|dying)", line)
            if m:
                pid = int(m.group(1))
            if resume and not continued and pid and sum(bool(re.search(r"\] (OK|BAD) ", l)) for l in out) == n - 1:
                os.kill(pid, signal.SIGCONT)
                out.append(f"(test: SIGCONT to rank {victim}, pid {pid})\n")
                continued = True
        p.wait(timeout=10)
    finally:
        if p.poll() is None:  # the test gave up: shardopt-run ends the ranks (stopped ones too)
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if pid is not None and still_running(pid):
            os.kill(pid, signal.SIGKILL)
            out.append(f"(test: rank {victim}, pid {pid}, was still there: killed)\n")
    took = time.monotonic() - t0
    text = "".join(out)
    print(text)
    print(f"job took {took:.1f} s, exit code {p.returncode}")
    expect(pid is not None, f"rank {victim} reached the stop point", text)
    expect("was still there" not in text, f"rank {victim} (stopped) was killed by shardopt-run", text)
    return text, p.returncode, took, pid


def check_survivors(text, n, victim, expected):
    oks = [l for l in text.splitlines() if "] OK " in l]
    expect(len(oks) == n - 1, f"{n - 1} survivors fail with timeout naming rank {victim} within the "
                              f"timeout plus 1 s (got {len(oks)})", text)
    for l in oks:
        for e in expected:
            expect(e in l, f"the error says '{e}'", l)
    expect(sum("] UNTOUCHED " in l for l in text.splitlines()) == n - 1,
           "no survivor's output was written after it left", text)
    for l in oks:
        secs = float(l.split("] OK ", 1)[1].split()[0])
        print(f"survivor failed after {secs:.2f} s: {l.strip()[:400]}")


def stall_case(kind, nbytes, victim, stop_seq, expected, n=4, resume=False):
    point = "shm" if nbytes <= 64 << 10 else "cma"
    args = ["stall", kind, str(nbytes), str(victim)] + (["resume"] if resume else [])
    text, code, took, pid = run_stalled(args, victim, f"{point}:{stop_seq}", n=n, resume=resume)
    check_survivors(text, n, victim, expected)
    if resume:
        expect(f"[{victim}] RESUMED-FAILED #{stop_seq} " in text,
               f"the resumed rank {victim} failed in the collective it was stopped in", text)
        expect(code == 0, "every rank exited 0", text)
    else:
        expect(code == 3 and f"exited with code 3; stopping the other ranks" in text,
               "a survivor's exit made shardopt-run stop the job", text)
    expect(took < 20, f"the job ended promptly ({took:.1f} s)", text)


def case_stall_shm():
    # The victim published #3, so the others finish it; they time out in #4, where it never
    # arrives (a survivor may report that through another survivor's abort notice).
    stall_case("allreduce", 1 << 10, 2, 3, ["(collective #4) timed out after", "ranks never arrived: 2"])


NO_PROGRESS_1 = ["(collective #2) timed out after", "every rank arrived, but rank 1 made no progress"]


def case_stall_cma_allreduce():
    stall_case("allreduce", 64 << 20, 1, 2, NO_PROGRESS_1)


def case_stall_cma_reduce_scatter():
    stall_case("reduce_scatter", 16 << 20, 1, 2, NO_PROGRESS_1)


def case_stall_cma_allgather():
    stall_case("allgather", 16 << 20, 1, 2, NO_PROGRESS_1)


def case_stall_cma_resume():
    stall_case("allreduce", 64 << 20, 1, 2, NO_PROGRESS_1, resume=True)


def case_stall_attach(stop_at="attach:0", code_name="timeout"):
    before = set(os.listdir("/dev/shm"))
    kill = stop_at.endswith(":kill")  # then the others must outlive rank 0
    text, code, took, pid = run_stalled(["attach-stall"], 0, stop_at, n=4, keep_going=kill)
    left = sorted(f for f in set(os.listdir("/dev/shm")) - before if f.startswith(f"shardopt-{pid}-"))
    for f in left:
        os.unlink(os.path.join("/dev/shm", f))
    expect(sum(f"] NOARENA " in l and f" {code_name}: " in l for l in text.splitlines()) == 3,
           f"3 ranks fail to create the communicator with {code_name} naming rank 0", text)
    expect(took < 20, f"the job ended promptly ({took:.1f} s)", text)
    expect(code == (137 if kill else 3), "a rank's exit made shardopt-run stop the job", text)
    expect(not left, f"no arena file left in /dev/shm (found {left})", text)


def case_stall_attach_kill():
    case_stall_attach("attach:0:kill", "peer lost")


if __name__ == "__main__":
    globals()["case_" + CASE]()
    print(f"PASS {CASE}")
