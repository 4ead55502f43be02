#!/usr/bin/env python3
"""Ratios and targets from bench/collectives.sh's interleaved allreduce lines (best of rounds).

Targets (allreduce, 2 ranks, busbw, 4 MiB .. 256 MiB):
  vs OpenMPI: geometric mean >= 1.5x, and no size below 1.0x
  vs Gloo:    >= 3x at every size
  at 64 MiB:  >= 70% of ucx_perftest tag_bw point-to-point bandwidth
"""
import math
import re
import sys

best = {}  # (peer, bytes) -> busbw
ref = {}   # bytes -> tag_bw GB/s
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    if f.get("reference") == "ucx_perftest_tag_bw":
        b = int(f["bytes"])
        ref[b] = max(ref.get(b, 0.0), float(f["bw_GBps"]))
    elif "peer" in f and f.get("collective") == "allreduce" and f.get("ranks") == "2":
        key = (f["peer"], int(f["bytes"]))
        best[key] = max(best.get(key, 0.0), float(f["busbw_GBps"]))

sizes = sorted(b for (p, b) in best if p == "shardopt" and b >= 4 << 20)
print("# best of rounds, allreduce ranks=2 busbw_GBps:")
for b in sizes:
    row = " ".join(f"{p}={best[(p, b)]:.3f}" for p in ("shardopt", "openmpi", "gloo") if (p, b) in best)
    print(f"best bytes={b} {row}")
for b, v in sorted(ref.items()):
    print(f"best reference=ucx_perftest_tag_bw bytes={b} bw_GBps={v:.3f}")


def verdict(ok):
    return "MET" if ok else "NOT MET"


for peer, geo_target, min_target in (("openmpi", 1.5, 1.0), ("gloo", None, 3.0)):
    ratios = [(b, best[("shardopt", b)] / best[(peer, b)]) for b in sizes if best.get((peer, b))]
    if not ratios:
        print(f"target vs {peer}: not measured")
        continue
    for b, r in ratios:
        print(f"ratio collective=allreduce ranks=2 bytes={b} shardopt/{peer}={r:.2f}")
    geo = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
    low = min(r for _, r in ratios)
    if geo_target:
        print(f"target vs {peer}: geomean {geo:.2f}x (>= {geo_target}x) and min {low:.2f}x (>= {min_target}x): "
              f"{verdict(geo >= geo_target and low >= min_target)}")
    else:
        print(f"target vs {peer}: min {low:.2f}x (>= {min_target}x at every size), geomean {geo:.2f}x: "
              f"{verdict(low >= min_target)}")
b = 64 << 20
if ("shardopt", b) in best and b in ref:
    r = best[("shardopt", b)] / ref[b]
    print(f"ratio collective=allreduce ranks=2 bytes={b} shardopt/tag_bw={r:.2f}")
    print(f"target vs tag_bw at 64 MiB: {r:.0%} (>= 70%): {verdict(r >= 0.7)}")
else:
    print("target vs tag_bw at 64 MiB: not measured")
