using System;
using System.Linq;

namespace Shardopt.DistributedTraining
{
    /// <summary>The model a base optimizer is built with (after AiDotNet's IFullModel): its tensors, its current
    /// parameters, and the mean loss and gradient over selected samples of an input.</summary>
    public interface IGradientModel<T, TInput, TOutput> where T : struct
    {
        /// <summary>The tensors (names and element counts) in packed order.</summary>
        ParameterLayout GetParameterLayout();
        /// <summary>The current packed parameters (the initial ones before training).</summary>
        T[] GetParameters();
        /// <summary>Called after Optimize with the best solution.</summary>
        void SetParameters(T[] parameters);
        /// <summary>How many samples x holds (the first dimension).</summary>
        int SampleCount(TInput x);
        /// <summary>The mean loss over x[samples] against y[samples] at parameters, with the mean gradient written
        /// into gradient (zeroed on entry). The spans view library memory for the call only.</summary>
        double ComputeLossAndGradient(ReadOnlySpan<T> parameters, Span<T> gradient, TInput x, TOutput y, ReadOnlySpan<long> samples);
    }

    /// <summary>A dense row-major tensor (the part of AiDotNet's Tensor&lt;T&gt; a model needs).</summary>
    public sealed class Tensor<T> where T : struct
    {
        public Tensor(int[] shape)
        {
            if (shape == null) throw new ArgumentNullException(nameof(shape));
            if (shape.Any(d => d < 0)) throw new ArgumentOutOfRangeException(nameof(shape), "dimensions must be >= 0");
            Shape = (int[])shape.Clone();
            long n = 1;
            foreach (var d in shape) n *= d;
            Data = new T[n];
        }

        public Tensor(int[] shape, T[] data) : this(shape)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            if (data.Length != Data.Length) throw new ArgumentException($"data has {data.Length} elements; shape [{string.Join(", ", Shape)}] needs {Data.Length}", nameof(data));
            Array.Copy(data, Data, data.Length);
        }

        public int[] Shape { get; }
        public int Rank => Shape.Length;
        public int Length => Data.Length;
        /// <summary>The elements, row-major.</summary>
        public T[] Data { get; }

        public T this[params int[] index]
        {
            get => Data[Offset(index)];
            set => Data[Offset(index)] = value;
        }

        int Offset(int[] index)
        {
            if (index == null || index.Length != Shape.Length)
                throw new ArgumentException($"a tensor of rank {Shape.Length} takes {Shape.Length} indices");
            long off = 0;
            for (int i = 0; i < index.Length; ++i)
            {
                if ((uint)index[i] >= (uint)Shape[i]) throw new IndexOutOfRangeException($"index {index[i]} of dimension {i} (size {Shape[i]})");
                off = off * Shape[i] + index[i];
            }
            return (int)off;
        }
    }

    /// <summary>AiDotNet's OptimizationInputData: training, validation and test sets. Validation (when given)
    /// chooses the best solution and drives early stopping; test is only reported.</summary>
    public class OptimizationInputData<T, TInput, TOutput> where T : struct
    {
        public TInput XTrain { get; set; }
        public TOutput YTrain { get; set; }
        public TInput XValidation { get; set; }
        public TOutput YValidation { get; set; }
        public TInput XTest { get; set; }
        public TOutput YTest { get; set; }
    }

    /// <summary>The loss of the best solution on one data set (NaN and 0 samples when the set was not given).</summary>
    public sealed class DatasetResult
    {
        public double Loss { get; internal set; } = double.NaN;
        public int SampleCount { get; internal set; }
        public bool Present => SampleCount > 0;
    }

    public class OptimizationResult<T> where T : struct
    {
        public T[] BestSolution { get; internal set; }
        /// <summary>The best score: validation loss when XValidation was given, else the epoch's training loss.</summary>
        public double BestFitnessScore { get; internal set; }
        /// <summary>Optimizer steps taken.</summary>
        public long Iterations { get; internal set; }
        public int Epochs { get; internal set; }
        /// <summary>The score of each epoch (see BestFitnessScore).</summary>
        public double[] FitnessHistory { get; internal set; }
        /// <summary>The mean training loss of each epoch (over its batches).</summary>
        public double[] TrainingLossHistory { get; internal set; }
        public DatasetResult TrainingResult { get; internal set; } = new DatasetResult();
        public DatasetResult ValidationResult { get; internal set; } = new DatasetResult();
        public DatasetResult TestResult { get; internal set; } = new DatasetResult();
        public bool StoppedEarly { get; internal set; }
    }

    /// <summary>The learning rate of each epoch, from the rate the optimizer had when Optimize started.</summary>
    public abstract class LearningRateSchedule
    {
        public abstract double Rate(int epoch, double baseRate);

        sealed class Func : LearningRateSchedule
        {
            readonly Func<int, double, double> f;
            public Func(Func<int, double, double> f) { this.f = f ?? throw new ArgumentNullException(nameof(f)); }
            public override double Rate(int epoch, double baseRate) => f(epoch, baseRate);
        }

        /// <summary>Linear warm-up from baseRate/epochs to baseRate over the first epochs, then constant.</summary>
        public static LearningRateSchedule Warmup(int epochs)
        {
            if (epochs < 1) throw new ArgumentOutOfRangeException(nameof(epochs), epochs, "warm-up epochs must be >= 1");
            return new Func((e, b) => e < epochs ? b * (e + 1) / epochs : b);
        }

        /// <summary>Cosine annealing from baseRate (epoch 0) to minRate (epoch totalEpochs).</summary>
        public static LearningRateSchedule Cosine(int totalEpochs, double minRate = 0)
        {
            if (totalEpochs < 1) throw new ArgumentOutOfRangeException(nameof(totalEpochs), totalEpochs, "must be >= 1");
            return new Func((e, b) => minRate + (b - minRate) * 0.5 * (1 + Math.Cos(Math.PI * Math.Min(e, totalEpochs) / totalEpochs)));
        }

        /// <summary>baseRate * gamma^(epoch / stepSize).</summary>
        public static LearningRateSchedule StepDecay(int stepSize, double gamma)
        {
            if (stepSize < 1) throw new ArgumentOutOfRangeException(nameof(stepSize), stepSize, "must be >= 1");
            return new Func((e, b) => b * Math.Pow(gamma, e / stepSize));
        }

        /// <summary>Any rule: rate(epoch, baseRate).</summary>
        public static LearningRateSchedule FromFunction(Func<int, double, double> rate) => new Func(rate);
    }
}
