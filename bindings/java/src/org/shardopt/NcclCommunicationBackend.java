package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** NCCL (device buffers): throws UnsupportedOperationException until NCCL lands in the C ABI. */
public final class NcclCommunicationBackend<T> extends CommunicationBackend<T> {
    public NcclCommunicationBackend() { this(0, 1, -1); }

    public NcclCommunicationBackend(int rank, int worldSize, int deviceId) { super(create(rank, worldSize, deviceId)); }

    private static org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s create(int rank, int worldSize, int deviceId) {
        NativeLoader.load();
        return shardopt_native.so_comm_nccl(rank, worldSize, deviceId);
    }
}
