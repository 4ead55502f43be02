package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** This process's rank over UCX, from the environment (tools/shardopt-run, torchrun, mpirun, srun). Without a
 * world size in the environment the constructor throws IllegalArgumentException (it used to become rank 0 of
 * 1 unnoticed); {@link #singleProcess()} asks for a world of one explicitly. */
public final class UcxCommunicationBackend<T> extends CommunicationBackend<T> {
    public UcxCommunicationBackend() { super(create(false)); }

    /** singleProcessWorld true: a world of one when no launcher set the environment (SHARDOPT_WORLD_SIZE=1). */
    public UcxCommunicationBackend(boolean singleProcessWorld) { super(create(singleProcessWorld)); }

    public static <T> UcxCommunicationBackend<T> singleProcess() { return new UcxCommunicationBackend<>(true); }

    private static org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s create(boolean single) {
        NativeLoader.load();
        return single ? shardopt_native.so_java_comm_ucx_single() : shardopt_native.so_comm_from_env("ucx");
    }
}
