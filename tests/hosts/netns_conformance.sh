#!/usr/bin/env bash
# "Hosts" as network namespaces, UCX over TCP only between them: four hosts with one rank in
# each by default; HOSTS=H PER_HOST=L [LAYOUT=block|cyclic] runs H x L ranks, where the ranks
# of one host share memory and the collectives run hierarchically (SHARDOPT_HIERARCHY=1: the
# job fails to start if it could not set the hierarchy up, so a flat run never passes for it).
#
#   netns_conformance.sh CONFORMANCE_MAIN [FILTER]   (FILTER "" runs every case)
#
# Creates namespaces so-h0..so-h3 (suffixed with this shell's pid) plus a hub namespace holding
# a bridge; each host gets a veth pair into the bridge and an address 10.77.<pid%250>.(i+1)/24.
# Nothing is added to the caller's own network namespace. Everything is removed on exit (trap).
# Exits 77 (ctest SKIP_RETURN_CODE) when not root or when `ip netns` is unavailable.
set -u
MAIN=${1:?usage: netns_conformance.sh CONFORMANCE_MAIN [FILTER]}
FILTER=${2-_f32}
N=${HOSTS:-4}
export NETNS_PER_HOST=${PER_HOST:-1} NETNS_LAYOUT=${LAYOUT:-block}
TAG=$$
NET=10.77.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create $N so-h "$NET"

hier=()
[ "$NETNS_PER_HOST" -gt 1 ] && hier=(SHARDOPT_HIERARCHY=1)
netns_launch 29555 60000 "${hier[@]}" -- "$MAIN" --filter "$FILTER" --skip-failures
netns_wait_all
status=$?
if [ $status -eq 0 ]; then
  echo "PASS: $((N * NETNS_PER_HOST)) ranks in $N network namespaces ($NETNS_PER_HOST per host, $NETNS_LAYOUT) over UCX tcp"
fi
exit $status
