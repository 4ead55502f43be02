#!/usr/bin/env bash
# Elastic training across four "hosts" (network namespaces, one rank each, UCX over TCP only):
# shardopt-run --elastic coordinates from host 0, an agent on each other host. The demo MLP
# trains under ZeRO-2 over Adam with a checkpoint every 20 steps; mid-training host 3's link
# goes down. The coordinator must take host 3 for gone (heartbeat timeout 1 s), stop the other
# ranks and restart the job on hosts 0-2, which resume from the last checkpoint and finish. The
# final parameters must equal, bit for bit, those of a reference run on the same namespaces that
# trains 4 ranks to the resumed step (checkpointing there) and 3 ranks from it. Prints the time
# to recover: from the link going down to the first step of the 3-rank generation.
#
#   netns_elastic.sh ELASTIC_TRAIN SHARDOPT_RUN
#
# Namespaces from netns_hosts.sh; exits 77 (skip) when not root or without `ip netns`.
set -u
TRAIN=${1:?usage: netns_elastic.sh ELASTIC_TRAIN SHARDOPT_RUN}
RUN=${2:?usage: netns_elastic.sh ELASTIC_TRAIN SHARDOPT_RUN}
N=4
STEPS=300
EVERY=20
CONTROL_PORT=29560
TAG=$$
NET=10.80.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create $N so-e "$NET"

TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
TRAIN_ARGS=(--steps $STEPS --every $EVERY --strategy zero2 --print-every 10)
# Ranks: UCX over TCP; a peer that stops answering fails a collective after 3 s (the launcher's
# heartbeat timeout, 1 s, ends the generation before that).
RANK_ENV=(UCX_TLS=tcp SHARDOPT_TIMEOUT_MS=3000)
CONTROL=(--token "$TOKEN" --heartbeat 0.2 --heartbeat-timeout 1 --join-timeout 20)
status=0
fail() { echo "FAIL: $*"; status=1; }

start=$(date +%s.%N)
ip netns exec "${hosts[0]}" env "${RANK_ENV[@]}" "$RUN" --elastic --min 3 --max 4 -n 1 --hosts $N \
  --listen "$NET.1:$CONTROL_PORT" "${CONTROL[@]}" --checkpoint-dir "$LOGDIR/ckpt" --max-restarts 2 --timeout 50 -- \
  "$TRAIN" "${TRAIN_ARGS[@]}" --sleep-ms 10 --out "$LOGDIR/elastic.bin" >"$LOGDIR/host0.log" 2>&1 &
pids+=($!)
for i in $(seq 1 $((N - 1))); do
  ip netns exec "${hosts[$i]}" env "${RANK_ENV[@]}" "$RUN" --elastic --join "$NET.1:$CONTROL_PORT" -n 1 \
    "${CONTROL[@]}" -- "$TRAIN" "${TRAIN_ARGS[@]}" --sleep-ms 10 >"$LOGDIR/host$i.log" 2>&1 &
  pids+=($!)
done

# Cut host 3 off once its rank has passed step 100 (a few checkpoints in).
for _ in $(seq 1 600); do
  grep -q "^\[g0:[0-9]*\] STEP 100$" "$LOGDIR/host3.log" && break
  sleep 0.05
done
grep -q "^\[g0:[0-9]*\] STEP 100$" "$LOGDIR/host3.log" || fail "host 3 never reached step 100"
cut_at=$(date +%s.%N)
ip -n "${hosts[3]}" link set eth0 down
echo "link of host 3 down at +$(awk "BEGIN{print $cut_at - $start}") s"

codes=()
for i in $(seq 0 $((N - 1))); do
  wait "${pids[$i]}"
  codes+=($?)
done
pids=()
for i in $(seq 0 $((N - 1))); do sed "s/^/[host $i] /" "$LOGDIR/host$i.log"; done
[ "${codes[0]}" -eq 0 ] || fail "the coordinator exited with ${codes[0]}"
[ "${codes[1]}" -eq 0 ] && [ "${codes[2]}" -eq 0 ] || fail "an agent of hosts 1-2 exited with ${codes[1]}/${codes[2]}"
[ "${codes[3]}" -ne 0 ] || fail "the agent of the cut-off host 3 did not fail"
grep -q "^shardopt-run: generation 1: 3 ranks" "$LOGDIR/host0.log" || fail "no 3-rank generation 1"
grep -q "^shardopt-run: host [0-9]* at $NET.4 .* taking it for gone$" "$LOGDIR/host0.log" || fail "host 3 not taken for gone"
grep -q "^\[g1:" "$LOGDIR/host3.log" && fail "the cut-off host ran ranks of generation 1"
resumed=$(sed -n 's/^\[g1:0\] RESUMED step \([0-9]*\)$/\1/p' "$LOGDIR/host0.log")
reached=$(sed -n 's/^\[g0:[0-9]*\] STEP \([0-9]*\)$/\1/p' "$LOGDIR"/host[0-2].log | sort -n | tail -1)
[ -n "$resumed" ] && [ $((resumed % EVERY)) -eq 0 ] && [ "$resumed" -gt 0 ] && [ "$resumed" -le "${reached:-0}" ] ||
  fail "generation 1 did not resume from a checkpoint of generation 0 (resumed '$resumed', reached '$reached')"
first=$(cat "$LOGDIR"/host[0-2].log | sed -n 's/^\[g1:[0-9]*\] FIRST_STEP step [0-9]* world 3 wall \([0-9.]*\)$/\1/p' | sort -n | head -1)
done_lines=$(cat "$LOGDIR"/host[0-2].log | grep -c "^\[g1:[0-9]*\] DONE step $STEPS world 3 ")
[ "$done_lines" -eq 3 ] || fail "generation 1 did not finish on 3 ranks ($done_lines DONE lines)"
[ -n "$first" ] || fail "no first step of generation 1"

# The reference: the same namespaces (host 3 back), 4 ranks to the resumed step, 3 from it.
ip -n "${hosts[3]}" link set eth0 up
ip netns exec "${hosts[3]}" ping -c 1 -W 3 "$NET.1" >/dev/null 2>&1 || true
if [ $status -eq 0 ]; then
  export SHARDOPT_CHECKPOINT_DIR=$LOGDIR/ref-ckpt
  netns_launch 29561 20000 -- "$TRAIN" "${TRAIN_ARGS[@]}" --stop-at "$resumed"
  netns_wait_all >"$LOGDIR/ref1.log" || { cat "$LOGDIR/ref1.log"; fail "reference run on 4 ranks"; }
  all_hosts=("${hosts[@]}")
  hosts=("${all_hosts[@]:0:3}")
  netns_launch 29562 20000 -- "$TRAIN" "${TRAIN_ARGS[@]}" --out "$LOGDIR/reference.bin"
  netns_wait_all >"$LOGDIR/ref2.log" || { cat "$LOGDIR/ref2.log"; fail "reference run on 3 ranks"; }
  hosts=("${all_hosts[@]}") # all removed on exit
  grep -q "RESUMED step $resumed$" "$LOGDIR/ref2.log" || fail "the reference did not resume at step $resumed"
  cmp "$LOGDIR/elastic.bin" "$LOGDIR/reference.bin" ||
    fail "final parameters differ from the reference run switching from 4 to 3 ranks at step $resumed"
fi
recover=$(awk "BEGIN{printf \"%.2f\", $first - $cut_at}")
echo "time to recover: $recover s (link down -> first step on 3 ranks); resumed at step $resumed, host 3 had reached $reached"
if [ $status -eq 0 ]; then
  echo "PASS: host 3 cut off mid-training; the job finished on 3 hosts, equal bit for bit to the reference switch at step $resumed"
fi
exit $status
