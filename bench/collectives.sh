#!/usr/bin/env bash
# Collective bandwidth of the UCX backend, side by side with peers, in one run.
#
# 1. shardopt: allreduce, reduce_scatter, allgather, broadcast at 2 and 4 local ranks, f32,
#    64 KiB .. 256 MiB, one line per point:
#      collective=allreduce ranks=2 bytes=4194304 algbw_GBps=... busbw_GBps=... time_us=...
#    (bytes and busbw as nccl-tests count them).
#    Each line also carries the memory-bandwidth bound (bound_busbw_GBps, of_bound): the bytes
#    the collective must read and write through shared memory over the machine's copy bandwidth
#    at that many threads, measured first (bench_copy_bandwidth; lines copy threads=N bw_GBps=).
# 2. The allreduce targets at 2 ranks, every power of two from 1 MiB to MAX_BYTES, interleaved
#    size by size over ROUNDS rounds (this machine is shared and noisy): shardopt, OpenMPI's
#    MPI_Allreduce (its default shm transport; bench/peers/mpi_allreduce.cpp under mpirun), Gloo's
#    ring allreduce over TCP (bench/peers/gloo_allreduce.cpp, at 4, 16, 64 and 256 MiB) and
#    ucx_perftest tag_bw at 4 and 64 MiB; lines carry round=R peer=NAME. Then ratio lines (the
#    median over rounds of ratios measured moments apart) and whether each target is met
#    (bench/collectives_report.py): >= 1.5x OpenMPI at every size. The mid sizes 1, 4 and 8 MiB
#    are measured the same way at 4 ranks (MID_RANKS), shardopt against OpenMPI.
#   BUILD=build bash bench/collectives.sh   (MAX_BYTES=... to shorten; RANKS="2 4"; ROUNDS=3;
#                                            SWEEP=0 skips part 1; MID_RANKS="" skips the 4 ranks)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
MPI_BIN=$BUILD/bench/bench_peer_mpi
GLOO_BIN=$BUILD/bench/bench_peer_gloo
RUN=$ROOT/tools/shardopt-run
MAX_BYTES=${MAX_BYTES:-268435456}
ROUNDS=${ROUNDS:-3}
COPY_BIN=$BUILD/bench/bench_copy_bandwidth
MID_RANKS=${MID_RANKS-4}
if [ ! -x "$BIN" ]; then echo "bench/collectives: $BIN not built (UCX missing?); skipping"; exit 0; fi
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

declare -A COPY_GBPS
for n in $(echo 2 ${RANKS:-2 4} $MID_RANKS | tr ' ' '\n' | sort -un); do
  line=$("$COPY_BIN" "$n")
  echo "$line"
  COPY_GBPS[$n]=$(echo "$line" | sed 's/.*bw_GBps=//')
done

if [ "${SWEEP:-1}" != 0 ]; then
  for n in ${RANKS:-2 4}; do
    "$RUN" -n "$n" --timeout 900 -- "$BIN" --min 65536 --max "$MAX_BYTES" --copy-gbps "${COPY_GBPS[$n]}" |
      sed 's/^\[0\] //'
  done
fi

tag_bw() { # bytes -> one reference line
  local bytes=$1 port line mbps server
  port=$((20000 + RANDOM % 20000))
  ucx_perftest -t tag_bw -s "$bytes" -n 30 -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 1
  line=$(ucx_perftest 127.0.0.1 -t tag_bw -s "$bytes" -n 30 -p "$port" 2>/dev/null | grep -E '^\s*Final:' || true)
  wait "$server" 2>/dev/null || true
  # Final: iterations, latency (typical, avg, overall), bandwidth MB/s (avg, overall), msg rate
  mbps=$(echo "$line" | awk '{print $(NF-2)}')
  if [ -n "$mbps" ]; then
    awk -v m="$mbps" -v b="$bytes" 'BEGIN { printf "reference=ucx_perftest_tag_bw bytes=%d bw_GBps=%.3f\n", b, m * 1048576 / 1e9 }'
  fi
}

echo "# allreduce at 2 ranks, interleaved with the peers size by size, $ROUNDS round(s):"
have_mpi=0; have_gloo=0; have_perftest=0
[ -x "$MPI_BIN" ] && command -v mpirun >/dev/null 2>&1 && have_mpi=1
[ -x "$GLOO_BIN" ] && have_gloo=1
command -v ucx_perftest >/dev/null 2>&1 && have_perftest=1
[ $have_mpi = 1 ] || echo "bench/collectives: OpenMPI peer not built (apt: libopenmpi-dev openmpi-bin)"
[ $have_gloo = 1 ] || echo "bench/collectives: Gloo peer not built (apt: libgloo-dev)"
for round in $(seq "$ROUNDS"); do
  for n in $MID_RANKS; do
    for bytes in 1048576 4194304 8388608; do
      "$RUN" -n "$n" --timeout 900 -- "$BIN" --only allreduce --min "$bytes" --max "$bytes" \
        --copy-gbps "${COPY_GBPS[$n]}" | sed "s/^\[0\] /round=$round peer=shardopt mid=1 /" | tee -a "$LOG"
      if [ $have_mpi = 1 ]; then
        timeout 900 mpirun --allow-run-as-root --oversubscribe -np "$n" "$MPI_BIN" --min "$bytes" --max "$bytes" |
          sed "s/^/round=$round mid=1 /" | tee -a "$LOG" || echo "bench/collectives: mpirun failed"
      fi
    done
  done
  for ((bytes = 1048576; bytes <= MAX_BYTES; bytes *= 2)); do
    # Each line is tagged with its round, so ratios pair measurements taken moments apart.
    "$RUN" -n 2 --timeout 900 -- "$BIN" --only allreduce --min "$bytes" --max "$bytes" --copy-gbps "${COPY_GBPS[2]}" |
      sed "s/^\[0\] /round=$round peer=shardopt /" | tee -a "$LOG"
    if [ $have_mpi = 1 ]; then
      timeout 900 mpirun --allow-run-as-root --oversubscribe -np 2 "$MPI_BIN" --min "$bytes" --max "$bytes" |
        sed "s/^/round=$round /" | tee -a "$LOG" || echo "bench/collectives: mpirun failed"
    fi
    case $bytes in 4194304 | 16777216 | 67108864 | 268435456)
      if [ $have_gloo = 1 ]; then
        "$RUN" -n 2 --timeout 900 -- "$GLOO_BIN" --min "$bytes" --max "$bytes" | sed 's/^\[0\] //' |
          grep '^peer=' | sed "s/^/round=$round /" | tee -a "$LOG" || echo "bench/collectives: gloo peer failed"
      fi ;;
    esac
    if [ $have_perftest = 1 ] && { [ "$bytes" = 4194304 ] || [ "$bytes" = 67108864 ]; }; then
      tag_bw "$bytes" | sed "s/^/round=$round /" | tee -a "$LOG"
    fi
  done
done
python3 "$ROOT/bench/collectives_report.py" "$LOG"
