#!/usr/bin/env bash
# The demo MLP trained by 4 "hosts" (network namespaces, one rank each, UCX over TCP only) with
# ZeRO-2 over Adam; rank 0 compares the result with single-process training and the demo exits
# non-zero when they differ by more than its tolerance.
#
#   netns_demo.sh SHARDOPT_DEMO
#
# Namespaces from netns_hosts.sh; exits 77 (skip) when not root or without `ip netns`.
set -u
DEMO=${1:?usage: netns_demo.sh SHARDOPT_DEMO}
N=4
TAG=$$
NET=10.79.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create $N so-d "$NET"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
for i in $(seq 0 $((N - 1))); do
  ip netns exec "${hosts[$i]}" env SHARDOPT_RANK=$i SHARDOPT_WORLD_SIZE=$N SHARDOPT_MASTER_ADDR="$NET.1" \
    SHARDOPT_MASTER_PORT=29557 SHARDOPT_JOB_TOKEN="$TOKEN" SHARDOPT_TIMEOUT_MS=60000 UCX_TLS=tcp \
    timeout -s KILL 240 "$DEMO" --backend ucx --epochs 3 --samples 2048 >"$LOGDIR/rank$i.log" 2>&1 &
  pids+=($!)
done
status=0
for i in $(seq 0 $((N - 1))); do
  wait "${pids[$i]}" || status=1
  sed "s/^/[host $i $NET.$((i + 1))] /" "$LOGDIR/rank$i.log"
done
pids=()
grep -q "largest difference from single-process training" "$LOGDIR/rank0.log" || status=1
if [ $status -eq 0 ]; then echo "PASS: the demo on $N network namespaces matches single-process training"; fi
exit $status
