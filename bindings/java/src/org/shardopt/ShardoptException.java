package org.shardopt;

/** What every exception the library raises implements: its status (a SHARDOPT_ERR_* code of shardopt.h) and the rank of
 *  the failed call (-1 when it had none). Messages read "SHARDOPT_ERR_X: &lt;the library's message&gt;". */
public interface ShardoptException {
    int getStatus();
    int getRank();
    /** SHARDOPT_ERR_INVALID_ARGUMENT. */
    final class InvalidArgument extends IllegalArgumentException implements ShardoptException {
        private final int status, rank;
        InvalidArgument(String message, int status, int rank) { super(message); this.status = status; this.rank = rank; }
        public int getStatus() { return status; } public int getRank() { return rank; }
    }
    /** SHARDOPT_ERR_INVALID_STATE, TIMEOUT, MISMATCH, PEER_LOST, INTERNAL. */
    final class InvalidState extends IllegalStateException implements ShardoptException {
        private final int status, rank;
        InvalidState(String message, int status, int rank) { super(message); this.status = status; this.rank = rank; }
        public int getStatus() { return status; } public int getRank() { return rank; }
    }
    /** SHARDOPT_ERR_IO, CORRUPT. */
    final class Io extends java.io.IOException implements ShardoptException {
        private final int status, rank;
        Io(String message, int status, int rank) { super(message); this.status = status; this.rank = rank; }
        public int getStatus() { return status; } public int getRank() { return rank; }
    }
    /** SHARDOPT_ERR_UNSUPPORTED. */
    final class Unsupported extends UnsupportedOperationException implements ShardoptException {
        private final int status, rank;
        Unsupported(String message, int status, int rank) { super(message); this.status = status; this.rank = rank; }
        public int getStatus() { return status; } public int getRank() { return rank; }
    }
    /** SHARDOPT_ERR_OUT_OF_MEMORY. */
    final class OutOfMemory extends OutOfMemoryError implements ShardoptException {
        private final int status, rank;
        OutOfMemory(String message, int status, int rank) { super(message); this.status = status; this.rank = rank; }
        public int getStatus() { return status; } public int getRank() { return rank; }
    }
}
