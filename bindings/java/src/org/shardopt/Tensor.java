package org.shardopt;

import java.util.Arrays;

/** A dense row-major tensor (the part of AiDotNet's Tensor&lt;T&gt; a model needs): {@code Tensor.of(shape, double[])}
 *  is a Tensor&lt;Double&gt;, {@code Tensor.of(shape, float[])} a Tensor&lt;Float&gt; (the data copied). */
public final class Tensor<T> {
    private final int[] shape;
    private final double[] doubles;
    private final float[] floats;
    private Tensor(int[] shape, double[] doubles, float[] floats) {
        long n = 1;
        for (int d : shape) n *= d >= 0 ? d : -1;
        int length = doubles != null ? doubles.length : floats.length;
        if (n != length) throw new IllegalArgumentException("data has " + length + " elements; shape " + Arrays.toString(shape) + " needs " + n);
        this.shape = shape.clone();
        this.doubles = doubles;
        this.floats = floats;
    }
    public static Tensor<Double> of(int[] shape, double[] data) { return new Tensor<>(shape, data.clone(), null); }
    public static Tensor<Float> of(int[] shape, float[] data) { return new Tensor<>(shape, null, data.clone()); }
    public int[] getShape() { return shape.clone(); }
    public int getRank() { return shape.length; }
    public int getLength() { return doubles != null ? doubles.length : floats.length; }
    /** The element at index (one index per dimension). */
    public double get(int... index) { int o = offset(index); return doubles != null ? doubles[o] : floats[o]; }
    public void set(double value, int... index) { int o = offset(index); if (doubles != null) doubles[o] = value; else floats[o] = (float) value; }
    private int offset(int[] index) {
        if (index.length != shape.length) throw new IllegalArgumentException("a tensor of rank " + shape.length + " takes " + shape.length + " indices");
        int o = 0;
        for (int i = 0; i < index.length; ++i) {
            if (index[i] < 0 || index[i] >= shape[i]) throw new IndexOutOfBoundsException("index " + index[i] + " of dimension " + i + " (size " + shape[i] + ")");
            o = o * shape[i] + index[i];
        }
        return o;
    }
}
