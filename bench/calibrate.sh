#!/usr/bin/env bash
# ./dev bench calibrate: this machine's alpha (latency) and beta (bandwidth) per level and its CPU
# update rate, written as planner profiles (docs/planning.md):
#   intra     2 UCX ranks on this host, the shared-memory paths: alpha = an 8-byte allreduce,
#             bandwidth from a 64 MiB allreduce as the bytes it moves through memory ((3n-1) S = 5 S);
#             and with two ranks per core (crowded_Bps): the 64 MiB allreduce's (3n-1) S over its time
#   loopback  2 UCX ranks over TCP on this host (SHARDOPT_SHM=0 UCX_TLS=tcp): alpha, and the ring's
#             S / (T - 2 alpha) (written under "measured"; the planner's levels are intra and inter)
#   inter     2 network namespaces (bench/hosts.sh's netns_hosts.sh) with links shaped to RATE by tc:
#             one rank each gives alpha and what one flow gets (single_flow_Bps, as loopback's);
#             two ranks each, hierarchical (two flows on each link), the link's bandwidth (S / T:
#             each host sends S over its link); one profile per rate
#   update    one rank's Adam update of 16M parameters (28 B/param through memory), and as many
#             ranks as cores updating at once (the host's cap)
# Output: $OUT/profile-<rate>.json (default OUT=$BUILD/calibration, RATES="1gbit 10gbit").
#   BUILD=build bash bench/calibrate.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_planner
RUN=$ROOT/tools/shardopt-run
OUT=${OUT:-$BUILD/calibration}
RATES=${RATES:-1gbit 10gbit}
ITERS=${ITERS:-7}
BIG=${BIG:-67108864}
MID=${MID:-4194304}
if [ ! -x "$BIN" ]; then echo "bench/calibrate: $BIN not built (UCX missing?); skipping"; exit 0; fi
mkdir -p "$OUT"
LOG=$(mktemp)
strip() { sed 's/^\[[0-9]*\] //'; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" | head -1; }
echo "# calibrate: load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

ar() { # label env... -- : allreduce at 8 B and BIG over 2 local ranks
  local label=$1; shift
  for bytes in 8 "$MID" "$BIG"; do
    local iters=$ITERS; [ "$bytes" = 8 ] && iters=200
    env "$@" "$RUN" -n 2 --timeout 300 -- "$BIN" --mode allreduce --bytes "$bytes" --iters "$iters" | strip |
      sed "s/^/level=$label /" | tee -a "$LOG"
  done
}
ar intra SHARDOPT_SHM=1
ar loopback SHARDOPT_SHM=0 UCX_TLS=tcp
CROWD=$((2 * $(nproc))) # ranks outnumbering the cores: they take turns on them
"$RUN" -n "$CROWD" --timeout 300 -- "$BIN" --mode allreduce --bytes "$BIG" --iters "$ITERS" | strip |
  sed "s/^/level=intra_crowded /" | tee -a "$LOG"
"$BIN" --mode update --params 16e6 --iters 5 | sed 's/^/level=update ranks=1 /' | tee -a "$LOG"
cores=$(nproc)
pids=()
for i in $(seq "$cores"); do "$BIN" --mode update --params 16e6 --iters 5 > "$OUT/update.$i" & pids+=($!); done
wait "${pids[@]}"
for i in $(seq "$cores"); do sed "s/^/level=update_host ranks=$cores /" "$OUT/update.$i"; rm -f "$OUT/update.$i"; done | tee -a "$LOG"

inter() { # RATE: 2 namespaces x 1 rank
  local rate=$1 port=$((30000 + RANDOM % 20000))
  # shellcheck source=../tests/hosts/netns_hosts.sh
  . "$ROOT/tests/hosts/netns_hosts.sh"
  netns_hosts_create 2 so-c "10.83.$(($$ % 250))"
  netns_shape "$rate" 150us
  for bytes in 8 "$MID" "$BIG"; do # one flow on each link
    port=$((port + 1))
    local iters=$ITERS; [ "$bytes" = 8 ] && iters=200
    netns_launch "$port" 300000 -- "$BIN" --mode allreduce --bytes "$bytes" --iters "$iters"
    netns_wait_all >/dev/null || echo "bench/calibrate: inter $rate failed"
    grep '^name=' "$LOGDIR/rank0.log" | sed "s/^/level=inter rate=$rate shape=\"$NETNS_SHAPE\" /"
  done
  # Two flows on each link: 2 ranks per namespace, hierarchical (each local rank its slice across).
  port=$((port + 1))
  NETNS_PER_HOST=2 netns_launch "$port" 300000 SHARDOPT_HIERARCHY=1 -- "$BIN" --mode allreduce --bytes "$BIG" --iters "$ITERS"
  netns_wait_all >/dev/null || echo "bench/calibrate: inter $rate (2 flows) failed"
  grep '^name=' "$LOGDIR/rank0.log" | sed "s/^/level=inter2 rate=$rate /"
}
if [ "$(id -u)" -eq 0 ]; then
  for rate in $RATES; do (inter "$rate") | tee -a "$LOG"; done
else
  echo "bench/calibrate: not root: no namespaces, no inter level"
fi
python3 - "$LOG" "$OUT" "$BIG" "$MID" "$CROWD" $RATES <<'PY'
import json, re, sys, os
log, out, big, mid, crowd, rates = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6:]
rows = []
for line in open(log):
    d = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
    if d: rows.append(d)
def t(level, bytes_, rate=None):
    for d in rows:
        if d.get('level') == level and d.get('bytes') == str(int(bytes_)) and (rate is None or d.get('rate') == rate):
            return float(d['min_s'])  # the least disturbed of the iterations (a shared machine)
    return None
def fit(level, moved, rate=None):  # T(S) = steps alpha + moved S / B from the mid and big sizes
    s1, s2 = float(mid), big
    T1, T2, small = t(level, s1, rate), t(level, s2, rate), t(level, 8, rate)
    if None in (T1, T2, small): return None
    B = moved * (s2 - s1) / max(T2 - T1, 1e-9)
    return {"latency_s": max(0.0, T1 - moved * s1 / B), "bandwidth_Bps": B, "small_latency_s": small}
intra = fit('intra', 5.0)  # 2 ranks: (3n - 1) S through memory
crowded_T = t('intra_crowded', big)
if intra and crowded_T:  # crowd ranks on half as many cores, the same bytes through memory
    intra["crowded_Bps"] = (3 * crowd - 1) * big / crowded_T
intra_a, intra_T = t('intra', 8), t('intra', big)
def ring2(level, rate=None):  # 2 ranks, a ring: 2 steps, S each way over the link
    f = fit(level, 1.0, rate)
    if f: f["latency_s"] /= 2
    return f
upd = [float(d['bytes_per_s']) for d in rows if d.get('level') == 'update']
host = [float(d['bytes_per_s']) for d in rows if d.get('level') == 'update_host']
mem = 0
for line in open('/proc/meminfo'):
    if line.startswith('MemTotal:'): mem = int(line.split()[1]) * 1024
for rate in rates or ['none']:
    inter = ring2('inter', rate) or {"latency_s": 0.0, "bandwidth_Bps": 0.0}
    # The link: two flows fill it (2 x 2 hierarchical: each host sends S over its link); one flow
    # (a ring with one rank per host) gets what a single TCP stream gets through the shaper.
    inter["single_flow_Bps"] = inter["bandwidth_Bps"]
    T2 = t('inter2', big, rate)
    if T2: inter["bandwidth_Bps"] = big / T2  # the pieces keep the link busy: their latencies hide
    p = {"name": f"this machine, namespaces at {rate}", "hosts": 1, "ranks_per_host": 2, "memory": "host",
         "host_memory_bytes": mem, "cores_per_host": os.cpu_count(), "intra": intra, "inter": inter,
         "update": {"bandwidth_Bps": upd[0] if upd else 0, "host_bandwidth_Bps": sum(host)},
         "measured": {"loopback": ring2('loopback'), "intra_allreduce_s": {"8": intra_a, str(int(big)): intra_T}}}
    path = os.path.join(out, f"profile-{rate}.json")
    json.dump(p, open(path, 'w'), indent=2)
    print(f"profile {path}: intra {intra['latency_s']*1e6:.1f} us {intra['bandwidth_Bps']/1e9:.2f} GB/s "
          f"(crowded {intra.get('crowded_Bps', 0)/1e9:.2f}), "
          f"inter {inter['latency_s']*1e6:.1f} us {inter['bandwidth_Bps']/1e9:.3f} GB/s (one flow {inter['single_flow_Bps']/1e9:.3f}), "
          f"update {p['update']['bandwidth_Bps']/1e9:.2f} GB/s per rank, {sum(host)/1e9:.2f} GB/s per host")
PY
rm -f "$LOG"
