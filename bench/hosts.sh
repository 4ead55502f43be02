#!/usr/bin/env bash
# Allreduce across hosts: network namespaces joined through a bridge by veth links shaped with
# netem (RATE each way, DELAY one way, MTU 9000; tbf, rate only, where the kernel has no netem), H hosts x L ranks each, and in the same run,
# on the same namespaces, round by round:
#   shardopt-hier   our allreduce, hierarchical (SHARDOPT_HIERARCHY=1)
#   shardopt-flat   our allreduce, flat ring over all ranks (SHARDOPT_HIERARCHY=0)
#   openmpi         MPI_Allreduce, its TCP transport between hosts (vader inside one), launched
#                   into the namespaces by mpirun through bench/peers/mpi_netns_agent.sh
#   gloo            Gloo's ring allreduce over TCP
# UCX and Gloo talk TCP only (UCX_TLS=tcp); ranks of one host share memory through our arena.
# Lines: shape=HxL rate=R round=N peer=P collective=allreduce ranks=.. bytes=.. busbw_GBps=..;
# bench/hosts_report.py adds each algorithm's link bound and the ratios.
#   BUILD=build bash bench/hosts.sh   (SHAPES="2x2 4x2"; RATES="10gbit 1gbit"; DELAY=150us;
#                                      MIN_BYTES=1048576; MAX_BYTES=268435456; ROUNDS=2;
#                                      PEERS="shardopt-hier shardopt-flat openmpi gloo";
#                                      ITERS=N timed iterations per size, default the binaries')
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
MPI_BIN=$BUILD/bench/bench_peer_mpi
GLOO_BIN=$BUILD/bench/bench_peer_gloo
SHAPES=${SHAPES:-2x2 4x2}
RATES=${RATES:-10gbit 1gbit}
DELAY=${DELAY:-150us}
MIN_BYTES=${MIN_BYTES:-1048576}
MAX_BYTES=${MAX_BYTES:-268435456}
ROUNDS=${ROUNDS:-2}
PEERS=${PEERS:-shardopt-hier shardopt-flat openmpi gloo}
ITER_ARGS=()
[ -n "${ITERS:-}" ] && ITER_ARGS=(--iters "$ITERS")
if [ ! -x "$BIN" ]; then echo "bench/hosts: $BIN not built (UCX missing?); skipping"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then echo "bench/hosts: needs root for network namespaces; skipping"; exit 0; fi
[ -x "$MPI_BIN" ] && command -v mpirun >/dev/null || { echo "bench/hosts: OpenMPI peer not built"; PEERS=${PEERS/openmpi/}; }
[ -x "$GLOO_BIN" ] || { echo "bench/hosts: Gloo peer not built"; PEERS=${PEERS/gloo/}; }
LOG=$(mktemp)
OUT=$(mktemp)

# One shape and rate per subshell: netns_hosts.sh removes its namespaces when the subshell exits.
run_shape() { # H L RATE
  local H=$1 L=$2 rate=$3 round peer tag port=$((30000 + RANDOM % 20000)) hf
  # shellcheck source=../tests/hosts/netns_hosts.sh
  . "$ROOT/tests/hosts/netns_hosts.sh"
  netns_hosts_create "$H" so-b "10.81.$(($$ % 250))"
  netns_shape "$rate" "$DELAY"
  echo "# ${H}x$L: $NETNS_SHAPE"
  export NETNS_PER_HOST=$L NETNS_LAYOUT=block
  hf=$LOGDIR/hostfile
  for h in "${hosts[@]}"; do echo "$h slots=$L"; done >"$hf"
  for round in $(seq "$ROUNDS"); do
    for peer in $PEERS; do
      tag="shape=${H}x$L rate=$rate round=$round"
      port=$((port + 1))
      case $peer in
        shardopt-hier|shardopt-flat)
          local mode=1; [ "$peer" = shardopt-flat ] && mode=0
          netns_launch "$port" 600000 SHARDOPT_HIERARCHY=$mode -- timeout -s KILL 900 "$BIN" --only allreduce \
            --min "$MIN_BYTES" --max "$MAX_BYTES" "${ITER_ARGS[@]}"
          netns_wait_all >/dev/null || echo "bench/hosts: $peer failed ($tag)"
          grep '^collective=' "$LOGDIR/rank0.log" | sed "s/^/$tag peer=$peer /" ;;
        gloo)
          netns_launch "$port" 600000 GLOO_IFACE=eth0 GLOO_STORE_DIR="$LOGDIR/gloo-$round" -- \
            timeout -s KILL 900 "$GLOO_BIN" --min "$MIN_BYTES" --max "$MAX_BYTES" "${ITER_ARGS[@]}"
          netns_wait_all >/dev/null || echo "bench/hosts: gloo failed ($tag)"
          grep '^peer=' "$LOGDIR/rank0.log" | sed "s/^/$tag /" ;;
        openmpi)
          timeout -s KILL 900 ip netns exec "${hosts[0]}" mpirun --allow-run-as-root --oversubscribe -np $((H * L)) \
            --hostfile "$hf" --map-by "ppr:$L:node" --mca plm_rsh_agent "$ROOT/bench/peers/mpi_netns_agent.sh" \
            --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include eth0 --mca btl tcp,vader,self \
            --mca btl_tcp_if_include eth0 "$MPI_BIN" --min "$MIN_BYTES" --max "$MAX_BYTES" "${ITER_ARGS[@]}" 2>"$LOGDIR/mpi.err" |
            grep '^peer=' | sed "s/^/$tag /" || { echo "bench/hosts: mpirun failed ($tag)"; tail -5 "$LOGDIR/mpi.err"; } ;;
      esac
    done
  done
}

echo "# allreduce across namespaces: shapes $SHAPES, links $RATES each way + $DELAY one way, load $(cut -d' ' -f1-3 /proc/loadavg)"
for rate in $RATES; do
  for shape in $SHAPES; do
    (run_shape "${shape%x*}" "${shape#*x}" "$rate") | tee -a "$LOG"
  done
done
python3 "$ROOT/bench/hosts_report.py" "$LOG"
rm -f "$LOG" "$OUT"
