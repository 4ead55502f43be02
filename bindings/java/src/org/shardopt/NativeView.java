package org.shardopt;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.shardopt.ParameterLayout.Precision;
import org.shardopt.internal.shardopt_native;

/** A view of float32 or float64 elements in the library's memory (parameters, gradients, a gathered FSDP unit, a
 *  callback's arguments), without a copy. Every access checks the index and that the memory is still there (its owner
 *  not closed, the unit not released, the callback not returned), else IllegalStateException. Elements are read and
 *  written as double (rounded to float in a float32 view); the array copies check the element type. A view of an
 *  optimizer in CUDA memory (isDevice) is device memory: its element accessors throw IllegalStateException (a host read
 *  would crash) and getDeviceAddress() (checked as above) hands it, with size(), to a CUDA library. */
public final class NativeView {
    private final ByteBuffer buf;
    private final Precision precision;
    private final int size;
    private final Lifetime life;
    private final long deviceAddress; // 0: host memory
    /** Whether the memory is still there, and if not why. */
    static final class Lifetime {
        private volatile String closedBy;
        private final String owner;
        Lifetime(String owner) { this.owner = owner; }
        void invalidate(String why) { if (closedBy == null) closedBy = why; }
        void check() { if (closedBy != null) throw new IllegalStateException("this view of " + owner + " is no longer valid: " + closedBy); }
    }
    NativeView(long address, long count, Precision precision, Lifetime life, boolean readOnly) {
        this(address, count, precision, life, readOnly, false);
    }
    NativeView(long address, long count, Precision precision, Lifetime life, boolean readOnly, boolean device) {
        ByteBuffer b = device ? null : shardopt_native.so_view(address, count * precision.size());
        this.buf = b == null ? null : (readOnly ? b.asReadOnlyBuffer() : b).order(ByteOrder.nativeOrder());
        this.deviceAddress = device ? address : 0;
        this.precision = precision;
        this.size = (int) count;
        this.life = life;
    }
    /** Whether this view is CUDA device memory (an optimizer in MemorySpace.CUDA). */
    public boolean isDevice() { return deviceAddress != 0; }
    /** The device address of a device view; IllegalStateException for a host view (use get/set/copyFrom). */
    public long getDeviceAddress() {
        life.check();
        if (deviceAddress == 0) throw new IllegalStateException("this view is host memory: use get, set, copyFrom or toFloatArray");
        return deviceAddress;
    }
    private void onHost() {
        if (deviceAddress != 0)
            throw new IllegalStateException("this view is CUDA device memory: it cannot be read on the host; pass getDeviceAddress() to a "
                                            + "CUDA library, or use getParameters(float[]) for a host copy");
    }
    public Precision getPrecision() { life.check(); return precision; }
    /** Elements in the view. */
    public int size() { life.check(); return size; }
    public boolean isValid() { return life.closedBy == null; }
    private int at(int i) {
        life.check();
        onHost();
        if (i < 0 || i >= size) throw new IndexOutOfBoundsException("index " + i + " outside [0, " + size + ")");
        return i * precision.size();
    }
    public double get(int i) { int o = at(i); return precision == Precision.FLOAT32 ? buf.getFloat(o) : buf.getDouble(o); }
    public void set(int i, double v) { int o = at(i); if (precision == Precision.FLOAT32) buf.putFloat(o, (float) v); else buf.putDouble(o, v); }
    public void add(int i, double v) { set(i, get(i) + v); }
    private ByteBuffer need(Precision p, String what, int length) {
        life.check();
        onHost();
        if (p != precision) throw new IllegalArgumentException(what + " is " + p + " but the view holds " + precision + " elements");
        if (length != size) throw new IllegalArgumentException(what + " has " + length + " elements, the view " + size);
        return buf.duplicate().order(ByteOrder.nativeOrder());
    }
    public float[] toFloatArray() { float[] a = new float[size()]; need(Precision.FLOAT32, "a float[]", a.length).asFloatBuffer().get(a); return a; }
    public double[] toDoubleArray() { double[] a = new double[size()]; need(Precision.FLOAT64, "a double[]", a.length).asDoubleBuffer().get(a); return a; }
    public void copyFrom(float[] src) { need(Precision.FLOAT32, "a float[]", src.length).asFloatBuffer().put(src); }
    public void copyFrom(double[] src) { need(Precision.FLOAT64, "a double[]", src.length).asDoubleBuffer().put(src); }
    /** Sets every element to v. */
    public void fill(double v) { for (int i = 0; i < size(); ++i) set(i, v); }
}
