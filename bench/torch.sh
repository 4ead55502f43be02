#!/usr/bin/env bash
# ./dev bench torch: a CPU training step of an MLP of about 100M parameters (6 linear layers of 4096 x 4096, AdamW,
# 16 samples per rank) on 4 ranks of one host, shardopt.torch over UCX (python -m shardopt.run) against
# torch.nn.parallel.DistributedDataParallel over Gloo (torchrun), each rank on one intra-op thread; the ratio of
# their median step times, met against the issue's 1.5x, and the final losses (the same within 1%). Then memory
# per rank (parameters, gradients, optimizer state and buffers held; peak RSS): shardopt ZeRO-2 against
# torch.distributed.optim.ZeroRedundancyOptimizer, and shardopt DDP with int8 gradient compression.
# TORCH_BENCH_ARGS (e.g. "--width 2048 --layers 4 --steps 4") and TORCH_BENCH_RANKS change the size.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/../build}
RANKS=${TORCH_BENCH_RANKS:-4}
ARGS=${TORCH_BENCH_ARGS:-}
export PYTHONPATH=$BUILD/bindings/python${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 SHARDOPT_NUM_THREADS=1
if ! python3 -c 'import torch' 2>/dev/null || ! command -v torchrun >/dev/null; then
  echo 'name=torch skipped=yes reason="no torch (./dev bench torch installs it)"'
  exit 0
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ours() { python3 -m shardopt.run -n "$RANKS" --timeout 1800 "$HERE/torch_step.py" --impl shardopt "$@" $ARGS |
           sed -n 's/^\[0\] //p' | grep '^name=torch' | tee -a "$out"; }
peer() { torchrun --standalone --nproc-per-node="$RANKS" "$HERE/torch_step.py" "$@" $ARGS 2>/dev/null |
           grep '^name=torch' | tee -a "$out"; }
ours --strategy ddp
peer --impl ddp
ours --strategy zero2
peer --impl zero
ours --strategy ddp --compression int8
python3 - "$out" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split())
    rows[kv["impl"]] = kv
def ratio(a, b):
    return float(rows[b]["step_s"]) / float(rows[a]["step_s"])
def same_loss(a, b):
    la, lb = float(rows[a]["loss"]), float(rows[b]["loss"])
    return abs(la - lb) <= 0.01 * abs(lb)
r = ratio("shardopt_ddp", "ddp")
print(f"name=torch_vs_ddp ranks={rows['ddp']['ranks']} params={rows['ddp']['params']} "
      f"shardopt_step_s={rows['shardopt_ddp']['step_s']} ddp_gloo_step_s={rows['ddp']['step_s']} ratio={r:.2f} "
      f"target=1.5 met={'yes' if r >= 1.5 else 'no'} same_loss={'yes' if same_loss('shardopt_ddp', 'ddp') else 'no'}")
r8 = ratio("shardopt_ddp_int8", "ddp")
print(f"name=torch_int8_vs_ddp ratio={r8:.2f} (the issue's 3x is for 2x2 namespaces at 1 Gbit/s) "
      f"same_loss={'yes' if same_loss('shardopt_ddp_int8', 'ddp') else 'no'}")
z, t = rows["shardopt_zero2"], rows["zero"]
print(f"name=torch_zero2_memory shardopt_zero2_mem_mb={z['mem_mb']} zero_redundancy_mem_mb={t['mem_mb']} "
      f"ratio={float(t['mem_mb']) / float(z['mem_mb']):.2f} shardopt_zero2_rss_mb={z['rss_mb']} "
      f"zero_redundancy_rss_mb={t['rss_mb']} step_ratio={ratio('shardopt_zero2', 'zero'):.2f}")
PY
