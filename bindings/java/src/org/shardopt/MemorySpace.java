package org.shardopt;

/** Where a sharded optimizer keeps its parameters, gradients and state (the C ABI's shardopt_memory_space, in its order):
 *  HOST, or CUDA: device memory of its communicator's GPU (NCCLCommunicationBackend, StagedCommunicationBackend; float). */
public enum MemorySpace { HOST, CUDA }
