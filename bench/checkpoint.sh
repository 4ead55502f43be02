#!/usr/bin/env bash
# Checkpoints at scale (issue 35): an f32 Adam model on 4 UCX processes of this machine, FSDP and
# ZeRO-2, sharded and consolidated save and load: each phase's worst peak RSS over the ranks and
# its time (bench/bench_checkpoint.cpp); the consolidated save against the sharded one (bounds:
# +256 MiB per rank, 1.5x the time). Then the offline tool on the largest sharded checkpoint:
# shardopt-ckpt convert to consolidated and to 3 ranks, peak RSS (bound 512 MiB), and each
# converted checkpoint resumed on 4 ranks next to a direct load (equal digests: bit for bit).
#   BUILD=build bash bench/checkpoint.sh
#   PARAMS="150e6 1e9" STRATEGIES="fsdp zero2" DIR=/tmp/shardopt-bench-checkpoint (the defaults)
# A configuration whose ranks would not fit in MemAvailable (estimate below) is skipped, named.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
BIN=$BUILD/bench/bench_checkpoint
CKPT=$BUILD/tools/shardopt-ckpt
RUN=$ROOT/tools/shardopt-run
DIR=${DIR:-/tmp/shardopt-bench-checkpoint}
PARAMS=${PARAMS:-150e6 1e9}
STRATEGIES=${STRATEGIES:-fsdp zero2}
strip() { sed 's/^\[[0-9]*\] //'; }
summary() { grep -E 'max_peak_rss|mode=resume' || true; }
avail_gb() { awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo; }
# GB the 4 ranks need together, from the 150M runs' RSS: per parameter and rank 4.4 B under FSDP
# (its shards, a gathered unit), 7.2 B under ZeRO-2 (whole parameters on every rank), +0.5 GB per
# rank; a load stages the new shard beside the current one (x1.7).
need_gb() { python3 -c "p=float('$1'); r=(4.4 if '$2'=='fsdp' else 7.2)*p/1e9+0.5; print(round(4*r*(1.7 if '$3'=='load' else 1), 1))"; }
fits() { python3 -c "import sys; sys.exit(0 if float('$1') < float('$2') else 1)"; }

last="" resume=no
for p in $PARAMS; do
  for s in $STRATEGIES; do
    avail=$(avail_gb); save=$(need_gb "$p" "$s" save); load=$(need_gb "$p" "$s" load)
    phases=save_sharded,save_consolidated,load_sharded,load_consolidated
    if ! fits "$save" "$avail"; then
      echo "name=checkpoint strategy=$s ranks=4 params=$p skipped: needs ~${save} GB, ${avail} GB available"
      continue
    elif ! fits "$load" "$avail"; then
      phases=save_sharded,save_consolidated
      echo "name=checkpoint strategy=$s ranks=4 params=$p loads skipped: need ~${load} GB, ${avail} GB available"
    fi
    rm -rf "$DIR"
    "$RUN" -n 4 --timeout 1800 -- "$BIN" --params "$p" --strategy "$s" --dir "$DIR" --phases "$phases" | strip | summary
    resume=$([ "$phases" = save_sharded,save_consolidated ] && echo no || echo yes)
    last="$p $s"
  done
done
[ -n "$last" ] || exit 0

# The offline tool on the last (largest) run's sharded checkpoint.
read -r p s <<<"$last"
rm -rf "$DIR/consolidated"
# measured NAME CMD...: CMD's peak RSS and time as one line.
measured() {
  local name=$1; shift
  /usr/bin/time -o "$DIR/time.txt" -f "%M %e" "$@" >/dev/null
  read -r kib secs <"$DIR/time.txt"
  awk -v p="$p" -v n="$name" -v k="$kib" -v t="$secs" 'BEGIN {
    printf "name=checkpoint_tool params=%s %s peak_rss_MiB=%.0f seconds=%s (bound 512 MiB: %s)\n",
           p, n, k / 1024, t, (k / 1024 <= 512 ? "met" : "not met") }'
}
measured "convert=sharded4->consolidated" "$CKPT" convert "$DIR/sharded" "$DIR/consolidated"
measured "convert=sharded4->sharded3" "$CKPT" convert "$DIR/sharded" "$DIR/sharded3" --sharded --world-size 3
measured "verify=sharded3" "$CKPT" verify "$DIR/sharded3"
# The three hold the same state: the digests verify computes over every part (bit for bit).
digests() { "$CKPT" inspect --verify "$DIR/$1" | python3 -c "import json, sys; print(json.load(sys.stdin)['digests'])"; }
d4=$(digests sharded); dc=$(digests consolidated); d3=$(digests sharded3)
echo "name=checkpoint_digests params=$p sharded4=consolidated=sharded3: $([ "$d4" = "$dc" ] && [ "$d4" = "$d3" ] && echo equal || echo DIFFER) $d4"
# Resumed on 4 ranks (load, one step, the digest of the result): equal digests, bit for bit.
[ "$resume" = yes ] || echo "name=checkpoint_resume params=$p skipped: the loads do not fit"
[ "$resume" = yes ] && for c in sharded consolidated sharded3; do
  "$RUN" -n 4 --timeout 1800 -- "$BIN" --params "$p" --strategy "$s" --resume "$DIR/$c" | strip | summary
done
rm -rf "$DIR"
