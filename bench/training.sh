#!/usr/bin/env bash
# Training benchmarks over real UCX processes: overlap of gradient reduction with a synthetic
# backward (DDP and ZeRO-2, 4 ranks) and end-to-end samples/s of the demo model at 1, 2 and 4
# ranks. The billion-parameter memory run is separate: ./dev bench scale.
#   BUILD=build bash bench/training.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_training
RUN=$ROOT/tools/shardopt-run
strip() { sed 's/^\[[0-9]*\] //'; }
for s in ddp zero2; do
  "$RUN" -n 4 --timeout 600 -- "$BIN" --mode overlap --strategy "$s" --buckets 8 --bucket-mb 4 --compute-ms 40 | strip
done
for n in 1 2 4; do
  "$RUN" -n "$n" --timeout 600 -- "$BIN" --mode demo --strategy zero2 | strip
done
