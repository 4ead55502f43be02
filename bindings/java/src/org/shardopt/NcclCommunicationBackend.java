package org.shardopt;

/** An alias of NCCLCommunicationBackend (the name this binding had before AiDotNet's). */
public final class NcclCommunicationBackend<T> extends NCCLCommunicationBackend<T> {
    public NcclCommunicationBackend() { this(-1, -1, -1); }
    public NcclCommunicationBackend(int rank, int worldSize, int deviceId) { super("nccl", rank, worldSize, deviceId); }
}
