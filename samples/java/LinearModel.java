import org.shardopt.IGradientModel;
import org.shardopt.NativeView;
import org.shardopt.ParameterLayout;
import org.shardopt.Tensor;

/**
 * The model class of the seed example's port (it stands where AiDotNet's model class stood): the conformance suite's
 * linear model (tests/bindings/conformance/README.md, "The model"), y = weight . x + bias on rows of a Tensor X (n x 8)
 * and targets Y (n), loss the mean of err^2 / 2, every operation in the README's order so that every language computes
 * the same bits. features/targets build its data set.
 */
public final class LinearModel implements IGradientModel<Double, Tensor<Double>, Tensor<Double>> {
    static final int FEATURES = 8;
    private double[] parameters = new double[FEATURES + 1];

    /** Rows [from, from + n): x[r][j] = ((7r + 3j) mod 11 - 5) / 8. */
    public static Tensor<Double> features(int from, int n) {
        double[] x = new double[n * FEATURES];
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < FEATURES; ++j) x[i * FEATURES + j] = (double) ((7 * (from + i) + 3 * j) % 11 - 5) / 8.0;
        return Tensor.of(new int[] {n, FEATURES}, x);
    }

    /** y[r] = (sum over j in order of 0.125 (j + 1) x[r][j]) + 0.25 + ((37r) mod 17 - 8) / 16. */
    public static Tensor<Double> targets(int from, int n) {
        Tensor<Double> x = features(from, n);
        double[] y = new double[n];
        for (int i = 0; i < n; ++i) {
            double acc = 0.0;
            for (int j = 0; j < FEATURES; ++j) acc += 0.125 * (double) (j + 1) * x.get(i, j);
            y[i] = acc + 0.25 + (double) ((37 * (from + i)) % 17 - 8) / 16.0;
        }
        return Tensor.of(new int[] {n}, y);
    }

    @Override public ParameterLayout getParameterLayout() { return new ParameterLayout().add("weight", FEATURES).add("bias", 1); }
    @Override public Object getParameters() { return parameters.clone(); }
    @Override public void setParameters(Object p) { parameters = ((double[]) p).clone(); }
    @Override public long getSampleCount(Tensor<Double> x) { return x.getShape()[0]; }

    @Override
    public double computeLossAndGradient(NativeView p, NativeView g, Tensor<Double> x, Tensor<Double> y, long[] samples) {
        double[] w = p.toDoubleArray(), gw = new double[FEATURES];
        double loss = 0.0, gb = 0.0;
        for (long s : samples) {
            int i = (int) s;
            double pred = 0.0;
            for (int j = 0; j < FEATURES; ++j) pred += w[j] * x.get(i, j);
            double err = pred + w[FEATURES] - y.get(i);
            loss += 0.5 * err * err;
            for (int j = 0; j < FEATURES; ++j) gw[j] += err * x.get(i, j);
            gb += err;
        }
        double m = samples.length;
        if (g != null) { // null: only the loss is asked for
            for (int j = 0; j < FEATURES; ++j) g.set(j, gw[j] / m);
            g.set(FEATURES, gb / m);
        }
        return loss / m;
    }
}
