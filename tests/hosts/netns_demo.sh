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
netns_launch 29557 60000 -- timeout -s KILL 240 "$DEMO" --backend ucx --epochs 3 --samples 2048
netns_wait_all
status=$?
grep -q "largest difference from single-process training" "$LOGDIR/rank0.log" || status=1
if [ $status -eq 0 ]; then echo "PASS: the demo on $N network namespaces matches single-process training"; fi
exit $status
