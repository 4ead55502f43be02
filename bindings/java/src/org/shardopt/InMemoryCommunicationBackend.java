package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** Rank {@code rank} of an in-process group of {@code worldSize} ranks (threads of this process). Ranks
 * sharing {@code environmentId} form one group; build each rank's object on the thread that drives it. */
public final class InMemoryCommunicationBackend<T> extends CommunicationBackend<T> {
    private final String environmentId;

    public InMemoryCommunicationBackend(int rank, int worldSize) { this(rank, worldSize, "default"); }

    public InMemoryCommunicationBackend(int rank, int worldSize, String environmentId) {
        super(create(rank, worldSize, environmentId));
        this.environmentId = environmentId;
    }

    private static org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s create(int rank, int worldSize, String id) {
        NativeLoader.load();
        if (id == null) throw new NullPointerException("environmentId");
        return shardopt_native.so_comm_inmemory(id, rank, worldSize);
    }

    public String getEnvironmentId() { return environmentId; }
}
