using System;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>This pipeline rank's model chunk(s), run by a PipelineRunner&lt;T&gt; (docs/pipeline.md). T is the
    /// optimizer's element type (float or double); both methods run on the thread that calls RunBatch.</summary>
    public abstract class PipelineStage<T> where T : struct
    {
        /// <summary>Forward of chunk call.Chunk on micro-batch call.MicroBatch: input (empty on the model's first
        /// chunk; valid during the call) to the output activation, which the runner sends to the next stage. On the
        /// model's last chunk (call.IsLast) set call.Loss to the micro-batch's loss and return null.</summary>
        public abstract T[] Forward(PipelineCall<T> call, ReadOnlySpan<T> input);

        /// <summary>Backward of the same chunk and micro-batch: input is what Forward got, outputGradient the
        /// gradient of its output (empty on the last chunk, which differentiates its loss). Adds the parameter
        /// gradients into call.Gradient(t) and returns the gradient of input (as many elements; null on the
        /// model's first chunk).</summary>
        public abstract T[] Backward(PipelineCall<T> call, ReadOnlySpan<T> input, ReadOnlySpan<T> outputGradient);
    }

    /// <summary>What one Forward or Backward call is about. Gradient and Parameters are spans of the library's
    /// memory (they cannot outlive the call); after the call returns this object throws ObjectDisposedException.</summary>
    public sealed class PipelineCall<T> where T : struct
    {
        readonly ShardedOptimizer optimizer;
        double loss;
        bool ended;

        internal PipelineCall(ShardedOptimizer optimizer, int microBatch, int chunk, int modelChunk, bool first, bool last)
        {
            this.optimizer = optimizer;
            MicroBatch = microBatch; Chunk = chunk; ModelChunk = modelChunk; IsFirst = first; IsLast = last;
        }

        public int MicroBatch { get; }
        /// <summary>This rank's chunk, 0 .. virtual stages - 1.</summary>
        public int Chunk { get; }
        /// <summary>Its place in the model: Chunk * p + pipeline rank.</summary>
        public int ModelChunk { get; }
        /// <summary>The model's first chunk: no input.</summary>
        public bool IsFirst { get; }
        /// <summary>The model's last chunk: sets Loss, has no output.</summary>
        public bool IsLast { get; }
        /// <summary>The micro-batch's loss, set by the forward of the model's last chunk.</summary>
        public double Loss
        {
            get => loss;
            set { Check(); loss = value; LossSet = true; }
        }
        internal bool LossSet { get; private set; }

        /// <summary>The gradient of tensor `tensor` of this stage's layout, summed over the batch's micro-batches
        /// so far: add this micro-batch's into it.</summary>
        public unsafe Span<T> Gradient(int tensor)
        {
            Check();
            IntPtr p = shardopt_native.so_stage_grad(tensor);
            return new Span<T>((void*)p, (int)optimizer.TensorSize(tensor));
        }

        /// <summary>Tensor `tensor`'s parameters (the optimizer updates them after the batch).</summary>
        public unsafe ReadOnlySpan<T> Parameters(int tensor)
        {
            Check();
            IntPtr p = shardopt_native.so_stage_parameters(tensor);
            return new ReadOnlySpan<T>((void*)p, (int)optimizer.TensorSize(tensor));
        }

        void Check()
        {
            if (ended) throw new ObjectDisposedException(nameof(PipelineCall<T>), "the stage call returned: its memory is no longer reachable");
        }

        internal void End() => ended = true;
    }
}
