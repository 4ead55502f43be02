package org.shardopt.tests;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.Function;
import org.shardopt.CommunicationBackend;
import org.shardopt.InMemoryCommunicationBackend;

/** Runs one function per in-process rank on its own thread; rethrows the first failure. */
final class Ranks {
    static <T> List<T> run(int worldSize, Function<CommunicationBackend, T> body) {
        String env = "test-" + UUID.randomUUID();
        List<T> results = new ArrayList<>();
        Object[] out = new Object[worldSize];
        Throwable[] errors = new Throwable[worldSize];
        Thread[] threads = new Thread[worldSize];
        for (int r = 0; r < worldSize; ++r) {
            final int rank = r;
            threads[r] = new Thread(() -> {
                try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(rank, worldSize, env)) {
                    try {
                        out[rank] = body.apply(b);
                    } catch (Throwable t) {
                        errors[rank] = t;
                        b.abort("rank " + rank + " failed");
                    }
                } catch (Throwable t) {
                    if (errors[rank] == null) errors[rank] = t;
                }
            });
            threads[r].start();
        }
        for (Thread t : threads) {
            try { t.join(); } catch (InterruptedException e) { throw new RuntimeException(e); }
        }
        for (Throwable t : errors) if (t != null && !(t instanceof IllegalStateException)) sneaky(t);
        for (Throwable t : errors) if (t != null) sneaky(t);
        for (Object o : out) {
            @SuppressWarnings("unchecked") T v = (T) o;
            results.add(v);
        }
        return results;
    }

    /** Runs body on every rank without aborting the group on a failure; returns each rank's exception (null
     *  when it returned). */
    static Throwable[] runAll(int worldSize, java.util.function.Consumer<CommunicationBackend> body) {
        String env = "test-" + UUID.randomUUID();
        Throwable[] errors = new Throwable[worldSize];
        Thread[] threads = new Thread[worldSize];
        for (int r = 0; r < worldSize; ++r) {
            final int rank = r;
            threads[r] = new Thread(() -> {
                try (InMemoryCommunicationBackend b = new InMemoryCommunicationBackend(rank, worldSize, env)) {
                    b.setTimeout(20000);
                    body.accept(b);
                } catch (Throwable t) {
                    errors[rank] = t;
                }
            });
            threads[r].start();
        }
        for (Thread t : threads) {
            try { t.join(); } catch (InterruptedException e) { throw new RuntimeException(e); }
        }
        return errors;
    }

    @SuppressWarnings("unchecked")
    static <E extends Throwable> void sneaky(Throwable t) throws E { throw (E) t; }
}
