package org.shardopt;

import org.shardopt.internal.shardopt_native;

/** Rank {@code rank} of an in-process group of {@code worldSize} ranks (threads of this process). Ranks sharing
 *  {@code environmentId} form one group; build each rank's object on the thread that drives it. */
public final class InMemoryCommunicationBackend<T> extends CommunicationBackend<T> {
    private final String environmentId;

    public InMemoryCommunicationBackend(int rank, int worldSize) { this(rank, worldSize, "default"); }

    public InMemoryCommunicationBackend(int rank, int worldSize, String environmentId) {
        super(shardopt_native.shardopt_comm_create_inprocess_member(loaded(environmentId), rank, worldSize));
        this.environmentId = environmentId;
    }

    private static String loaded(String id) {
        NativeLoader.load();
        if (id == null) throw new NullPointerException("environmentId");
        return id;
    }

    public String getEnvironmentId() { return environmentId; }
}
