#!/usr/bin/env bash
# ./dev bench planner: the planner's predictions against measurement on this machine
# (docs/planning.md). First the profiles (bench/calibrate.sh, unless PROFILES_DIR holds them),
# then, for DDP, ZeRO-2 and FSDP, a synthetic training step (bench_planner --mode step: 8 buckets
# of 4 MiB, Adam, a sleep of COMPUTE_MS per step standing in for forward and backward) and the
# allreduce of the whole model (32 MiB), measured and predicted:
#   one host      2, 4 and 8 UCX ranks (ONE_HOST="2 4 8"; ONE_HOST= skips them)
#   namespaces    2 x 2 and 4 x 2 (SHAPES), links at 1 and 10 Gbit/s (RATES), hierarchical
# Lines: name=step strategy=.. ranks=.. hosts=.. measured_step_median_s=.. predicted_step_s=..
# step_ratio=.. measured_allreduce_median_s=.. predicted_allreduce_s=.. allreduce_ratio=..;
# bench/planner_report.py prints them as the table of docs/planning.md.
#   BUILD=build bash bench/planner.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_planner
RUN=$ROOT/tools/shardopt-run
PROFILES_DIR=${PROFILES_DIR:-$BUILD/calibration}
ONE_HOST=${ONE_HOST-2 4 8}
SHAPES=${SHAPES-2x2 4x2}
RATES=${RATES:-1gbit 10gbit}
STRATEGIES=${STRATEGIES:-ddp zero2 fsdp}
COMPUTE_MS=${COMPUTE_MS:-200}
ITERS=${ITERS:-5}
if [ ! -x "$BIN" ]; then echo "bench/planner: $BIN not built (UCX missing?); skipping"; exit 0; fi
first_rate=${RATES%% *}
if [ ! -f "$PROFILES_DIR/profile-$first_rate.json" ]; then
  OUT=$PROFILES_DIR RATES=$RATES BUILD=$BUILD bash "$ROOT/bench/calibrate.sh"
fi
strip() { sed 's/^\[[0-9]*\] //'; }
# A quiet machine: wait (bounded, QUIET_WAIT seconds) for the 1-minute load to fall under QUIET_LOAD.
wait_quiet() {
  local waited=0
  while [ "$(awk -v l="${QUIET_LOAD:-3}" '{ print ($1 < l) }' /proc/loadavg)" != 1 ] && [ "$waited" -lt "${QUIET_WAIT:-120}" ]; do
    sleep 10; waited=$((waited + 10))
  done
}
wait_quiet
if [ -n "${RECALIBRATE:-}" ]; then OUT=$PROFILES_DIR RATES=$RATES BUILD=$BUILD bash "$ROOT/bench/calibrate.sh"; fi
echo "# planner validation: load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, compute ${COMPUTE_MS} ms per step"
for n in $ONE_HOST; do
  for s in $STRATEGIES; do
    wait_quiet
    "$RUN" -n "$n" --timeout 600 -- "$BIN" --mode step --strategy "$s" --compute-ms "$COMPUTE_MS" --iters "$ITERS" \
      --profile "$PROFILES_DIR/profile-$first_rate.json" | strip | grep '^name=' | sed "s/^/place=host rate=- load=$(cut -d' ' -f1 /proc/loadavg) /"
  done
done
run_shape() { # H L RATE
  local H=$1 L=$2 rate=$3 port=$((30000 + RANDOM % 20000)) s
  # shellcheck source=../tests/hosts/netns_hosts.sh
  . "$ROOT/tests/hosts/netns_hosts.sh"
  netns_hosts_create "$H" so-p "10.84.$(($$ % 250))"
  netns_shape "$rate" 150us
  export NETNS_PER_HOST=$L NETNS_LAYOUT=block
  for s in $STRATEGIES; do
    wait_quiet
    port=$((port + 1))
    netns_launch "$port" 600000 SHARDOPT_HIERARCHY=1 -- timeout -s KILL 600 "$BIN" --mode step --strategy "$s" \
      --compute-ms "$COMPUTE_MS" --iters "$ITERS" --hosts "$H" --profile "$PROFILES_DIR/profile-$rate.json"
    netns_wait_all >/dev/null || echo "bench/planner: $s ${H}x$L $rate failed"
    grep '^name=' "$LOGDIR/rank0.log" | sed "s/^/place=${H}x$L rate=$rate load=$(cut -d' ' -f1 /proc/loadavg) /"
  done
}
if [ "$(id -u)" -eq 0 ]; then
  for rate in $RATES; do
    for shape in $SHAPES; do (run_shape "${shape%x*}" "${shape#*x}" "$rate"); done
  done
else
  echo "bench/planner: not root: no namespaces"
fi
