#!/usr/bin/env bash
# Collective bandwidth of the UCX backend at 2 and 4 local ranks, f32, 64 KiB .. 256 MiB, one
# line per point: collective=... ranks=... bytes=... algbw_GBps=... busbw_GBps=... (nccl-tests'
# busbw). Then ucx_perftest tag_bw at 64 MiB as the transport ceiling, when installed.
#   BUILD=build bash bench/collectives.sh      (MAX_BYTES=... to shorten; RANKS="2 4")
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_collectives
RUN=$ROOT/tools/shardopt-run
MAX_BYTES=${MAX_BYTES:-268435456}
if [ ! -x "$BIN" ]; then echo "bench/collectives: $BIN not built (UCX missing?); skipping"; exit 0; fi
for n in ${RANKS:-2 4}; do
  "$RUN" -n "$n" --timeout 900 -- "$BIN" --min 65536 --max "$MAX_BYTES" | sed 's/^\[0\] //'
done
if command -v ucx_perftest >/dev/null 2>&1; then
  port=$((20000 + RANDOM % 20000))
  ucx_perftest -t tag_bw -s 67108864 -n 30 -p "$port" >/dev/null 2>&1 &
  server=$!
  sleep 1
  line=$(ucx_perftest 127.0.0.1 -t tag_bw -s 67108864 -n 30 -p "$port" 2>/dev/null | grep -E '^\s*Final:' || true)
  wait "$server" 2>/dev/null || true
  # Final: iterations, latency (typical, avg, overall), bandwidth MB/s (avg, overall), msg rate
  mbps=$(echo "$line" | awk '{print $(NF-2)}')
  if [ -n "$mbps" ]; then
    awk -v m="$mbps" 'BEGIN { printf "reference=ucx_perftest_tag_bw bytes=67108864 bw_GBps=%.3f\n", m * 1048576 / 1e9 }'
  fi
fi
