package org.shardopt;

/** Rank rank of the in-process group environmentId of worldSize ranks (threads of this process); build each rank's
 *  object on the thread that drives it. */
public final class InMemoryCommunicationBackend<T> extends CommunicationBackend<T> {
    private final String environmentId;
    public InMemoryCommunicationBackend(int rank, int worldSize) { this(rank, worldSize, "default"); }
    public InMemoryCommunicationBackend(int rank, int worldSize, String environmentId) {
        super(org.shardopt.internal.shardopt_native.shardopt_comm_create_inprocess_member(loaded(environmentId), rank, worldSize));
        this.environmentId = environmentId;
    }
    static <V> V loaded(V value) { NativeLoader.load(); return java.util.Objects.requireNonNull(value); }
    public String getEnvironmentId() { return environmentId; }
}
