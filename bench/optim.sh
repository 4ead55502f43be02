#!/usr/bin/env bash
# Optimizer-update benchmarks. CPU: f32 Adam at 16M/64M/256M parameters on 1 and 2 threads
# against the plain copy bandwidth measured in the same run, then 8-bit and 4-bit Adam
# (bench_optim_lowbit) (extra args go to bench_optim:
# --sizes 16,64 in Mi-parameters, --threads 1,2,4). GPU: the CUDA optimizer's Adam, f32 and
# bf16 mixed precision at 16M/64M/256M, against the device-to-device copy bandwidth and, when
# python3 has torch with CUDA, torch.optim.Adam(fused=True) timed in the same run. Without a
# GPU (or without CUDA in the build) the GPU section prints one line saying why it was skipped.
# Called by ./dev bench optim with BUILD set.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/../build}

"$BUILD/bench/bench_optim" "$@"
# Low-bit state (8-bit / 4-bit Adam) against the same kind of bound, 16M and 64M on one thread.
"$BUILD/bench/bench_optim_lowbit"

if [ ! -x "$BUILD/bench/bench_optim_gpu" ]; then
  echo 'name=optim_gpu skipped=yes reason="shardopt was built without CUDA"'
  exit 0
fi
gpu_out=$(mktemp)
trap 'rm -f "$gpu_out"' EXIT
"$BUILD/bench/bench_optim_gpu" | tee "$gpu_out"
# The torch peer only where shardopt's GPU section ran (it printed measurements).
if grep -q '^name=optim_gpu optimizer=' "$gpu_out"; then
  if command -v python3 >/dev/null; then
    python3 "$HERE/optim_gpu_torch.py" --ours "$gpu_out"
  else
    echo 'name=optim_gpu_torch skipped=yes reason="no python3"'
  fi
fi
