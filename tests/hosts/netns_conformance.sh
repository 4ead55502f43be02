#!/usr/bin/env bash
# Four "hosts" as network namespaces, one rank in each, UCX over TCP only.
#
#   netns_conformance.sh CONFORMANCE_MAIN [FILTER]
#
# Creates namespaces so-h0..so-h3 (suffixed with this shell's pid) plus a hub namespace holding
# a bridge; each host gets a veth pair into the bridge and an address 10.77.<pid%250>.(i+1)/24.
# Nothing is added to the caller's own network namespace. Everything is removed on exit (trap).
# Exits 77 (ctest SKIP_RETURN_CODE) when not root or when `ip netns` is unavailable.
set -u
MAIN=${1:?usage: netns_conformance.sh CONFORMANCE_MAIN [FILTER]}
FILTER=${2:-_f32}
N=4
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
if ! command -v ip >/dev/null 2>&1; then echo "SKIP: iproute2 (ip) not installed"; exit 77; fi

TAG=$$
NET=10.77.$((TAG % 250))
HUB=so-hub-$TAG
hosts=()
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
  for h in "${hosts[@]:-}"; do [ -n "$h" ] && ip netns del "$h" 2>/dev/null; done
  ip netns del "$HUB" 2>/dev/null
  rm -rf "${LOGDIR:-/nonexistent}"
}
trap cleanup EXIT INT TERM

if ! ip netns add "$HUB" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
set -e
ip -n "$HUB" link add br0 type bridge
ip -n "$HUB" link set br0 up
for i in $(seq 0 $((N - 1))); do
  h=so-h$i-$TAG
  ip netns add "$h"
  hosts+=("$h")
  ip -n "$h" link set lo up
  ip -n "$h" link add eth0 type veth peer name p$i netns "$HUB"
  ip -n "$HUB" link set p$i master br0
  ip -n "$HUB" link set p$i up
  ip -n "$h" addr add "$NET.$((i + 1))/24" dev eth0
  ip -n "$h" link set eth0 up
done
set +e

# Wait until host 0 is reachable from the others (bridge ports forwarding).
for i in $(seq 1 $((N - 1))); do
  ip netns exec "${hosts[$i]}" ping -c 1 -W 2 "$NET.1" >/dev/null 2>&1 ||
    ip netns exec "${hosts[$i]}" ping -c 1 -W 3 "$NET.1" >/dev/null 2>&1 || true
done

LOGDIR=$(mktemp -d)
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
PORT=29555
for i in $(seq 0 $((N - 1))); do
  ip netns exec "${hosts[$i]}" env SHARDOPT_RANK=$i SHARDOPT_WORLD_SIZE=$N SHARDOPT_MASTER_ADDR="$NET.1" \
    SHARDOPT_MASTER_PORT=$PORT SHARDOPT_JOB_TOKEN="$TOKEN" SHARDOPT_TIMEOUT_MS=60000 UCX_TLS=tcp \
    "$MAIN" --filter "$FILTER" --skip-failures >"$LOGDIR/rank$i.log" 2>&1 &
  pids+=($!)
done
status=0
for i in $(seq 0 $((N - 1))); do
  wait "${pids[$i]}" || status=1
  sed "s/^/[host $i $NET.$((i + 1))] /" "$LOGDIR/rank$i.log"
done
pids=()
if [ $status -eq 0 ]; then echo "PASS: $N ranks in $N network namespaces over UCX tcp"; fi
exit $status
