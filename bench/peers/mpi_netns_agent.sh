#!/usr/bin/env bash
# OpenMPI's launch agent for bench/hosts.sh (mpirun --mca plm_rsh_agent): instead of ssh to
# HOST, runs the command in the network namespace named HOST, under a host name of its own
# (a UTS namespace) so OpenMPI tells the "hosts" apart.
#   mpi_netns_agent.sh [ssh options] HOST COMMAND...
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
host=${1:?usage: mpi_netns_agent.sh HOST COMMAND...}
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname '$host' && $*"
