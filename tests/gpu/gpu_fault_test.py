#!/usr/bin/env python3
"""GPU fault tests. Usage: gpu_fault_test.py GPU_FAULT_MAIN SHARDOPT_RUN CASE

Exits 77 (ctest: skipped) when the machine has fewer CUDA devices than the case needs.

Cases:
  staged_peer_kill  3 ranks on the staged backend (any number of GPUs, ranks may share one);
                    rank 1 SIGKILLs itself mid-loop: the 2 survivors fail with peer_lost within
                    the timeout (10 s), no hang.
  nccl_timeout      2 ranks on NCCL (2 GPUs); rank 1 skips an allreduce: rank 0 fails with timeout
                    after about 3 s, its communicator aborted (ncclCommAbort), and a later call
                    fails at once.
"""
import os
import subprocess
import sys
import time

FAULT_MAIN, SHARDOPT_RUN, CASE = sys.argv[1], sys.argv[2], sys.argv[3]


def expect(cond, what, out):
    if not cond:
        print(f"FAILED: {what}\n--- output ---\n{out}")
        sys.exit(1)
    print(f"ok: {what}")


def probe(n):
    p = subprocess.run([FAULT_MAIN, "probe", str(n)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip())
    if p.returncode == 77:
        sys.exit(77)
    if p.returncode != 0:
        print("probe failed")
        sys.exit(1)


def job(n, args, timeout_ms):
    env = dict(os.environ, SHARDOPT_TIMEOUT_MS=str(timeout_ms))
    t0 = time.monotonic()
    p = subprocess.run([SHARDOPT_RUN, "-n", str(n), "--keep-going", "--timeout", "90", "--", FAULT_MAIN] + args,
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print(p.stdout)
    return p.stdout, time.monotonic() - t0


def case_staged_peer_kill():
    probe(1)
    out, took = job(3, ["staged-kill", "1"], 10000)
    # gpu_fault_main prints "OK <error_code_name>" ("peer lost"); a survivor counts once
    # however many lines it printed.
    survivors = {l.split("]")[0] for l in out.splitlines() if l.startswith("[") and "] OK peer lost" in l}
    expect(survivors == {"[0", "[2"}, f"ranks 0 and 2 fail with peer lost (got {sorted(survivors)})", out)
    expect("rank 1 killed by signal 9" in out, "the victim died by SIGKILL", out)
    expect(took < 40, f"job ended promptly ({took:.1f} s)", out)


def case_nccl_timeout():
    probe(2)
    out, took = job(2, ["nccl-skip", "1"], 3000)
    expect("[0] OK timeout" in out, "rank 0 fails with timeout", out)
    expect("[0] OK later call" in out, "later calls fail on the aborted communicator", out)
    expect("[1] SKIPPED" in out, "rank 1 skipped the allreduce and exited", out)
    expect(took < 60, f"job ended promptly ({took:.1f} s)", out)


CASES = {"staged_peer_kill": case_staged_peer_kill, "nccl_timeout": case_nccl_timeout}
CASES[CASE]()
