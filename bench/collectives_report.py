#!/usr/bin/env python3
"""Ratios and targets from bench/collectives.sh's interleaved allreduce lines.

Each round measures shardopt, the peers and tag_bw at one size moments apart, so a ratio is taken
within a round and the reported ratio is the median over rounds (robust to load that comes and
goes on a shared machine); the best-of-rounds bandwidths are printed too.

Targets (allreduce, 2 ranks, busbw, every size measured, 1 MiB .. 256 MiB):
  vs OpenMPI: >= 1.5x at every size (median over rounds); the geometric mean is printed too
  vs Gloo:    >= 3x at every size it was measured at
  at 64 MiB:  >= 70% of ucx_perftest tag_bw point-to-point bandwidth
Mid sizes (lines with mid=1: 1, 4 and 8 MiB at 4 ranks, 2 cores): >= 1.5x OpenMPI at every size
(median over rounds).
"""
import math
import re
import statistics
import sys

bw = {}  # (round, peer, bytes) -> GB/s (busbw; tag_bw for peer "tag_bw")
mid = {}  # (round, peer, ranks, bytes) -> busbw GB/s, the mid-size lines
of_bound = {}  # (ranks, bytes) -> [shardopt's fraction of the memory-bandwidth bound per round]
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    if "round" not in f:
        continue
    rnd = int(f["round"])
    if f.get("mid") == "1":
        mid[(rnd, f["peer"], int(f["ranks"]), int(f["bytes"]))] = float(f["busbw_GBps"])
        if "of_bound" in f:
            of_bound.setdefault((int(f["ranks"]), int(f["bytes"])), []).append(float(f["of_bound"]))
        continue
    if f.get("reference") == "ucx_perftest_tag_bw":
        bw[(rnd, "tag_bw", int(f["bytes"]))] = float(f["bw_GBps"])
    elif "peer" in f and f.get("collective") == "allreduce" and f.get("ranks") == "2":
        bw[(rnd, f["peer"], int(f["bytes"]))] = float(f["busbw_GBps"])

peers = ("shardopt", "openmpi", "gloo", "tag_bw")
sizes = sorted({b for (_, p, b) in bw if p == "shardopt"})
rounds = sorted({r for (r, _, _) in bw})
print("# allreduce ranks=2 busbw_GBps, best of rounds (tag_bw: point-to-point GB/s):")
for b in sizes:
    row = []
    for p in peers:
        vals = [bw[(r, p, b)] for r in rounds if (r, p, b) in bw]
        if vals:
            row.append(f"{p}={max(vals):.3f}")
    print(f"best bytes={b} " + " ".join(row))


def ratio(peer, b):
    """Median over rounds of shardopt/peer measured in the same round."""
    rs = [bw[(r, "shardopt", b)] / bw[(r, peer, b)] for r in rounds
          if (r, "shardopt", b) in bw and bw.get((r, peer, b))]
    return (statistics.median(rs), rs) if rs else (None, [])


def verdict(ok):
    return "MET" if ok else "NOT MET"


for peer, min_target in (("openmpi", 1.5), ("gloo", 3.0)):
    ratios = []
    for b in sizes:
        med, rs = ratio(peer, b)
        if med is None:
            continue
        ratios.append(med)
        per_round = " ".join(f"{x:.2f}" for x in rs)
        print(f"ratio collective=allreduce ranks=2 bytes={b} shardopt/{peer}={med:.2f} (per round: {per_round})")
    if not ratios:
        print(f"target vs {peer}: not measured")
        continue
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    low = min(ratios)
    print(f"target vs {peer}: min {low:.2f}x (>= {min_target}x at every size), geomean {geo:.2f}x: "
          f"{verdict(low >= min_target)} met={'yes' if low >= min_target else 'no'}")
b = 64 << 20
med, rs = ratio("tag_bw", b)
if med is not None:
    per_round = " ".join(f"{x:.2f}" for x in rs)
    print(f"ratio collective=allreduce ranks=2 bytes={b} shardopt/tag_bw={med:.2f} (per round: {per_round})")
    print(f"target vs tag_bw at 64 MiB: {med:.0%} (>= 70%): {verdict(med >= 0.7)} met={'yes' if med >= 0.7 else 'no'}")
else:
    print("target vs tag_bw at 64 MiB: not measured")

mid_ok = True
mid_keys = sorted({(n, b) for (_, p, n, b) in mid if p == "shardopt"})
for n, b in mid_keys:
    rs = [mid[(r, "shardopt", n, b)] / mid[(r, "openmpi", n, b)] for r in rounds
          if (r, "shardopt", n, b) in mid and mid.get((r, "openmpi", n, b))]
    if not rs:
        continue
    med = statistics.median(rs)
    mid_ok &= med >= 1.5
    per_round = " ".join(f"{x:.2f}" for x in rs)
    bound = of_bound.get((n, b))
    bound_text = f" of_bound={statistics.median(bound):.2f}" if bound else ""
    print(f"ratio collective=allreduce ranks={n} bytes={b} shardopt/openmpi={med:.2f} (per round: {per_round})"
          f"{bound_text}")
if mid_keys:
    print(f"target 1-8 MiB at 4 ranks vs openmpi: >= 1.5x at every size (median of rounds): {verdict(mid_ok)} "
          f"met={'yes' if mid_ok else 'no'}")
