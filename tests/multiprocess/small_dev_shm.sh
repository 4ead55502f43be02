#!/usr/bin/env bash
# A /dev/shm too small for the shared-memory arena (a container's default can be tiny): the job
# must go without the arena, over UCX messages, and pass the conformance suite, instead of a
# rank dying of SIGBUS when it first touches arena memory that was never there. The arena's
# creator reserves the memory up front (posix_fallocate), so the shortage shows at creation.
#
#   small_dev_shm.sh SHARDOPT_RUN CONFORMANCE_MAIN
#
# Runs in a private mount namespace with a 1 MiB tmpfs over /dev/shm (the arena of 2 ranks
# needs about 4 MiB); UCX_TLS leaves UCX's own shared-memory transports out, since they need
# /dev/shm too. The hand-off threshold is lowered so the suite's large allreduces would use the
# arena's rings, past its first MiB: an arena made without reserving its memory fails there.
# Exits 77 (skip) when not root or without unshare.
set -u
RUN=${1:?usage: small_dev_shm.sh SHARDOPT_RUN CONFORMANCE_MAIN}
MAIN=${2:?usage: small_dev_shm.sh SHARDOPT_RUN CONFORMANCE_MAIN}
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1; then
  echo "SKIP: needs root and unshare (a private mount namespace)"
  exit 77
fi
export RUN MAIN
unshare -m --propagation private bash -c '
  set -u
  mount -t tmpfs -o size=1m shardopt-small-shm /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
  UCX_TLS=tcp,cma,self SHARDOPT_UCX_HANDOFF_BYTES=65537 SHARDOPT_TIMEOUT_MS=60000 timeout -s KILL 240 "$RUN" -n 2 --timeout 200 -- "$MAIN"
  rc=$?
  left=$(ls -A /dev/shm)
  if [ $rc -ne 0 ]; then echo "FAIL: the conformance suite failed with a 1 MiB /dev/shm (exit $rc)"; exit 1; fi
  if [ -n "$left" ]; then echo "FAIL: files left in /dev/shm: $left"; exit 1; fi
  echo "PASS: no room for the arena: the job went without it and passed"
'
