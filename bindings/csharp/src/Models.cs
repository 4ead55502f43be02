// The model, the data and the result of Optimize (AiDotNet's IFullModel, Tensor, OptimizationInputData, OptimizationResult).
using System;
using System.Linq;

namespace Shardopt.DistributedTraining
{
    /// <summary>The model a base optimizer is built with (after AiDotNet's IFullModel): its tensors in packed order, its
    /// parameters (the initial ones before training; SetParameters gets the best solution after Optimize), the samples an
    /// input holds, and the mean loss over x[samples] against y[samples] at parameters with the mean gradient written into
    /// gradient (zeroed on entry; scratch where only the loss is wanted). The spans view library memory during the call.</summary>
    public interface IGradientModel<T, TInput, TOutput> where T : struct
    {
        ParameterLayout GetParameterLayout();
        T[] GetParameters();
        void SetParameters(T[] parameters);
        int SampleCount(TInput x);
        double ComputeLossAndGradient(ReadOnlySpan<T> parameters, Span<T> gradient, TInput x, TOutput y, ReadOnlySpan<long> samples);
    }


    /// <summary>Which set a model call is about (shardopt_dataset).</summary>
    public enum Dataset { Training, Validation, Test }
    /// <summary>The model of the lower-level Optimize: the mean loss over samples of dataset at the parameters, the mean
    /// gradient written into gradient (zeroed on entry; scratch where only the loss is wanted: validation, test, the best
    /// solution's scores). Spans view the library's memory during the call.</summary>
    public delegate double GradientModel(ReadOnlySpan<float> parameters, Span<float> gradient, ReadOnlySpan<long> samples,
                                         Dataset dataset);
    public delegate double GradientModel<T>(ReadOnlySpan<T> parameters, Span<T> gradient, ReadOnlySpan<long> samples,
                                            Dataset dataset) where T : struct;
    /// <summary>The model on the GPU (the training options' device_batches): parameters and gradient are device views of the
    /// optimizer's CUDA memory (IsDevice, DevicePointer, CudaStream: enqueue the work there), valid during the call; gradient
    /// is null where only the loss is wanted.</summary>
    public delegate double DeviceGradientModel<T>(NativeView<T> parameters, NativeView<T> gradient, ReadOnlySpan<long> samples,
                                                  Dataset dataset) where T : struct;

    /// <summary>A dense row-major tensor (the part of AiDotNet's Tensor&lt;T&gt; a model needs).</summary>
    public sealed class Tensor<T> where T : struct
    {
        public Tensor(int[] shape)
        {
            Shape = (int[])(shape ?? throw new ArgumentNullException(nameof(shape))).Clone();
            Data = new T[shape.Aggregate(1L, (n, d) => d >= 0 ? n * d : throw new ArgumentOutOfRangeException(nameof(shape), "dimensions must be >= 0"))];
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
                off = off * Shape[i] + ((uint)index[i] < (uint)Shape[i] ? index[i] : throw new IndexOutOfRangeException($"index {index[i]} of dimension {i} (size {Shape[i]})"));
            return (int)off;
        }
    }

    /// <summary>AiDotNet's OptimizationInputData: the training, validation and test sets (data only: the training settings
    /// are the options'). Validation data, when given, scores each epoch; the test set is only reported.</summary>
    public class OptimizationInputData<T, TInput, TOutput> where T : struct
    {
        public TInput XTrain { get; set; } public TOutput YTrain { get; set; }
        public TInput XValidation { get; set; } public TOutput YValidation { get; set; }
        public TInput XTest { get; set; } public TOutput YTest { get; set; }
    }

    /// <summary>The data of the lower-level Optimize: the sizes of the sets its model indexes (0: no such set).</summary>
    public sealed class OptimizationInputData
    {
        public long NumSamples { get; set; }
        public long NumValidationSamples { get; set; } public long NumTestSamples { get; set; }
    }

    /// <summary>The loss of the best solution over one whole data set (NaN and 0 samples when the set was not given).</summary>
    public sealed class DatasetResult
    {
        public double Loss { get; private set; } = double.NaN;
        public long SampleCount { get; private set; }
        public bool Present => SampleCount > 0;
        internal void Set(double loss, long samples) { Loss = loss; SampleCount = samples; }
    }

    /// <summary>What Optimize returns (shardopt_training_result). An epoch's score (FitnessHistory) is its validation loss when
    /// validation data was given, else its mean training loss; the best epoch (BestEpoch, from 0) is the first with the lowest
    /// score, BestSolution its parameters. Iterations (AiDotNet's name; Epochs too): epochs run; Steps: optimizer steps run.
    /// Per epoch also: the mean training loss of its batches, the validation loss at its end (NaN without validation data),
    /// the rate of its first step.</summary>
    public class OptimizationResult<T> where T : struct
    {
        public T[] BestSolution { get; internal set; }
        public double BestFitnessScore { get; internal set; }
        public int BestEpoch { get; internal set; }
        public int Iterations { get; internal set; } public int Epochs => Iterations; public long Steps { get; internal set; }
        /// <summary>Early stopping ended training before MaxIterations.</summary>
        public bool StoppedEarly { get; internal set; }
        public double[] FitnessHistory { get; internal set; }
        public double[] TrainingLossHistory { get; internal set; }
        public double[] ValidationLossHistory { get; internal set; }
        public double[] LearningRateHistory { get; internal set; }
        public DatasetResult TrainingResult { get; } = new DatasetResult();
        public DatasetResult ValidationResult { get; } = new DatasetResult();
        public DatasetResult TestResult { get; } = new DatasetResult();
    }
}
