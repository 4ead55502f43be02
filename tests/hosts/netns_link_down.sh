#!/usr/bin/env bash
# Three "hosts" as network namespaces, one rank in each, UCX over TCP only, training ZeRO-2.
# Mid-training, host 2's veth link goes down: every rank must end with an error within the
# communicator timeout (ranks 0 and 1 naming rank 2), and nothing may hang.
#
#   netns_link_down.sh FAULT_MAIN
#
# Namespaces from netns_hosts.sh; exits 77 (skip) when not root or without
# `ip netns`. Everything is removed on exit.
set -u
MAIN=${1:?usage: netns_link_down.sh FAULT_MAIN}
N=3
TIMEOUT_MS=5000
TAG=$$
NET=10.78.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create $N so-l "$NET"
start=$(date +%s.%N)
# Long enough that the link goes down mid-training: 100000 steps of >= 2 ms each.
netns_launch 29556 $TIMEOUT_MS SHARDOPT_FAULT_STEP_SLEEP_MS=2 -- timeout -s KILL 60 "$MAIN" train 100000 2 -1 -1
sleep 3
down_at=$(date +%s.%N)
ip -n "${hosts[2]}" link set eth0 down
echo "link of host 2 down at +$(awk "BEGIN{print $down_at - $start}") s"
status=0
for i in $(seq 0 $((N - 1))); do
  wait "${pids[$i]}"
  rc=$?
  now=$(date +%s.%N)
  took=$(awk "BEGIN{print $now - $down_at}")
  sed "s/^/[host $i] /" "$LOGDIR/rank$i.log"
  if [ $rc -ne 0 ]; then echo "FAIL: rank $i exit code $rc"; status=1; fi
  if [ "$i" -lt 2 ] && ! grep -q "^LOST" "$LOGDIR/rank$i.log"; then echo "FAIL: rank $i did not name rank 2"; status=1; fi
  if awk "BEGIN{exit !($took > $TIMEOUT_MS / 1000 + 5)}"; then
    echo "FAIL: rank $i ended $took s after the link went down (timeout $TIMEOUT_MS ms)"; status=1
  fi
done
pids=()
if [ $status -eq 0 ]; then echo "PASS: link down mid-training reported on every rank within the timeout"; fi
exit $status
