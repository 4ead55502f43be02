#!/usr/bin/env bash
# Small-message latency: allreduce of 8 B to 64 KiB at 2 and 4 local ranks, shardopt over UCX
# and OpenMPI's MPI_Allreduce in the same run (when built), best of ROUNDS, and the ratio.
#   BUILD=build bash bench/latency.sh        (ROUNDS=5, ITERS=20000, SIZES="8 512 8192 65536")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
MPI_BIN=$BUILD/bench/bench_peer_mpi
if [ ! -x "$BIN" ]; then echo "bench/latency: $BIN not built (UCX missing?); skipping"; exit 0; fi
time_us() { sed -n 's/.*time_us=\([0-9.]*\).*/\1/p' | sort -g | head -1; }
cores=$(nproc)
for n in 2 4; do
  # Both sides placed alike: one rank per core while they fit (mpirun's own default), else
  # left to the kernel.
  if [ "$n" -le "$cores" ]; then ours_bind=core; mpi_bind=core; else ours_bind=none; mpi_bind=none; fi
  for bytes in ${SIZES:-8 512 8192 65536}; do
    # Rounds alternate between the two, so both see the same moments of this shared machine.
    ours_log=$(mktemp); mpi_log=$(mktemp)
    for r in $(seq "${ROUNDS:-5}"); do
      "$ROOT/tools/shardopt-run" -n "$n" --bind "$ours_bind" --timeout 120 -- "$BIN" --min "$bytes" --max "$bytes" \
        --only allreduce --iters "${ITERS:-20000}" >>"$ours_log"
      if [ -x "$MPI_BIN" ] && command -v mpirun >/dev/null 2>&1; then
        timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to "$mpi_bind" -np "$n" "$MPI_BIN" \
          --min "$bytes" --max "$bytes" --iters "${ITERS:-20000}" >>"$mpi_log"
      fi
    done
    ours=$(time_us <"$ours_log")
    mpi=$(time_us <"$mpi_log")
    rm -f "$ours_log" "$mpi_log"
    line="name=latency collective=allreduce bytes=$bytes ranks=$n bind=$ours_bind shardopt_us=$ours"
    if [ -n "$mpi" ]; then
      line="$line openmpi_us=$mpi ratio=$(awk -v a="$ours" -v b="$mpi" 'BEGIN { printf "%.2f", a / b }')"
      line="$line met=$(awk -v a="$ours" -v b="$mpi" 'BEGIN { print (a <= b ? "yes" : "no") }')"
    fi
    echo "$line"
  done
done
