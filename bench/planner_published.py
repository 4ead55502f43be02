#!/usr/bin/env python3
"""The planner's tables for published configurations (docs/planning.md, "At scale, on paper"): shardopt-plan --json
for each, beside the ZeRO paper's model-state formulas (mixed-precision Adam: 2 + 2 + K bytes a parameter, K = 12) and
DeepSpeed's estimators (estimate_zero2_model_states_mem_needs without offload: 4 P + 16 P / N;
estimate_zero3_model_states_mem_needs: 4 L + 18 P / N, L the largest layer's parameters).
    python3 bench/planner_published.py [build/tools/shardopt-plan/shardopt-plan]"""
import json
import math
import subprocess
import sys

PLAN = sys.argv[1] if len(sys.argv) > 1 else 'build/tools/shardopt-plan/shardopt-plan'
CONFIGS = [
    ("ZeRO paper, Figure 1: 7.5B on 64 GPUs of 32 GB (8 x 8, V100-class)",
     "--params 7.5e9 --hosts 8 --gpus-per-host 8 --gpu-memory 32GB --intra 300GB/s --inter 100Gbit/s --tokens 1048576 --flops-rate 125e12"),
    ("7B on one host of 8 GPUs of 80 GB (H100 SXM, NVLink)",
     "--params 7e9 --hosts 1 --gpus-per-host 8 --gpu-memory 80GB --intra 900GB/s --tokens 1048576 --flops-rate 989e12"),
    ("70B on 64 hosts x 8 GPUs of 80 GB, 400 Gbit/s between hosts",
     "--params 70e9 --hosts 64 --gpus-per-host 8 --gpu-memory 80GB --intra 900GB/s --inter 400Gbit/s --seq 4096 "
     "--micro-batch 1 --reserve 10GiB --tokens 4194304 --flops-rate 989e12"),
    ("1B on 32 CPU hosts (one rank each, 64 GB), 25 Gbit/s",
     "--params 1e9 --hosts 32 --ranks-per-host 1 --host-memory 64GB --inter 25Gbit/s --compute 2s"),
]
GB = 1e9


def largest_layer(p):  # the planner's transformer (src/planner/model_layout.cpp): the embedding or an MLP matrix
    h = max(64, round(math.cbrt(p * 128 / 12) / 64) * 64)
    layers = max(1, round(p / (12 * h * h)))
    while layers > 1 and 12 * h * h * layers > p:
        layers -= 1
    return max(4 * h * h, p - layers * (12 * h * h + 4 * h))


for title, args in CONFIGS:
    out = subprocess.run([PLAN] + args.split() + ['--json', '--all'], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    p, plans = d['parameters'], d['plans']
    n = d['cluster']['hosts'] * d['cluster']['ranks_per_host']
    L = largest_layer(p)
    paper = {'ddp': 16 * p, 'zero1': 4 * p + 12 * p / n, 'zero2': 2 * p + 14 * p / n, 'fsdp': 16 * p / n}
    deepspeed = {'zero2': 4 * p + 16 * p / n, 'fsdp': 4 * L + 18 * p / n}
    print(f"**{title}** (`shardopt-plan {args}`): {d['fitting']} of {len(plans)} candidates fit; fastest: "
          f"{plans[0]['strategy']}, {plans[0]['time']['step']:.2f} s a step.\n")
    print('| strategy | fits | shardopt: per rank (GB) | of it model states (params + grads + state) | buffers | '
          'step (s) | ZeRO paper model states (GB) | DeepSpeed estimator (GB) |')
    print('|---|---|---|---|---|---|---|---|')
    by = {x['strategy']: x for x in plans}
    for name in ['ddp', 'zero1', 'zero2', 'fsdp']:
        x = by.get(name)
        if not x:
            continue
        m = x['memory']
        states = m['params'] + m['grads'] + m['optimizer_state']
        print(f"| {name} | {'yes' if x['fits'] else 'no'} | {m['device_total'] / GB:.2f} | {states / GB:.2f} | "
              f"{(m['buffers'] + m['compression']) / GB:.2f} | {x['time']['step']:.2f} | {paper[name] / GB:.2f} | "
              f"{deepspeed[name] / GB:.2f} |" if name in deepspeed else
              f"| {name} | {'yes' if x['fits'] else 'no'} | {m['device_total'] / GB:.2f} | {states / GB:.2f} | "
              f"{(m['buffers'] + m['compression']) / GB:.2f} | {x['time']['step']:.2f} | {paper[name] / GB:.2f} | – |")
    best = [x for x in plans if x['fits'] and x['strategy'] not in ('ddp', 'zero1', 'zero2', 'fsdp')][:2]
    for x in best:
        m = x['memory']
        print(f"| {x['strategy']} | yes | {m['device_total'] / GB:.2f} | "
              f"{(m['params'] + m['grads'] + m['optimizer_state']) / GB:.2f} | {(m['buffers'] + m['compression']) / GB:.2f} | "
              f"{x['time']['step']:.2f} | | |")
    print()
