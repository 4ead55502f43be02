#!/usr/bin/env bash
# A 1-billion-parameter f32 Adam model under FSDP on 4 UCX ranks of this machine: each rank's
# peak RSS against 16 GB/4 + gathered units + 10%, then DDP of the same model refused up front.
#   BUILD=build bash bench/scale.sh          (PARAMS=2.5e8 for a quicker run)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
"$ROOT/tools/shardopt-run" -n 4 --timeout 1800 -- "$BUILD/bench/bench_training" --mode scale \
  --params "${PARAMS:-1e9}" --units 40 --steps 2 | sed 's/^\[[0-9]*\] //'
