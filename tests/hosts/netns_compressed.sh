#!/usr/bin/env bash
# Compressed gradient reduction across "hosts" (network namespaces, UCX over TCP between them):
# HOSTS x PER_HOST ranks laid out by LAYOUT (block or cyclic) run compressed_hosts_main, which
# checks that each host's ranks combined first and the results are right (see its header).
#
#   HOSTS=2 PER_HOST=2 LAYOUT=block netns_compressed.sh COMPRESSED_HOSTS_MAIN
#
# Exits 77 (skip) when not root or without `ip netns`; removes its namespaces on exit.
set -u
MAIN=${1:?usage: netns_compressed.sh COMPRESSED_HOSTS_MAIN}
N=${HOSTS:-2}
export HOSTS=$N NETNS_PER_HOST=${PER_HOST:-2} NETNS_LAYOUT=${LAYOUT:-block}
TAG=$$
NET=10.76.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create "$N" so-z "$NET"
netns_launch 29561 60000 HOSTS="$N" -- timeout -s KILL 100 "$MAIN"
netns_wait_all
status=$?
exit $status
