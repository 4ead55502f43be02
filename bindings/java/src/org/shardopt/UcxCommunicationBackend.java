package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** This process's rank over UCX, from a launcher's environment (tools/shardopt-run, torchrun, mpirun, srun), else
 *  IllegalArgumentException; singleProcess(): a world of one process, asked for (refused under a launcher of more). */
public final class UcxCommunicationBackend<T> extends CommunicationBackend<T> {
    public UcxCommunicationBackend() { this(false); }
    public UcxCommunicationBackend(boolean singleProcessWorld) {
        super(singleProcessWorld ? shardopt_native.shardopt_comm_create_single(InMemoryCommunicationBackend.loaded("ucx"))
                                 : shardopt_native.shardopt_comm_create_from_env(InMemoryCommunicationBackend.loaded("ucx")));
    }
    public static <T> UcxCommunicationBackend<T> singleProcess() { return new UcxCommunicationBackend<>(true); }
}
