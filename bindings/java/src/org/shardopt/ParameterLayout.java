package org.shardopt;

import java.util.ArrayList;
import java.util.List;
import org.shardopt.internal.SWIGTYPE_p_shardopt_params_s;
import org.shardopt.internal.shardopt_dtype;
import org.shardopt.internal.shardopt_native;

/** The model's tensors in order (name, element count). {@link #endBucket()} closes a gradient bucket (an
 * FSDP unit); otherwise tensors are grouped into buckets of the configuration's MinimumParameterGroupSize.
 * {@link #addMatrix} declares a row-major matrix: the tensors PowerSGD compression approximates. */
public final class ParameterLayout {
    static { NativeLoader.load(); }

    public enum Precision { FLOAT32, FLOAT64 }

    private final Precision precision;
    private final List<Object[]> tensors = new ArrayList<>(); // name, count, tpReplicated, endsBucket, rows, cols

    public ParameterLayout() { this(Precision.FLOAT32); }

    public ParameterLayout(Precision precision) {
        if (precision == null) throw new NullPointerException("precision");
        this.precision = precision;
    }

    public ParameterLayout add(String name, long count) { return add(name, count, false); }

    public ParameterLayout add(String name, long count, boolean tensorParallelReplicated) {
        if (name == null) throw new NullPointerException("name");
        if (count < 1) throw new IllegalArgumentException("tensor '" + name + "': count must be >= 1 (got " + count + ")");
        if (count > Integer.MAX_VALUE - 8)
            throw new IllegalArgumentException("tensor '" + name + "': " + count + " elements do not fit in a Java array");
        tensors.add(new Object[] {name, count, tensorParallelReplicated, false, 0L, 0L});
        return this;
    }

    /** A rows x cols row-major matrix (rows * cols elements), which PowerSGD compression approximates. */
    public ParameterLayout addMatrix(String name, long rows, long cols) { return addMatrix(name, rows, cols, false); }

    public ParameterLayout addMatrix(String name, long rows, long cols, boolean tensorParallelReplicated) {
        if (name == null) throw new NullPointerException("name");
        if (rows < 1 || cols < 1)
            throw new IllegalArgumentException("tensor '" + name + "': rows and cols must be >= 1 (got " + rows + " x " + cols + ")");
        if (rows > (Integer.MAX_VALUE - 8) / cols)
            throw new IllegalArgumentException("tensor '" + name + "': " + rows + " x " + cols + " elements do not fit in a Java array");
        add(name, rows * cols, tensorParallelReplicated);
        Object[] t = tensors.get(tensors.size() - 1);
        t[4] = rows;
        t[5] = cols;
        return this;
    }

    public ParameterLayout endBucket() {
        if (!tensors.isEmpty()) tensors.get(tensors.size() - 1)[3] = true;
        return this;
    }

    public Precision getPrecision() { return precision; }
    int dtype() { return precision == Precision.FLOAT32 ? shardopt_dtype.SHARDOPT_F32 : shardopt_dtype.SHARDOPT_F64; }
    int elementSize() { return precision == Precision.FLOAT32 ? 4 : 8; }

    public long getElementCount() {
        long n = 0;
        for (Object[] t : tensors) n += (Long) t[1];
        return n;
    }

    public int getTensorCount() { return tensors.size(); }

    SWIGTYPE_p_shardopt_params_s toNative(long bucketElements) {
        SWIGTYPE_p_shardopt_params_s p = shardopt_native.so_params_create(dtype(), bucketElements * elementSize());
        try {
            for (Object[] t : tensors) {
                if ((Long) t[4] > 0)
                    shardopt_native.so_params_add_matrix(p, (String) t[0], (Long) t[4], (Long) t[5], (Boolean) t[2] ? 1 : 0);
                else
                    shardopt_native.so_params_add(p, (String) t[0], (Long) t[1], (Boolean) t[2] ? 1 : 0);
                if ((Boolean) t[3]) shardopt_native.so_params_end_bucket(p);
            }
        } catch (RuntimeException e) {
            shardopt_native.so_params_destroy(p);
            throw e;
        }
        return p;
    }
}
