package org.shardopt;

/** NCCL (device buffers), from a launcher's environment; UnsupportedOperationException without NCCL or a usable GPU. */
public final class NcclCommunicationBackend<T> extends CommunicationBackend<T> {
    public NcclCommunicationBackend() { super(org.shardopt.internal.shardopt_native.shardopt_comm_create_from_env(InMemoryCommunicationBackend.loaded("nccl"))); }
}
