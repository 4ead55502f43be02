#!/usr/bin/env bash
# Four "hosts" as network namespaces, one rank in each, UCX over TCP only.
#
#   netns_conformance.sh CONFORMANCE_MAIN [FILTER]
#
# Creates namespaces so-h0..so-h3 (suffixed with this shell's pid) plus a hub namespace holding
# a bridge; each host gets a veth pair into the bridge and an address 10.77.<pid%250>.(i+1)/24.
# Nothing is added to the caller's own network namespace. Everything is removed on exit (trap).
# Exits 77 (ctest SKIP_RETURN_CODE) when not root or when `ip netns` is unavailable.
set -u
MAIN=${1:?usage: netns_conformance.sh CONFORMANCE_MAIN [FILTER]}
FILTER=${2:-_f32}
N=4
TAG=$$
NET=10.77.$((TAG % 250))
# shellcheck source=netns_hosts.sh
. "$(dirname "$0")/netns_hosts.sh"
netns_hosts_create $N so-h "$NET"

netns_launch 29555 60000 -- "$MAIN" --filter "$FILTER" --skip-failures
netns_wait_all
status=$?
if [ $status -eq 0 ]; then echo "PASS: $N ranks in $N network namespaces over UCX tcp"; fi
exit $status
