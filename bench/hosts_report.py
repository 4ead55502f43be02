#!/usr/bin/env python3
"""Link bounds, ratios and targets from bench/hosts.sh's lines.

The link bound of an algorithm is the busbw it would reach if each host's link (RATE each way)
were the only limit, from the bytes each host must send over it:
  shardopt-hier      the inter-host allreduce of each host's L slices: 2(H-1)/H x size per host
  flat ring (ours flat, Gloo, OpenMPI's ring): the ring over all N ranks in rank order crosses
                     each host's link once: 2(N-1)/N x size per host
busbw counts as nccl-tests do (algbw x 2(N-1)/N), so a bound reads as a busbw too.
Targets (64 MiB and up, at every shape and rate): shardopt-hier >= 90% of its link bound,
>= 1.5x Gloo and >= 1.2x OpenMPI (medians over rounds of ratios taken in the same round).
"""
import re
import statistics
import sys

RATE = {"gbit": 1e9, "mbit": 1e6}


def link_Bps(rate):
    m = re.match(r"([\d.]+)(gbit|mbit)", rate)
    return float(m.group(1)) * RATE[m.group(2)] / 8


def link_bound_busbw(peer, H, L, rate):
    N = H * L
    per_host = 2 * (H - 1) / H if peer == "shardopt-hier" else 2 * (N - 1) / N
    algbw = link_Bps(rate) / per_host
    return algbw * 2 * (N - 1) / N / 1e9


bw = {}  # (shape, rate, round, peer, bytes) -> busbw GB/s
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    if "shape" not in f or "busbw_GBps" not in f:
        continue
    bw[(f["shape"], f["rate"], int(f["round"]), f["peer"], int(f["bytes"]))] = float(f["busbw_GBps"])

ok = True
measured = False
for shape, rate in sorted({(k[0], k[1]) for k in bw}):
    H, L = map(int, shape.split("x"))
    rounds = sorted({k[2] for k in bw if k[:2] == (shape, rate)})
    peers = [p for p in ("shardopt-hier", "shardopt-flat", "openmpi", "gloo") if any(k[3] == p for k in bw)]
    sizes = sorted({k[4] for k in bw if k[:2] == (shape, rate)})
    for b in sizes:
        cols = []
        for p in peers:
            vals = [bw[(shape, rate, r, p, b)] for r in rounds if (shape, rate, r, p, b) in bw]
            if vals:
                bound = link_bound_busbw(p, H, L, rate)
                med = statistics.median(vals)
                cols.append(f"{p}={med:.3f} (link {bound:.3f}, {med / bound:.0%})")
        ratios = []
        for p in peers[1:]:
            rs = [bw[(shape, rate, r, "shardopt-hier", b)] / bw[(shape, rate, r, p, b)] for r in rounds
                  if (shape, rate, r, "shardopt-hier", b) in bw and bw.get((shape, rate, r, p, b))]
            if rs:
                med = statistics.median(rs)
                ratios.append(f"hier/{p}={med:.2f}")
                if b >= 64 << 20 and p in ("gloo", "openmpi"):
                    measured = True
                    ok &= med >= (1.5 if p == "gloo" else 1.2)
        if b >= 64 << 20 and (shape, rate, rounds[0], "shardopt-hier", b) in bw:
            vals = [bw[(shape, rate, r, "shardopt-hier", b)] for r in rounds if (shape, rate, r, "shardopt-hier", b) in bw]
            ok &= statistics.median(vals) >= 0.9 * link_bound_busbw("shardopt-hier", H, L, rate)
        print(f"hosts shape={shape} rate={rate} bytes={b} busbw_GBps median of {len(rounds)}: " + "; ".join(cols)
              + ("  ratios: " + " ".join(ratios) if ratios else ""))
if measured:
    print("target 64-256 MiB: hier >= 90% of link bound, >= 1.5x gloo, >= 1.2x openmpi: "
          + ("MET" if ok else "NOT MET"))
else:
    print("target 64-256 MiB: not measured")
