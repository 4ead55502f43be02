package org.shardopt;

import org.shardopt.ParameterLayout.Precision;

/** CUDA device (or managed) memory of the caller's, as a CUDA library hands it out: {@code count} elements of
 *  {@code precision} at device address {@code address}, used by the caller on CUDA stream {@code stream} (a cudaStream_t
 *  as a long; 0: the legacy default stream). An optimizer in {@link MemorySpace#CUDA} keeps its parameters there
 *  ({@link ShardedOptimizer#initialize(ParameterLayout, Object, DeviceMemory)}): updated in place on its compute stream,
 *  never freed by the library, so keep it allocated until the optimizer is closed. Checked when made (a non-zero address
 *  aligned to the element size, at least one element); the library checks its element type and count against the layout
 *  and that it is device memory of the optimizer's GPU. */
public final class DeviceMemory {
    private final long address, count, stream; // read by the JNI typemap of create_external (shardopt_java.i)
    private final int dtype; // shardopt_dtype: the Precision's ordinal
    private final Precision precision;

    public DeviceMemory(long address, long count, Precision precision) { this(address, count, precision, 0); }

    public DeviceMemory(long address, long count, Precision precision, long stream) {
        this.precision = java.util.Objects.requireNonNull(precision, "precision");
        if (address == 0) throw new IllegalArgumentException("address is 0: pass the address of a CUDA allocation (cudaMalloc, a tensor's data pointer)");
        if (address % precision.size() != 0)
            throw new IllegalArgumentException("address 0x" + Long.toHexString(address) + " is not aligned to " + precision + " (" + precision.size() + " bytes)");
        if (count < 1 || count > Long.MAX_VALUE / precision.size())
            throw new IllegalArgumentException("count must be at least 1 element (got " + count + ")");
        this.address = address;
        this.count = count;
        this.stream = stream;
        this.dtype = precision.ordinal();
    }

    /** The device address of the first element. */
    public long getAddress() { return address; }
    /** Elements of {@link #getPrecision()}. */
    public long getCount() { return count; }
    public Precision getPrecision() { return precision; }
    /** The CUDA stream the caller uses this memory on (0: the legacy default stream). initialize orders it after the
     *  optimizer's creation (the initial parameters written there), as {@link ShardedOptimizer#orderStream} does; work the
     *  caller enqueued on the memory before initialize must have finished (the library cannot wait for a stream of yours). */
    public long getStream() { return stream; }
    @Override public String toString() {
        return "DeviceMemory(0x" + Long.toHexString(address) + ", " + count + " x " + precision + ", stream 0x" + Long.toHexString(stream) + ")";
    }
}
