#!/usr/bin/env bash
# planner.cli: shardopt-plan prints the strategies that fit, fastest first (7e9 parameters on 8 GPUs of 80 GB: zero1
# first, ddp does not fit), --json parses, and bad input is a message naming it with exit status 2.
#   bash tests/planner/cli.sh build/tools/shardopt-plan/shardopt-plan
set -uo pipefail
PLAN=$1
fail=0
check() { echo "FAIL: $*"; fail=1; }
out=$("$PLAN" --params 7e9 --gpus-per-host 8 --gpu-memory 80GB --intra 900GB/s --compute 2s --all) || check "7B on 8 x 80 GB: exit $?"
[ "$(echo "$out" | sed -n 3p | awk '{print $1}')" = zero1 ] || check "7B on 8 x 80 GB: zero1 first"$'\n'"$out"
echo "$out" | grep -q '^ddp  *no ' || check "ddp listed as not fitting"
"$PLAN" --params 7e9 --gpus-per-host 8 --gpu-memory 80GB --compute 2s --json |
  python3 -c 'import json,sys; d=json.load(sys.stdin); p=[x for x in d["plans"] if x["fits"]]; assert p and d["fitting"]==len(p)
assert [x["time"]["step"] for x in p] == sorted(x["time"]["step"] for x in p)' || check "--json: fitting plans, fastest first"
bad() { # expected message, then the arguments
  local want=$1; shift
  local msg rc
  msg=$("$PLAN" "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" = 2 ] || check "$*: exit $rc, not 2"
  echo "$msg" | grep -q -- "$want" || check "$*: message '$msg' does not name '$want'"
}
bad "no parameters" --params 0
bad "must be >= 1" --params 7e9 --hosts 0
bad "must be >= 1" --params 7e9 --gpus-per-host -2 --gpu-memory 80GB
bad "not a bandwidth" --params 7e9 --hosts 2 --inter 0
bad "not a bandwidth" --params 7e9 --inter 10furlongs
bad "need --gpu-memory" --params 7e9 --gpus-per-host 8
bad "fits nowhere" --params 7e9 --gpus-per-host 8 --gpu-memory 1GB
bad "not JSON" --layout /etc/hostname
[ "$fail" = 0 ] && echo "planner.cli: ok"
exit "$fail"
