#!/usr/bin/env bash
# Optimizer-update benchmarks. CPU: f32 Adam at 16M/64M/256M parameters on 1 and 2 threads
# against the plain copy bandwidth measured in the same run, then 8-bit and 4-bit Adam
# (bench_optim_lowbit) (extra args go to bench_optim:
# --sizes 16,64 in Mi-parameters, --threads 1,2,4), then against torch.optim.Adam(fused=True) on
# the CPU at 64M/256M, 1 and 2 threads, in one process (bench/optim_torch.py; OPTIM_TORCH_ARGS,
# e.g. "--sizes 64 --rounds 9"; ./dev bench installs torch). GPU: the CUDA optimizer's Adam, f32 and
# bf16 mixed precision at 16M/64M/256M, against the device-to-device copy bandwidth and, when
# python3 has torch with CUDA, torch.optim.Adam(fused=True) timed in the same run. Without a
# GPU (or without CUDA in the build) the GPU section prints one line saying why it was skipped.
# Called by ./dev bench optim with BUILD set.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/../build}

"$BUILD/bench/bench_optim" "$@"
# torch.optim.Adam(fused=True) on the CPU, the peer of the CPU update, in one process with it
# (bench/optim_torch.py: alternating steps, ratio per round, met against 1.1x).
if command -v python3 >/dev/null && [ -f "$BUILD/bench/libshardopt_bench_optim.so" ]; then
  python3 "$HERE/optim_torch.py" --lib "$BUILD/bench/libshardopt_bench_optim.so" ${OPTIM_TORCH_ARGS:-}
else
  echo 'name=optim peer=torch_fused skipped=yes reason="no python3 or no libshardopt_bench_optim.so"'
fi
# Low-bit state (8-bit / 4-bit Adam) against the same kind of bound, 16M and 64M on one thread,
# then what it costs in final loss and saves in state bytes, training two MLPs under ZeRO-2, and
# Muon against AdamW on the same MLPs.
"$BUILD/bench/bench_optim_lowbit"
"$BUILD/bench/bench_optimizer_quality"
# The same kind of problem in torch, against the peers: shardopt's 8-bit / 4-bit Adam (through
# shardopt.torch) and torchao's Adam8bit / Adam4bit, each against fp32 torch.optim.Adam
# (bench/lowbit_peers.py; ./dev bench optim installs torchao).
if python3 -c "import torch" >/dev/null 2>&1 && [ -d "$BUILD/bindings/python/shardopt" ]; then
  PYTHONPATH="$BUILD/bindings/python${PYTHONPATH:+:$PYTHONPATH}" python3 "$HERE/lowbit_peers.py" 2>/dev/null
else
  echo 'name=lowbit_peer skipped=yes reason="no torch, or no Python package in the build"'
fi

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
