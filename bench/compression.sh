#!/usr/bin/env bash
# Gradient compression (docs/compression.md), in one run:
#  0. each codec's encode (with error feedback) and decode-add rate on one thread, beside memcpy;
#  1. bytes on the wire per step, each method vs uncompressed, as the communicators counted them
#     (DDP, 4 ranks, a 256 x 256 matrix), and the final loss of the demo MLP and a softmax
#     regression trained on 4 ranks with each method vs uncompressed (the unit.compression test's
#     figures; that test gates on them);
#  2. time per DDP step of a bandwidth-bound model (four SIDE x SIDE matrices, almost no compute)
#     on 2 hosts x 2 ranks in network namespaces whose links are shaped to each RATE, every
#     method on the same namespaces, with its speed-up over uncompressed, the bytes the ranks
#     moved (the host's ranks among themselves included) and the bytes rank 0's host link sent,
#     each against uncompressed.
#   BUILD=build bash bench/compression.sh   (RATES="1gbit 10gbit"; SIDE=1024; STEPS=4;
#                                            METHODS=none,bf16,int8,top_k,power_sgd)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
RATES=${RATES:-1gbit 10gbit}
SIDE=${SIDE:-1024}
STEPS=${STEPS:-4}
METHODS=${METHODS:-none,bf16,int8,top_k,power_sgd}
TEST=$BUILD/tests/test_unit_compression
BIN=$BUILD/bench/bench_compression

echo "# gradient compression: bytes and accuracy (4 in-process ranks), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -x "$TEST" ]; then
  "$TEST" --run_test=wire_bytes/bytes_per_step_against_uncompressed:accuracy/reaches_the_uncompressed_loss \
    --log_level=message --color_output=false 2>&1 | grep -E "bytes vs|final loss" | sed 's/^/  /'
else
  echo "  $TEST not built; skipping"
fi

if [ -x "$BUILD/bench/bench_codec" ]; then "$BUILD/bench/bench_codec" | sed 's/^/  /'; fi

if [ ! -x "$BIN" ]; then echo "bench/compression: $BIN not built (UCX missing?); skipping the links"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then echo "bench/compression: needs root for network namespaces; skipping the links"; exit 0; fi
run_rate() { # RATE
  local rate=$1 port=$((30000 + RANDOM % 20000))
  # shellcheck source=../tests/hosts/netns_hosts.sh
  . "$ROOT/tests/hosts/netns_hosts.sh"
  netns_hosts_create 2 so-c "10.82.$(($$ % 250))"
  netns_shape "$rate" "${DELAY:-150us}"
  echo "# 2 hosts x 2 ranks, $NETNS_SHAPE; DDP over four ${SIDE}x$SIDE f32 matrices, median of $STEPS steps"
  export NETNS_PER_HOST=2 NETNS_LAYOUT=block
  netns_launch "$port" 600000 -- timeout -s KILL 900 "$BIN" --side "$SIDE" --steps "$STEPS" --methods "$METHODS"
  netns_wait_all >/dev/null || { echo "bench/compression: a rank failed ($rate)"; for f in "$LOGDIR"/rank*.log; do tail -n 3 "$f"; done; }
  grep '^method=' "$LOGDIR/rank0.log" | awk -v rate="$rate" '
    { for (i = 1; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
      if (f["method"] == "none") { base_ms = f["step_ms"]; base_b = f["bytes_per_step"]; base_link = f["link_bytes_per_step"] }
      printf "  rate=%s %s", rate, $0
      if (base_ms > 0) printf " speedup=%.2fx bytes_ratio=%.4f", base_ms / f["step_ms"], f["bytes_per_step"] / base_b
      if (base_link > 0) printf " link_bytes_ratio=%.4f", f["link_bytes_per_step"] / base_link
      printf "\n" }'
}
for rate in $RATES; do (run_rate "$rate"); done
