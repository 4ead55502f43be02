package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** This process's rank over UCX, from the environment (tools/shardopt-run, torchrun, mpirun, srun). */
public final class UcxCommunicationBackend extends CommunicationBackend {
    public UcxCommunicationBackend() { super(create()); }

    private static org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s create() {
        NativeLoader.load();
        return shardopt_native.so_comm_from_env("ucx");
    }
}
