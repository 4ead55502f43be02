#!/usr/bin/env bash
# Small-message latency: 8-byte allreduce at 2 and 4 local ranks, shardopt over UCX and
# OpenMPI's MPI_Allreduce in the same run (when built), best of ROUNDS, and the ratio.
#   BUILD=build bash bench/latency.sh        (ROUNDS=3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
MPI_BIN=$BUILD/bench/bench_peer_mpi
if [ ! -x "$BIN" ]; then echo "bench/latency: $BIN not built (UCX missing?); skipping"; exit 0; fi
time_us() { sed -n 's/.*time_us=\([0-9.]*\).*/\1/p' | sort -g | head -1; }
for n in 2 4; do
  ours=$(for r in $(seq "${ROUNDS:-3}"); do
    "$ROOT/tools/shardopt-run" -n "$n" --timeout 120 -- "$BIN" --min 8 --max 8 --only allreduce --iters 2000
  done | time_us)
  line="name=latency collective=allreduce bytes=8 ranks=$n shardopt_us=$ours"
  if [ -x "$MPI_BIN" ] && command -v mpirun >/dev/null 2>&1; then
    mpi=$(for r in $(seq "${ROUNDS:-3}"); do
      timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$n" "$MPI_BIN" --min 8 --max 8 --iters 2000
    done | time_us)
    line="$line openmpi_us=$mpi ratio=$(awk -v a="$ours" -v b="$mpi" 'BEGIN { printf "%.2f", a / b }')"
    line="$line met=$(awk -v a="$ours" -v b="$mpi" 'BEGIN { print (a <= b ? "yes" : "no") }')"
  fi
  echo "$line"
done
