package org.shardopt;

import java.nio.Buffer;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import org.shardopt.internal.SWIGTYPE_p_shardopt_comm_s;
import org.shardopt.internal.shardopt_dtype;
import org.shardopt.internal.shardopt_native;

/** One rank's communicator (AiDotNet's ICommunicationBackend). Collectives work in place, without copies
 * for direct buffers. */
public class CommunicationBackend implements AutoCloseable {
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
    public void setTimeout(long milliseconds) { shardopt_native.so_comm_set_timeout(handle(), milliseconds); }
    public void barrier() { shardopt_native.so_barrier(handle()); }
    /** Pending and later collectives fail on every rank (in-process: the whole group). */
    public void abort(String reason) { shardopt_native.so_comm_abort(handle(), reason); }

    public void allReduce(float[] data, ReductionOperation op) { reduce(data, data.length, shardopt_dtype.SHARDOPT_F32, op); }
    public void allReduce(double[] data, ReductionOperation op) { reduce(data, data.length, shardopt_dtype.SHARDOPT_F64, op); }
    public void allReduce(FloatBuffer data, ReductionOperation op) { reduce(direct(data), data.remaining(), shardopt_dtype.SHARDOPT_F32, op); }
    public void allReduce(DoubleBuffer data, ReductionOperation op) { reduce(direct(data), data.remaining(), shardopt_dtype.SHARDOPT_F64, op); }
    public void broadcast(float[] data, int root) { shardopt_native.so_broadcast(handle(), data, data.length, shardopt_dtype.SHARDOPT_F32, root); }
    public void broadcast(double[] data, int root) { shardopt_native.so_broadcast(handle(), data, data.length, shardopt_dtype.SHARDOPT_F64, root); }

    /** Every rank's data, concatenated in rank order. */
    public float[] allGather(float[] data) {
        float[] out = new float[data.length * getWorldSize()];
        shardopt_native.so_allgather(handle(), data, out, data.length, shardopt_dtype.SHARDOPT_F32);
        return out;
    }

    private void reduce(Object data, long count, int dtype, ReductionOperation op) {
        if (op == null) throw new NullPointerException("op");
        shardopt_native.so_allreduce(handle(), data, count, dtype, op.code);
    }

    static Buffer direct(Buffer b) {
        if (b == null) throw new NullPointerException("buffer");
        if (!b.isDirect()) throw new IllegalArgumentException("buffer must be direct (ByteBuffer.allocateDirect)");
        return b instanceof FloatBuffer ? ((FloatBuffer) b).slice()
             : b instanceof DoubleBuffer ? ((DoubleBuffer) b).slice() : b;
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

    public void shutdown() { close(); }
}
