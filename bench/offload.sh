#!/usr/bin/env bash
# ZeRO-Offload on a GPU (docs/offload.md): Adam's step time offloaded / not offloaded (ZeRO-2 with
# the optimizer, and with the gradients; FSDP fully offloaded) at 256 Mi and 1 Gi parameters, then
# the largest model each mode fits on one GPU (extra args go to bench_offload_gpu, e.g.
# --params 512 --fit-max 16384). Without a GPU (or without CUDA in the build) it prints one line
# saying why. Called by ./dev bench offload with BUILD set.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/../build}

if [ ! -x "$BUILD/bench/bench_offload_gpu" ]; then
  echo 'name=offload skipped=yes reason="shardopt was built without CUDA"'
  exit 0
fi
"$BUILD/bench/bench_offload_gpu" --fit "$@"
