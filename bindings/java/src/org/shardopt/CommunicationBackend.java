package org.shardopt;

import org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s;
import org.shardopt.internal.shardopt_native;

/** One rank's communicator (AiDotNet's ICommunicationBackend&lt;T&gt;). Collectives take float[]/double[] (copied for the
 *  call) or direct Float/DoubleBuffers in native order (no copy), whose element type and count (an array's length, a
 *  buffer's remaining elements) the typemaps read; every rank passes the same count and type. After close() every
 *  method throws IllegalStateException. */
public class CommunicationBackend<T> implements AutoCloseable {
    static { NativeLoader.load(); }
    private SWIGTYPE_p_shardopt_comm_s handle;
    CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }
    SWIGTYPE_p_shardopt_comm_s handle() {
        if (handle == null) throw new IllegalStateException("the communication backend was closed");
        return handle;
    }

    public int getRank() { return shardopt_native.shardopt_comm_rank(handle()); }
    public int getWorldSize() { return shardopt_native.shardopt_comm_size(handle()); }
    public boolean isInitialized() { return handle != null; }
    /** AiDotNet's Initialize(): ready since construction; checks that it was not shut down. */
    public void initialize() { handle(); }
    public void setTimeout(long milliseconds) { shardopt_native.shardopt_comm_set_timeout(handle(), milliseconds); }
    public void barrier() { shardopt_native.shardopt_barrier(handle()); }
    /** Pending and later collectives fail on every rank (in-process: the whole group). */
    public void abort(String reason) { shardopt_native.shardopt_comm_abort(handle(), reason); }
    private static int op(ReductionOperation op) { return java.util.Objects.requireNonNull(op, "op").code; }
    /** In place: data[i] = op over ranks of data[i]. */
    public void allReduce(Object data, ReductionOperation op) { shardopt_native.shardopt_allreduce(handle(), data, op(op)); }
    /** In place: every rank's data becomes root's. */
    public void broadcast(Object data, int root) { shardopt_native.shardopt_broadcast(handle(), data, root); }
    public void broadcast(Object data) { broadcast(data, 0); }
    /** Every rank's data, concatenated in rank order. */
    public float[] allGather(float[] data) { return (float[]) shardopt_native.shardopt_allgather(handle(), data); }
    public double[] allGather(double[] data) { return (double[]) shardopt_native.shardopt_allgather(handle(), data); }
    /** data (worldSize * k elements on every rank) reduced with op over ranks; this rank gets its slice of k. */
    public float[] reduceScatter(float[] data, ReductionOperation op) { return (float[]) shardopt_native.shardopt_reduce_scatter(handle(), data, op(op)); }
    public double[] reduceScatter(double[] data, ReductionOperation op) { return (double[]) shardopt_native.shardopt_reduce_scatter(handle(), data, op(op)); }
    /** root's data (worldSize * k elements) split in rank order: each rank gets its slice of k (the others pass null,
     *  which is no data on root); the library's shardopt_scatter, so a mistake on root fails every rank at once. */
    public float[] scatter(float[] data, int root) { return (float[]) shardopt_native.shardopt_scatter(handle(), data != null ? data : new float[0], root); }
    public double[] scatter(double[] data, int root) { return (double[]) shardopt_native.shardopt_scatter(handle(), data != null ? data : new double[0], root); }
    public float[] scatter(float[] data) { return scatter(data, 0); }
    public double[] scatter(double[] data) { return scatter(data, 0); }
    /** Point to point (buffered): data to rank dest with tag (>= 0). */
    public void send(Object data, int dest, int tag) { shardopt_native.shardopt_send(handle(), data, dest, tag); }
    public void send(Object data, int dest) { send(data, dest, 0); }
    /** Receives into data (its whole length) from rank source with tag. */
    public void receive(Object data, int source, int tag) { shardopt_native.shardopt_recv(handle(), data, source, tag); }
    /** AiDotNet's Receive(source, count, tag): count doubles (receiveFloat: floats). */
    public double[] receive(int source, int count, int tag) { double[] a = new double[count(count)]; receive(a, source, tag); return a; }
    public double[] receive(int source, int count) { return receive(source, count, 0); }
    public float[] receiveFloat(int source, int count, int tag) { float[] a = new float[count(count)]; receive(a, source, tag); return a; }
    private static int count(int count) {
        if (count < 0) throw new IllegalArgumentException("count must be >= 0 (got " + count + ")");
        return count;
    }

    /** Releases this rank's handle (optimizers over it keep the communicator). An in-process rank that closes while its
     *  peers communicate fails them at once (SHARDOPT_ERR_PEER_LOST naming it). */
    @Override
    public void close() {
        SWIGTYPE_p_shardopt_comm_s h = handle;
        handle = null;
        if (h != null) shardopt_native.shardopt_comm_destroy(h);
    }

    /** AiDotNet's Shutdown(): close(). */
    public void shutdown() { close(); }
}
