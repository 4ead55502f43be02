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
"""
import os
import socket
import subprocess
import sys
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


if __name__ == "__main__":
    globals()["case_" + CASE]()
    print(f"PASS {CASE}")
