#!/usr/bin/env python3
"""A killed owner under asynchronous SGD over UCX. Usage: ucx_owner_kill.py ASYNC_UCX_MAIN SHARDOPT_RUN VICTIM

4 processes train with async_sgd (staleness 2); rank VICTIM (an owner of a shard; rank 0 also keeps
the clock) SIGKILLs itself mid-training. The 3 survivors must each fail with peer_lost naming it,
within twice the communicator timeout (4 s), and the job must end promptly."""
import os
import subprocess
import sys
import time

MAIN, RUN, VICTIM = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ, SHARDOPT_TIMEOUT_MS="4000")
t0 = time.monotonic()
p = subprocess.run([RUN, "-n", "4", "--keep-going", "--timeout", "60", "--", MAIN, "kill", VICTIM], env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=90)
took = time.monotonic() - t0
out = p.stdout
print(out)
failures = []
oks = [l for l in out.splitlines() if "] OK " in l]
if len(oks) != 3:
    failures.append(f"3 survivors report peer_lost naming rank {VICTIM} (got {len(oks)})")
if f"rank {VICTIM} killed by signal 9" not in out:
    failures.append("the victim died by SIGKILL")
if took > 30:
    failures.append(f"the job ended promptly (took {took:.1f} s)")
for f in failures:
    print("FAILED:", f)
sys.exit(1 if failures else 0)
