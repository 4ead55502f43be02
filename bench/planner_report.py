#!/usr/bin/env python3
"""The planner's validation as the table of docs/planning.md: bench/planner.sh's lines (several
runs may be concatenated: each row then gives the range over the runs).
    python3 bench/planner_report.py run1.log [run2.log ...]"""
import re
import sys
from collections import defaultdict

rows = defaultdict(list)
for path in sys.argv[1:]:
    for line in open(path):
        if 'name=step' not in line:
            continue
        d = dict(re.findall(r'(\w+)=(\S+)', line))
        rows[(d['place'], d['rate'], int(d['ranks']), d['strategy'])].append(d)


def span(values, fmt):
    lo, hi = min(values), max(values)
    return fmt % lo if abs(hi - lo) < 1e-12 else (fmt % lo) + '–' + (fmt % hi)


order = {'host': 0}
print('| where | link | ranks | strategy | step measured (s, best of 5) | step predicted (s) | predicted / measured | '
      'allreduce 32 MiB measured (s, best of 5) | predicted (s) | predicted / measured | load |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
def rate_bits(rate):  # '1gbit' < '10gbit'; '-' (shared memory) first
    digits = ''.join(c for c in rate if c.isdigit())
    return int(digits) if digits else 0


for key in sorted(rows, key=lambda k: (order.get(k[0], 1), rate_bits(k[1]), k[2], ['ddp', 'zero2', 'fsdp'].index(k[3]))):
    runs = rows[key]
    place, rate, ranks, strategy = key
    f = lambda name: [float(r[name]) for r in runs]
    ratio = [float(r['predicted_step_s']) / float(r['measured_step_s']) for r in runs]
    ar = [float(r['predicted_allreduce_s']) / float(r['measured_allreduce_s']) for r in runs]
    where = 'one host' if place == 'host' else place + ' namespaces'
    print(f"| {where} | {rate if rate != '-' else 'shm'} | {ranks} | {strategy} | {span(f('measured_step_s'), '%.3f')} | "
          f"{span(f('predicted_step_s'), '%.3f')} | {span(ratio, '%.2f')} | {span(f('measured_allreduce_s'), '%.4f')} | "
          f"{span(f('predicted_allreduce_s'), '%.4f')} | {span(ar, '%.2f')} | {span(f('load'), '%.1f')} |")
