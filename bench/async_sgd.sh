#!/usr/bin/env bash
# Asynchronous SGD against synchronous DDP with a straggler (docs/async_sgd.md): 4 UCX processes,
# rank 3 slowed 3x by a sleep in its model callback; the steps per second of the fast ranks at
# staleness 4 against DDP's, and the final loss against DDP's. Every model callback computes the MLP
# and then sleeps COMPUTE_MS, standing in for device work that leaves the CPU free; COMPUTE_MS=0
# runs the CPU-bound variant (the ranks then compete for this host's cores). Then the same in-process.
#   BUILD=build bash bench/async_sgd.sh   (RANKS=4 STALENESS=4 SLOW_FACTOR=3 COMPUTE_MS=4 EPOCHS=4 HIDDEN=64)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_async_sgd
RUN=$ROOT/tools/shardopt-run
RANKS=${RANKS:-4}
ARGS=(--staleness "${STALENESS:-4}" --slow-factor "${SLOW_FACTOR:-3}" --compute-ms "${COMPUTE_MS:-4}"
      --epochs "${EPOCHS:-4}" --hidden "${HIDDEN:-64}")
strip() { sed 's/^\[[0-9]*\] //'; }
if [ ! -x "$BIN" ]; then echo "bench/async_sgd: $BIN not built; skipping"; exit 0; fi
echo "# async SGD vs DDP, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if ldd "$BIN" | grep -q libucp; then
  "$RUN" -n "$RANKS" --timeout 600 -- "$BIN" --backend ucx "${ARGS[@]}" | strip
else
  echo "(built without UCX: in-process ranks only)"
fi
"$BIN" --backend inprocess --ranks "$RANKS" "${ARGS[@]}"
