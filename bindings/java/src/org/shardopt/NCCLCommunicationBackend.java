package org.shardopt;

import org.shardopt.internal.shardopt_native;

/**
 * AiDotNet's NCCLCommunicationBackend&lt;T&gt;(rank, worldSize, deviceId): this process's rank over NCCL, one GPU per rank
 * (the C ABI's shardopt_comm_create "nccl"). rank and worldSize: -1 (both; the no-argument constructor) takes the
 * launcher's environment (shardopt-run, torchrun, mpirun, srun; without one, rank 0 of 1); explicit values must agree with a
 * launcher's. deviceId -1: the local rank's GPU. UnsupportedOperationException (the library's message) where NCCL or a
 * CUDA device cannot be used. Its collectives take device memory: use it through an optimizer with
 * ShardingConfiguration.setMemory(MemorySpace.CUDA).
 */
public class NCCLCommunicationBackend<T> extends CommunicationBackend<T> {
    public NCCLCommunicationBackend() { this(-1, -1, -1); }
    public NCCLCommunicationBackend(int rank, int worldSize) { this(rank, worldSize, -1); }
    public NCCLCommunicationBackend(int rank, int worldSize, int deviceId) { this("nccl", rank, worldSize, deviceId); }
    NCCLCommunicationBackend(String backend, int rank, int worldSize, int deviceId) {
        super(shardopt_native.shardopt_comm_create(InMemoryCommunicationBackend.loaded(backend), rank, worldSize, deviceId));
    }
}
