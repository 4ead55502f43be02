package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** The staged GPU communicator (shardopt_comm_create "staged"): device buffers reduced through pinned host memory over UCX,
 *  for several ranks per GPU or hosts without NCCL. Arguments as NCCLCommunicationBackend's. */
public final class StagedCommunicationBackend<T> extends CommunicationBackend<T> {
    public StagedCommunicationBackend() { this(-1, -1, -1); }
    public StagedCommunicationBackend(int rank, int worldSize) { this(rank, worldSize, -1); }
    public StagedCommunicationBackend(int rank, int worldSize, int deviceId) {
        super(shardopt_native.shardopt_comm_create(InMemoryCommunicationBackend.loaded("staged"), rank, worldSize, deviceId));
    }
}
