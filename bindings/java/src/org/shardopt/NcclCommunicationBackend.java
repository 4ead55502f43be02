package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** NCCL (device buffers), from the launcher's environment; UnsupportedOperationException where NCCL or a GPU is not there. */
public final class NcclCommunicationBackend<T> extends CommunicationBackend<T> {
    public NcclCommunicationBackend() { super(shardopt_native.shardopt_comm_create_from_env(loaded())); }

    private static String loaded() { NativeLoader.load(); return "nccl"; }
}
