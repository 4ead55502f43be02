# Sourced by the host tests: N "hosts" as network namespaces joined by veth pairs to a bridge
# that lives in a hub namespace, so nothing is added to the caller's own network namespace.
#
#   netns_hosts_create N PREFIX NET     e.g. 4 so-h 10.77.<x>: hosts PREFIX0-$$ .. with
#                                       addresses NET.1 .. NET.N on eth0 (/24)
# Afterwards: hosts=(names), pids=() for the caller's background processes, LOGDIR for logs.
#
#   netns_launch PORT TIMEOUT_MS [VAR=VALUE ...] -- PROGRAM ARGS
#                                       starts the job's ranks, NETNS_PER_HOST (default 1) in
#                                       each host (UCX over TCP, a fresh job token, the
#                                       rendezvous at NET.1:PORT), output in LOGDIR/rank<i>.log,
#                                       each pid appended to pids. NETNS_LAYOUT=block (default)
#                                       puts ranks h*L .. h*L+L-1 on host h, cyclic rank r on
#                                       host r % hosts. Ranks sharing a host share memory (the
#                                       arena, SHARDOPT_SHM=1 since UCX_TLS names only tcp).
#   netns_wait_all                      waits for every rank and prints its log prefixed with its
#                                       host; returns 1 when any rank failed
#   netns_shape RATE DELAY              shapes every host's link both ways with netem (e.g.
#                                       10gbit 150us: each direction RATE, DELAY one way), MTU
#                                       9000; tbf (rate only) where the kernel has no netem.
#                                       NETNS_SHAPE says which.
# Everything (processes, namespaces, LOGDIR) is removed on exit. Exits 77 (ctest
# SKIP_RETURN_CODE) when not root or when namespaces cannot be made here.

hosts=()
pids=()
LOGDIR=
NETNS_HUB=
NETNS_NET=

netns_hosts_cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
  for h in "${hosts[@]:-}"; do [ -n "$h" ] && ip netns del "$h" 2>/dev/null; done
  [ -n "$NETNS_HUB" ] && ip netns del "$NETNS_HUB" 2>/dev/null
  [ -n "$LOGDIR" ] && rm -rf "$LOGDIR"
}

netns_hosts_create() {
  local n=$1 prefix=$2 net=$3 i h
  NETNS_NET=$net
  if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
  if ! command -v ip >/dev/null 2>&1; then echo "SKIP: iproute2 (ip) not installed"; exit 77; fi
  trap netns_hosts_cleanup EXIT INT TERM
  NETNS_HUB=$prefix-hub-$$
  if ! ip netns add "$NETNS_HUB" 2>/dev/null; then
    NETNS_HUB=
    echo "SKIP: cannot create network namespaces here"
    exit 77
  fi
  set -e
  ip -n "$NETNS_HUB" link add br0 type bridge
  ip -n "$NETNS_HUB" link set br0 up
  for i in $(seq 0 $((n - 1))); do
    h=$prefix$i-$$
    ip netns add "$h"
    hosts+=("$h")
    ip -n "$h" link set lo up
    ip -n "$h" link add eth0 type veth peer name p$i netns "$NETNS_HUB"
    ip -n "$NETNS_HUB" link set p$i master br0
    ip -n "$NETNS_HUB" link set p$i up
    ip -n "$h" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$h" link set eth0 up
  done
  set +e
  # Wait (bounded) until host 0 is reachable from the others: bridge ports start forwarding.
  for i in $(seq 1 $((n - 1))); do
    ip netns exec "${hosts[$i]}" ping -c 1 -W 2 "$net.1" >/dev/null 2>&1 ||
      ip netns exec "${hosts[$i]}" ping -c 1 -W 3 "$net.1" >/dev/null 2>&1 || true
  done
  LOGDIR=$(mktemp -d)
}

# The host of rank $1 under NETNS_LAYOUT.
netns_host_of() {
  local per=${NETNS_PER_HOST:-1}
  if [ "${NETNS_LAYOUT:-block}" = cyclic ]; then echo $(($1 % ${#hosts[@]})); else echo $(($1 / per)); fi
}

netns_launch() {
  local port=$1 timeout_ms=$2 per=${NETNS_PER_HOST:-1} n i h token
  n=$((${#hosts[@]} * per))
  shift 2
  local extra=()
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift
  [ "$per" -gt 1 ] && extra=(SHARDOPT_SHM=1 "${extra[@]}")
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for i in $(seq 0 $((n - 1))); do
    h=$(netns_host_of "$i")
    ip netns exec "${hosts[$h]}" env SHARDOPT_RANK=$i SHARDOPT_WORLD_SIZE=$n SHARDOPT_MASTER_ADDR="$NETNS_NET.1" \
      SHARDOPT_MASTER_PORT=$port SHARDOPT_JOB_TOKEN="$token" SHARDOPT_TIMEOUT_MS=$timeout_ms UCX_TLS=tcp \
      "${extra[@]}" "$@" >"$LOGDIR/rank$i.log" 2>&1 &
    pids+=($!)
  done
}

netns_wait_all() {
  local status=0 i h
  for i in $(seq 0 $((${#pids[@]} - 1))); do
    wait "${pids[$i]}" || status=1
    h=$(netns_host_of "$i")
    sed "s/^/[rank $i host $h $NETNS_NET.$((h + 1))] /" "$LOGDIR/rank$i.log"
  done
  pids=()
  return $status
}

netns_shape() {
  local rate=$1 delay=$2 i dev ns q
  # netem gives rate and delay; a kernel without it (sch_netem) gets the rate alone from tbf,
  # with a burst of 2 ms at that rate (at least 256 KiB: whole segmentation-offload packets).
  local burst
  burst=$(awk -v r="$rate" 'BEGIN { v = r + 0; if (r ~ /gbit/) v *= 1e9; else if (r ~ /mbit/) v *= 1e6;
                                    b = v / 8 * 0.002; if (b < 262144) b = 262144; printf "%d", b }')
  q="netem rate $rate delay $delay limit 100000"
  NETNS_SHAPE="netem rate $rate delay $delay"
  if ! ip netns exec "$NETNS_HUB" tc qdisc replace dev p0 root $q 2>/dev/null; then
    q="tbf rate $rate burst $burst latency 50ms"
    NETNS_SHAPE="tbf rate $rate (no netem in this kernel: no added delay)"
  fi
  for i in $(seq 0 $((${#hosts[@]} - 1))); do
    ip -n "$NETNS_HUB" link set "p$i" mtu 9000
    ip -n "${hosts[$i]}" link set eth0 mtu 9000
    for dev in "${hosts[$i]} eth0" "$NETNS_HUB p$i"; do
      set -- $dev
      ip netns exec "$1" tc qdisc replace dev "$2" root $q
    done
  done
}
