#!/usr/bin/env bash
# Small-message latency: allreduce of 8 B to 64 KiB at 2 and 4 local ranks, shardopt over UCX
# and OpenMPI's MPI_Allreduce in the same run (when built), ROUNDS rounds alternating between
# the two so both see the same moments of this shared machine. Per point: each side's best time,
# the ratio (shardopt / OpenMPI) in every round and its median, and whether the median meets
# the goal: 8 bytes at most 0.8x OpenMPI's time at 2 ranks and 0.7x at 4; other sizes no slower.
#   BUILD=build bash bench/latency.sh        (ROUNDS=5, ITERS=20000, SIZES="8 512 8192 65536",
#                                             RANKS="2 4")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
MPI_BIN=$BUILD/bench/bench_peer_mpi
if [ ! -x "$BIN" ]; then echo "bench/latency: $BIN not built (UCX missing?); skipping"; exit 0; fi
have_mpi=0
[ -x "$MPI_BIN" ] && command -v mpirun >/dev/null 2>&1 && have_mpi=1
[ $have_mpi = 1 ] || echo "bench/latency: OpenMPI peer not built (apt: libopenmpi-dev openmpi-bin): no ratios"
time_us() { sed -n 's/.*time_us=\([0-9.]*\).*/\1/p' | head -1; }
required() { # ranks bytes -> the goal for shardopt / OpenMPI
  if [ "$2" = 8 ]; then [ "$1" = 2 ] && echo 0.8 || echo 0.7; else echo 1.0; fi
}
cores=$(nproc)
echo "name=latency context=loadavg_1min value=$(cut -d' ' -f1 /proc/loadavg) cores=$cores"
for n in ${RANKS:-2 4}; do
  # Both sides placed alike: one rank per core while they fit (mpirun's own default), else
  # left to the kernel.
  if [ "$n" -le "$cores" ]; then bind=core; else bind=none; fi
  for bytes in ${SIZES:-8 512 8192 65536}; do
    ours_all=(); mpi_all=(); ratios=()
    for r in $(seq "${ROUNDS:-5}"); do
      ours=$("$ROOT/tools/shardopt-run" -n "$n" --bind "$bind" --timeout 120 -- "$BIN" --min "$bytes" --max "$bytes" \
        --only allreduce --iters "${ITERS:-20000}" | time_us)
      ours_all+=("$ours")
      if [ $have_mpi = 1 ]; then
        mpi=$(timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$n" "$MPI_BIN" \
          --min "$bytes" --max "$bytes" --iters "${ITERS:-20000}" | time_us)
        mpi_all+=("$mpi")
        ratios+=("$(awk -v a="$ours" -v b="$mpi" 'BEGIN { printf "%.2f", a / b }')")
      fi
    done
    best_ours=$(printf '%s\n' "${ours_all[@]}" | sort -g | head -1)
    line="name=latency collective=allreduce bytes=$bytes ranks=$n bind=$bind shardopt_us=$best_ours"
    if [ $have_mpi = 1 ]; then
      best_mpi=$(printf '%s\n' "${mpi_all[@]}" | sort -g | head -1)
      median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
      req=$(required "$n" "$bytes")
      per_round=$(IFS=,; echo "${ratios[*]}")
      line="$line openmpi_us=$best_mpi best_ratio=$(awk -v a="$best_ours" -v b="$best_mpi" 'BEGIN { printf "%.2f", a / b }')"
      line="$line ratio=$median per_round=$per_round required=$req"
      line="$line met=$(awk -v a="$median" -v b="$req" 'BEGIN { print (a <= b ? "yes" : "no") }')"
    fi
    echo "$line"
  done
done
