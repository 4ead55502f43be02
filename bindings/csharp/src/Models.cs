// The model, the data and the result of Optimize (AiDotNet's IFullModel, Tensor, OptimizationInputData and
// OptimizationResult, as far as a port needs them).
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
        /// <summary>The mean loss over x[samples] against y[samples] at parameters, with the mean gradient written into
        /// gradient (zeroed on entry; scratch where only the loss is wanted). The spans view library memory during the call.</summary>
        double ComputeLossAndGradient(ReadOnlySpan<T> parameters, Span<T> gradient, TInput x, TOutput y, ReadOnlySpan<long> samples);
    }

    /// <summary>The data set a call of the model is about (values are the C ABI's shardopt_dataset).</summary>
    public enum Dataset { Training = 0, Validation = 1, Test = 2 }

    /// <summary>The model of the lower-level Optimize: the mean loss over the training samples at the parameters, with
    /// the mean gradient written into gradient (zeroed on entry). Spans view the library's memory during the call.</summary>
    public delegate double GradientModel(ReadOnlySpan<float> parameters, Span<float> gradient, ReadOnlySpan<long> samples);
    public delegate double GradientModel<T>(ReadOnlySpan<T> parameters, Span<T> gradient, ReadOnlySpan<long> samples) where T : struct;
    /// <summary>GradientModel over the three data sets (samples index the given set; gradient is scratch for the
    /// validation and test sets and the final evaluation, which want the loss only).</summary>
    public delegate double DatasetModel<T>(Dataset dataset, ReadOnlySpan<T> parameters, Span<T> gradient, ReadOnlySpan<long> samples) where T : struct;

    /// <summary>A dense row-major tensor (the part of AiDotNet's Tensor&lt;T&gt; a model needs).</summary>
    public sealed class Tensor<T> where T : struct
    {
        public Tensor(int[] shape)
        {
            if (shape == null) throw new ArgumentNullException(nameof(shape));
            if (shape.Any(d => d < 0)) throw new ArgumentOutOfRangeException(nameof(shape), "dimensions must be >= 0");
            Shape = (int[])shape.Clone();
            Data = new T[shape.Aggregate(1L, (n, d) => n * d)];
        }

        public Tensor(int[] shape, T[] data) : this(shape)
        {
            if ((data ?? throw new ArgumentNullException(nameof(data))).Length != Data.Length)
                throw new ArgumentException($"data has {data.Length} elements; shape [{string.Join(", ", Shape)}] needs {Data.Length}", nameof(data));
            Array.Copy(data, Data, data.Length);
        }

        public int[] Shape { get; }
        public int Rank => Shape.Length;
        public int Length => Data.Length;
        /// <summary>The elements, row-major.</summary>
        public T[] Data { get; }

        public T this[params int[] index] { get => Data[Offset(index)]; set => Data[Offset(index)] = value; }

        int Offset(int[] index)
        {
            if (index == null || index.Length != Shape.Length) throw new ArgumentException($"a tensor of rank {Shape.Length} takes {Shape.Length} indices");
            long off = 0;
            for (int i = 0; i < index.Length; ++i)
            {
                if ((uint)index[i] >= (uint)Shape[i]) throw new IndexOutOfRangeException($"index {index[i]} of dimension {i} (size {Shape[i]})");
                off = off * Shape[i] + index[i];
            }
            return (int)off;
        }
    }

    /// <summary>AiDotNet's OptimizationInputData: the training, validation and test sets (data only; the training
    /// settings are the options'). Validation data, when given, scores each epoch; the test set is only reported.</summary>
    public class OptimizationInputData<T, TInput, TOutput> where T : struct
    {
        public TInput XTrain { get; set; }
        public TOutput YTrain { get; set; }
        public TInput XValidation { get; set; }
        public TOutput YValidation { get; set; }
        public TInput XTest { get; set; }
        public TOutput YTest { get; set; }
    }

    /// <summary>The data of the lower-level Optimize: the sizes of the sets its model delegate indexes.</summary>
    public sealed class OptimizationInputData
    {
        public long NumSamples { get; set; }
        /// <summary>With a DatasetModel only: the validation and test sets (0: none).</summary>
        public long NumValidationSamples { get; set; }
        public long NumTestSamples { get; set; }
    }

    /// <summary>The loss of the best solution over one whole data set (NaN and 0 samples when the set was not given).</summary>
    public sealed class DatasetResult
    {
        public double Loss { get; internal set; } = double.NaN;
        public long SampleCount { get; internal set; }
        public bool Present => SampleCount > 0;
    }

    /// <summary>What Optimize returns (shardopt_training_result). The score of an epoch is its validation loss when
    /// validation data was given, else its mean training loss; the best epoch is the first with the lowest score.</summary>
    public class OptimizationResult<T> where T : struct
    {
        /// <summary>The parameters at the end of the best epoch.</summary>
        public T[] BestSolution { get; internal set; }
        public double BestFitnessScore { get; internal set; }
        /// <summary>AiDotNet's Iterations: epochs run.</summary>
        public int Iterations { get; internal set; }
        /// <summary>Iterations: epochs run.</summary>
        public int Epochs => Iterations;
        /// <summary>Optimizer steps run.</summary>
        public long Steps { get; internal set; }
        /// <summary>The best epoch, from 0.</summary>
        public int BestEpoch { get; internal set; }
        /// <summary>Early stopping ended training before MaxIterations.</summary>
        public bool StoppedEarly { get; internal set; }
        /// <summary>The score of each epoch.</summary>
        public double[] FitnessHistory { get; internal set; }
        /// <summary>The mean training loss of each epoch (over its batches).</summary>
        public double[] TrainingLossHistory { get; internal set; }
        /// <summary>The validation loss at the end of each epoch (NaN without validation data).</summary>
        public double[] ValidationLossHistory { get; internal set; }
        /// <summary>The rate of each epoch's first step.</summary>
        public double[] LearningRateHistory { get; internal set; }
        public DatasetResult TrainingResult { get; } = new DatasetResult();
        public DatasetResult ValidationResult { get; } = new DatasetResult();
        public DatasetResult TestResult { get; } = new DatasetResult();
    }

    /// <summary>OptimizationResult of the float optimizers' lower-level Optimize.</summary>
    public sealed class OptimizationResult : OptimizationResult<float> { }
}
