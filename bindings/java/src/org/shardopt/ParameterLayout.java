package org.shardopt;

import java.util.ArrayList;
import java.util.List;
import org.shardopt.internal.SWIGTYPE_p_shardopt_params_s;
import org.shardopt.internal.shardopt_native;

/** The model's tensors in order (name, element count). endBucket() closes a gradient bucket (an FSDP unit); otherwise the
 *  configuration's MinimumParameterGroupSize groups them; addMatrix declares a row-major matrix (PowerSGD approximates
 *  those). new ParameterLayout() takes its element type from the model's T (Double: FLOAT64, Float: FLOAT32), or without
 *  a model from the initial parameters (float[] or double[]; none: FLOAT32). */
public final class ParameterLayout {
    static { NativeLoader.load(); }
    public enum Precision {
        FLOAT32, FLOAT64; // ordinal: shardopt_dtype's SHARDOPT_F32, SHARDOPT_F64
        int size() { return this == FLOAT32 ? 4 : 8; }
        static Precision of(Object data, Precision otherwise) {
            return data instanceof float[] || data instanceof java.nio.FloatBuffer ? FLOAT32
                 : data instanceof double[] || data instanceof java.nio.DoubleBuffer ? FLOAT64 : otherwise;
        }
        /** A new float[] or double[] of n elements. */
        Object array(long n) { return this == FLOAT32 ? new float[(int) n] : new double[(int) n]; }
    }
    private final Precision precision;
    private final List<Object[]> tensors = new ArrayList<>(); // name, count, tensor-parallel replicated, ends a bucket, rows, cols
    public ParameterLayout() { this.precision = null; }
    public ParameterLayout(Precision precision) { this.precision = java.util.Objects.requireNonNull(precision, "precision"); }
    public ParameterLayout add(String name, long count) { return add(name, count, false); }
    public ParameterLayout add(String name, long count, boolean tensorParallelReplicated) {
        if (name == null) throw new NullPointerException("name");
        if (count < 1) throw new IllegalArgumentException("tensor '" + name + "': count must be >= 1 (got " + count + ")");
        if (count > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("tensor '" + name + "': " + count + " elements do not fit in a Java array");
        tensors.add(new Object[] {name, count, tensorParallelReplicated ? 1 : 0, false, 0L, 0L});
        return this;
    }
    /** A rows x cols row-major matrix (rows * cols elements). */
    public ParameterLayout addMatrix(String name, long rows, long cols) { return addMatrix(name, rows, cols, false); }
    public ParameterLayout addMatrix(String name, long rows, long cols, boolean tensorParallelReplicated) {
        if (rows < 1 || cols < 1) throw new IllegalArgumentException("tensor '" + name + "': rows and cols must be >= 1 (got " + rows + " x " + cols + ")");
        add(name, rows * cols, tensorParallelReplicated);
        tensors.get(tensors.size() - 1)[4] = rows;
        tensors.get(tensors.size() - 1)[5] = cols;
        return this;
    }
    public ParameterLayout endBucket() {
        if (!tensors.isEmpty()) tensors.get(tensors.size() - 1)[3] = true;
        return this;
    }
    /** FLOAT32, FLOAT64, or null: the model's T decides. */
    public Precision getPrecision() { return precision; }
    public long getElementCount() { return tensors.stream().mapToLong(t -> (Long) t[1]).sum(); }
    public int getTensorCount() { return tensors.size(); }
    SWIGTYPE_p_shardopt_params_s toNative(Precision p) {
        SWIGTYPE_p_shardopt_params_s n = shardopt_native.shardopt_params_create(p.ordinal(), 0);
        try {
            for (Object[] t : tensors) {
                if ((Long) t[4] > 0) shardopt_native.shardopt_params_add_matrix(n, (String) t[0], (Long) t[4], (Long) t[5], (Integer) t[2]);
                else shardopt_native.shardopt_params_add(n, (String) t[0], (Long) t[1], (Integer) t[2]);
                if ((Boolean) t[3]) shardopt_native.shardopt_params_end_bucket(n);
            }
            return n;
        } catch (RuntimeException e) {
            shardopt_native.shardopt_params_destroy(n);
            throw e;
        }
    }
}
