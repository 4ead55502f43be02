#!/usr/bin/env bash
# Runs PROGRAM with environment settings that differ by rank (SHARDOPT_RANK, set by
# shardopt-run), for tests of ranks whose environments disagree:
#
#   env_per_rank.sh RANK:NAME=VALUE ... -- PROGRAM ARGS
set -eu
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  rank=${1%%:*}
  if [ "$rank" = "${SHARDOPT_RANK:?not started by shardopt-run}" ]; then export "${1#*:}"; fi
  shift
done
[ $# -gt 1 ] || { echo "usage: env_per_rank.sh RANK:NAME=VALUE ... -- PROGRAM ARGS" >&2; exit 2; }
shift
exec "$@"
