package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** This process's rank over UCX, from the launcher's environment (tools/shardopt-run, torchrun, mpirun, srun); without
 *  one the constructor throws IllegalArgumentException. {@link #singleProcess()}: a world of one process, asked for. */
public final class UcxCommunicationBackend<T> extends CommunicationBackend<T> {
    public UcxCommunicationBackend() { this(false); }

    /** singleProcessWorld: a world of one (shardopt_comm_create_single; refused under a launcher of more). */
    public UcxCommunicationBackend(boolean singleProcessWorld) {
        super(singleProcessWorld ? shardopt_native.shardopt_comm_create_single(loaded("ucx")) : shardopt_native.shardopt_comm_create_from_env(loaded("ucx")));
    }

    public static <T> UcxCommunicationBackend<T> singleProcess() { return new UcxCommunicationBackend<>(true); }

    private static String loaded(String backend) { NativeLoader.load(); return backend; }
}
