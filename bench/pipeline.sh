#!/usr/bin/env bash
# Pipeline schedules: step time, bubble and peak activations of GPipe, 1F1B and interleaved 1F1B
# on 4 in-process stages whose compute is a sleep (10 ms forward, 20 ms backward per stage).
#   BUILD=build bash bench/pipeline.sh [bench_pipeline options]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
"$BUILD/bench/bench_pipeline" --stages 4 --micro-batches 4,8,16 --forward-ms 10 --backward-ms 20 --virtual 2 "$@"
