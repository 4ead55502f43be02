import org.shardopt.IGradientModel;
import org.shardopt.NativeView;
import org.shardopt.ParameterLayout;

/**
 * The model class of the seed example's port (it stands where AiDotNet's model class stood): a linear
 * regression y = weight . x + bias on rows of double[][] X and targets double[] Y, mean squared error / 2.
 * Its arithmetic is the reference model's (tests/bindings/reference_f64.cpp), in the same order, so the
 * f64 path is compared with the C++ core bit for bit. data(n, d) builds the reference data set.
 */
public final class LinearModel implements IGradientModel<Double, double[][], double[]> {
    private final int features;
    private double[] parameters;

    public LinearModel(int features) {
        this.features = features;
        this.parameters = new double[features + 1];
    }

    /** x[i][j] = ((7i + 3j) mod 11 - 5) / 8 for rows [from, from + n). */
    public static double[][] features(int from, int n, int d) {
        double[][] x = new double[n][d];
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < d; ++j) x[i][j] = (double) ((7 * (from + i) + 3 * j) % 11 - 5) / 8.0;
        return x;
    }

    /** y[i] = (sum over j in order of 0.125 (j + 1) x[i][j]) + 0.25. */
    public static double[] targets(double[][] x) {
        double[] y = new double[x.length];
        for (int i = 0; i < x.length; ++i) {
            double acc = 0.0;
            for (int j = 0; j < x[i].length; ++j) acc += 0.125 * (double) (j + 1) * x[i][j];
            y[i] = acc + 0.25;
        }
        return y;
    }

    @Override
    public ParameterLayout getParameterLayout() {
        return new ParameterLayout(ParameterLayout.Precision.FLOAT64).add("weight", features).add("bias", 1);
    }

    @Override public Object getParameters() { return parameters.clone(); }
    @Override public void setParameters(Object p) { parameters = ((double[]) p).clone(); }
    @Override public long getSampleCount(double[][] x) { return x.length; }

    @Override
    public double computeLossAndGradient(NativeView p, NativeView g, double[][] x, double[] y, long[] samples) {
        double[] w = p.toDoubleArray();
        double loss = 0.0, gb = 0.0;
        double[] gw = new double[features];
        for (long s : samples) {
            int i = (int) s;
            double pred = 0.0;
            for (int j = 0; j < features; ++j) pred += w[j] * x[i][j];
            double err = pred + w[features] - y[i];
            loss += 0.5 * err * err;
            for (int j = 0; j < features; ++j) gw[j] += err * x[i][j];
            gb += err;
        }
        int m = samples.length;
        for (int j = 0; j < features; ++j) g.set(j, gw[j] / (double) m);
        g.set(features, gb / (double) m);
        return loss / (double) m;
    }
}
