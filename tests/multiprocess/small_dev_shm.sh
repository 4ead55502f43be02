#!/usr/bin/env bash
# A /dev/shm too small for the shared-memory arena (a container's default can be tiny): the job
# must make do with what fits, instead of a rank dying of SIGBUS when it first touches arena
# memory that was never there (the arena's creator reserves it up front, so a shortage shows
# when it is made). Two ranks, each case in a private mount namespace with a tmpfs over /dev/shm:
#   64 MiB  the whole arena, staging rings included (about 4.3 MiB)
#   3 MiB   no room for the staging rings: the arena without them (about 2.3 MiB)
#   1 MiB   no room for the arena at all: everything over UCX messages
# `fault_main shm-used` reports what /dev/shm holds while the arena is mapped; then the whole
# conformance suite must pass, its large allreduces sent through the arena's rings (hand-off
# threshold lowered) where there is an arena.
#
#   small_dev_shm.sh SHARDOPT_RUN FAULT_MAIN CONFORMANCE_MAIN
#
# UCX_TLS leaves UCX's own shared-memory transports out, since they need /dev/shm too.
# Exits 77 (skip) when not root or without unshare.
set -u
RUN=${1:?usage: small_dev_shm.sh SHARDOPT_RUN FAULT_MAIN CONFORMANCE_MAIN}
FAULT_MAIN=${2:?usage: small_dev_shm.sh SHARDOPT_RUN FAULT_MAIN CONFORMANCE_MAIN}
MAIN=${3:?usage: small_dev_shm.sh SHARDOPT_RUN FAULT_MAIN CONFORMANCE_MAIN}
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1; then
  echo "SKIP: needs root and unshare (a private mount namespace)"
  exit 77
fi
export RUN FAULT_MAIN MAIN
MiB=1048576
status=0
# size, and the bounds (bytes) /dev/shm use must fall in while the arena is mapped
for c in "64m $((4 * MiB)) $((5 * MiB))" "3m $((2 * MiB)) $((3 * MiB))" "1m 0 0"; do
  set -- $c
  unshare -m --propagation private bash -c '
    set -u
    size=$1 lo=$2 hi=$3
    mount -t tmpfs -o size=$size shardopt-small-shm /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
    export UCX_TLS=tcp,cma,self SHARDOPT_TIMEOUT_MS=60000
    used=$(timeout -s KILL 60 "$RUN" -n 2 -- "$FAULT_MAIN" shm-used | sed -n "s/^\[0\] SHMUSED //p")
    if [ -z "$used" ] || [ "$used" -lt "$lo" ] || [ "$used" -gt "$hi" ]; then
      echo "FAIL: /dev/shm of $size: ${used:-nothing} bytes in use with the arena mapped, expected $lo..$hi"; exit 1
    fi
    SHARDOPT_UCX_HANDOFF_BYTES=65537 timeout -s KILL 240 "$RUN" -n 2 --timeout 200 -- "$MAIN" >/tmp/small-shm-$$.log 2>&1
    rc=$?
    tail -3 /tmp/small-shm-$$.log; rm -f /tmp/small-shm-$$.log
    if [ $rc -ne 0 ]; then echo "FAIL: /dev/shm of $size: the conformance suite failed (exit $rc)"; exit 1; fi
    left=$(ls -A /dev/shm)
    if [ -n "$left" ]; then echo "FAIL: /dev/shm of $size: files left: $left"; exit 1; fi
    echo "ok: /dev/shm of $size: $used bytes used by the arena, conformance passed"
  ' small-shm "$1" "$2" "$3"
  rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -ne 0 ] && status=1
done
[ $status -eq 0 ] && echo "PASS: the arena takes what /dev/shm has room for, and the job passes"
exit $status
