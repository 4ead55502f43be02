package org.shardopt;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s;
import org.shardopt.internal.shardopt_dtype;
import org.shardopt.internal.shardopt_native;

/**
 * One rank's communicator (AiDotNet's ICommunicationBackend&lt;T&gt;), for float and double data alike.
 * Collectives work in place on float[]/double[] or direct Float/DoubleBuffers (no copy), counted from the
 * array or the buffer's remaining elements; every rank passes the same count and type. After close()
 * every method throws IllegalStateException.
 */
public class CommunicationBackend<T> implements AutoCloseable {
    static { NativeLoader.load(); }

    private SWIGTYPE_p_shardopt_comm_s handle;

    CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }

    SWIGTYPE_p_shardopt_comm_s handle() {
        if (handle == null) throw new IllegalStateException("the communication backend was closed");
        return handle;
    }

    public int getRank() { return shardopt_native.so_comm_rank(handle()); }
    public int getWorldSize() { return shardopt_native.so_comm_size(handle()); }
    public boolean isInitialized() { return handle != null; }
    /** AiDotNet's Initialize(): the backend is ready when constructed (its rendezvous ran there), so this only
     *  checks that it was not shut down. */
    public void initialize() { handle(); }
    public void setTimeout(long milliseconds) { shardopt_native.so_comm_set_timeout(handle(), milliseconds); }
    public void barrier() { shardopt_native.so_barrier(handle()); }
    /** Pending and later collectives fail on every rank (in-process: the whole group). */
    public void abort(String reason) { shardopt_native.so_comm_abort(handle(), reason); }

    // ---- the element type of an argument ----
    static final class Data {
        final Object ref; // what goes to native code
        final long count;
        final int dtype;
        final int size;

        Data(Object data, String what) {
            if (data == null) throw new NullPointerException(what);
            if (data instanceof FloatBuffer || data instanceof DoubleBuffer) nativeOrder(data, what);
            if (data instanceof float[]) { ref = data; count = ((float[]) data).length; dtype = shardopt_dtype.SHARDOPT_F32; size = 4; }
            else if (data instanceof double[]) { ref = data; count = ((double[]) data).length; dtype = shardopt_dtype.SHARDOPT_F64; size = 8; }
            else if (data instanceof FloatBuffer) { ref = direct((Buffer) data); count = ((Buffer) data).remaining(); dtype = shardopt_dtype.SHARDOPT_F32; size = 4; }
            else if (data instanceof DoubleBuffer) { ref = direct((Buffer) data); count = ((Buffer) data).remaining(); dtype = shardopt_dtype.SHARDOPT_F64; size = 8; }
            else throw new IllegalArgumentException(what + " must be a float[], double[], or a direct FloatBuffer or DoubleBuffer, not "
                    + data.getClass().getName());
        }

        boolean isFloat() { return dtype == shardopt_dtype.SHARDOPT_F32; }
        Object newArray(long n) {
            if (n > Integer.MAX_VALUE - 8) throw new IllegalArgumentException(n + " elements do not fit in a Java array");
            return isFloat() ? new float[(int) n] : new double[(int) n];
        }
        void sameType(Data o, String what) {
            if (o.dtype != dtype) throw new IllegalArgumentException(what + " holds " + (o.isFloat() ? "float" : "double")
                    + " elements, the data " + (isFloat() ? "float" : "double"));
        }
    }

    private static int op(ReductionOperation op) {
        if (op == null) throw new NullPointerException("op");
        return op.code;
    }

    // ---- collectives ----
    /** In place: data[i] = op over ranks of data[i]. */
    public void allReduce(float[] data, ReductionOperation op) { allReduceAny(data, op); }
    public void allReduce(double[] data, ReductionOperation op) { allReduceAny(data, op); }
    public void allReduce(FloatBuffer data, ReductionOperation op) { allReduceAny(data, op); }
    public void allReduce(DoubleBuffer data, ReductionOperation op) { allReduceAny(data, op); }
    private void allReduceAny(Object data, ReductionOperation op) {
        Data d = new Data(data, "data");
        shardopt_native.so_allreduce(handle(), d.ref, d.count, d.dtype, op(op));
    }

    /** In place: every rank's data becomes root's. */
    public void broadcast(float[] data, int root) { broadcastAny(data, root); }
    public void broadcast(double[] data, int root) { broadcastAny(data, root); }
    public void broadcast(FloatBuffer data, int root) { broadcastAny(data, root); }
    public void broadcast(DoubleBuffer data, int root) { broadcastAny(data, root); }
    public void broadcast(float[] data) { broadcastAny(data, 0); }
    public void broadcast(double[] data) { broadcastAny(data, 0); }
    private void broadcastAny(Object data, int root) {
        Data d = new Data(data, "data");
        shardopt_native.so_broadcast(handle(), d.ref, d.count, d.dtype, root);
    }

    /** Every rank's data, concatenated in rank order. */
    public float[] allGather(float[] data) { return (float[]) allGatherAny(data); }
    public double[] allGather(double[] data) { return (double[]) allGatherAny(data); }
    private Object allGatherAny(Object data) {
        Data d = new Data(data, "data");
        Object out = d.newArray(d.count * getWorldSize());
        shardopt_native.so_allgather(handle(), d.ref, out, d.count, d.dtype);
        return out;
    }

    /** data (worldSize * k elements on every rank) reduced with op over ranks; this rank gets its slice k. */
    public float[] reduceScatter(float[] data, ReductionOperation op) { return (float[]) reduceScatterAny(data, op); }
    public double[] reduceScatter(double[] data, ReductionOperation op) { return (double[]) reduceScatterAny(data, op); }
    private Object reduceScatterAny(Object data, ReductionOperation op) {
        Data d = new Data(data, "data");
        int size = getWorldSize();
        if (d.count % size != 0)
            throw new IllegalArgumentException("reduceScatter: data has " + d.count + " elements, not a multiple of the world size " + size);
        Object out = d.newArray(d.count / size);
        shardopt_native.so_reduce_scatter(handle(), d.ref, out, d.count / size, d.dtype, op(op));
        return out;
    }

    /**
     * root's data (worldSize * k elements) split in rank order; each rank gets its slice of k. The C ABI has no
     * scatter: root sends each rank its slice point to point (world - 1 messages of k elements from root);
     * other ranks pass null or an array of the same type (its length is not read).
     */
    public float[] scatter(float[] data, int root) { return (float[]) scatterAny(data, root, true); }
    public double[] scatter(double[] data, int root) { return (double[]) scatterAny(data, root, false); }
    public float[] scatter(float[] data) { return scatter(data, 0); }
    public double[] scatter(double[] data) { return scatter(data, 0); }
    private static final int SCATTER_TAG = 0x5ca7;
    private Object scatterAny(Object data, int root, boolean f32) {
        int size = getWorldSize(), rank = getRank();
        if (root < 0 || root >= size) throw new IllegalArgumentException("root " + root + " outside [0, " + size + ")");
        int dtype = f32 ? shardopt_dtype.SHARDOPT_F32 : shardopt_dtype.SHARDOPT_F64;
        // every rank learns the slice length from root
        long[] k = new long[1];
        double[] kk = new double[1];
        RuntimeException rootError = null;
        if (rank == root) {
            // a mistake on root still reaches the others (slice length -1), so they fail at once instead of waiting
            try {
                Data d = new Data(data, "data");
                if (d.count % size != 0)
                    throw new IllegalArgumentException("scatter: data has " + d.count + " elements, not a multiple of the world size " + size);
                kk[0] = d.count / size;
            } catch (RuntimeException e) {
                rootError = e;
                kk[0] = -1;
            }
        }
        shardopt_native.so_broadcast(handle(), kk, 1, shardopt_dtype.SHARDOPT_F64, root);
        if (rootError != null) throw rootError;
        if (kk[0] < 0) throw new IllegalArgumentException("scatter: root rank " + root + " rejected its data");
        k[0] = (long) kk[0];
        Object out = f32 ? new float[(int) k[0]] : new double[(int) k[0]];
        if (rank == root) {
            for (int r = 0; r < size; ++r) {
                if (f32) {
                    float[] slice = java.util.Arrays.copyOfRange((float[]) data, (int) (r * k[0]), (int) ((r + 1) * k[0]));
                    if (r == root) System.arraycopy(slice, 0, out, 0, slice.length);
                    else shardopt_native.so_send(handle(), slice, k[0], dtype, r, SCATTER_TAG);
                } else {
                    double[] slice = java.util.Arrays.copyOfRange((double[]) data, (int) (r * k[0]), (int) ((r + 1) * k[0]));
                    if (r == root) System.arraycopy(slice, 0, out, 0, slice.length);
                    else shardopt_native.so_send(handle(), slice, k[0], dtype, r, SCATTER_TAG);
                }
            }
        } else {
            shardopt_native.so_recv(handle(), out, k[0], dtype, root, SCATTER_TAG);
        }
        return out;
    }

    /** Point to point (buffered): data to rank dest with tag (>= 0). */
    public void send(float[] data, int dest, int tag) { sendAny(data, dest, tag); }
    public void send(double[] data, int dest, int tag) { sendAny(data, dest, tag); }
    public void send(float[] data, int dest) { sendAny(data, dest, 0); }
    public void send(double[] data, int dest) { sendAny(data, dest, 0); }
    private void sendAny(Object data, int dest, int tag) {
        Data d = new Data(data, "data");
        shardopt_native.so_send(handle(), d.ref, d.count, d.dtype, dest, tag);
    }

    /** Receives count floats from rank source with tag (AiDotNet's Receive(source, count, tag)). */
    public float[] receiveFloat(int source, int count, int tag) { return (float[]) receiveAny(new float[checkCount(count)], source, tag); }
    public double[] receive(int source, int count, int tag) { return (double[]) receiveAny(new double[checkCount(count)], source, tag); }
    public double[] receive(int source, int count) { return receive(source, count, 0); }
    /** Receives into data (its whole length). */
    public void receive(float[] data, int source, int tag) { receiveAny(data, source, tag); }
    public void receive(double[] data, int source, int tag) { receiveAny(data, source, tag); }
    private static int checkCount(int count) {
        if (count < 0) throw new IllegalArgumentException("count must be >= 0 (got " + count + ")");
        return count;
    }
    private Object receiveAny(Object data, int source, int tag) {
        Data d = new Data(data, "data");
        shardopt_native.so_recv(handle(), d.ref, d.count, d.dtype, source, tag);
        return data;
    }

    /** A Float/DoubleBuffer over bytes in another order would be reinterpreted by native code. */
    static void nativeOrder(Object data, String what) {
        java.nio.ByteOrder o = data instanceof FloatBuffer ? ((FloatBuffer) data).order()
                             : data instanceof DoubleBuffer ? ((DoubleBuffer) data).order() : null;
        if (o != null && o != java.nio.ByteOrder.nativeOrder())
            throw new IllegalArgumentException(what + " is in " + o + " byte order; native code reads " + java.nio.ByteOrder.nativeOrder()
                    + " (make it with ByteBuffer.allocateDirect(n).order(ByteOrder.nativeOrder()))");
    }

    static Buffer direct(Buffer b) {
        if (b == null) throw new NullPointerException("buffer");
        if (!b.isDirect()) throw new IllegalArgumentException("buffer must be direct (ByteBuffer.allocateDirect)");
        return b instanceof FloatBuffer ? ((FloatBuffer) b).slice()
             : b instanceof DoubleBuffer ? ((DoubleBuffer) b).slice()
             : b instanceof ByteBuffer ? ((ByteBuffer) b).slice() : b;
    }

    /** Releases this rank's handle (optimizers built over it keep the communicator alive). */
    @Override
    public void close() {
        if (handle != null) {
            SWIGTYPE_p_shardopt_comm_s h = handle;
            handle = null;
            shardopt_native.so_comm_destroy(h);
        }
    }

    /** AiDotNet's Shutdown(): close(). */
    public void shutdown() { close(); }
}
