// Pipeline parallelism (docs/pipeline.md) over the C ABI's shardopt_pipeline: the library calls the stage's Forward and
// Backward through delegates, on the thread that runs the batch.
using System;
using System.Runtime.InteropServices;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The order of each stage's forwards and backwards (the C ABI's shardopt_pipeline_schedule): OneFOneB holds at
    /// most p micro-batches per stage, GPipe all; InterleavedOneFOneB gives each rank VirtualStages chunks (r, r + p, ...).</summary>
    public enum PipelineSchedule { OneFOneB = 0, GPipe = 1, InterleavedOneFOneB = 2 }

    /// <summary>How a PipelineRunner cuts each batch (shardopt_pipeline_options; 0: the library's default); the same on every stage.</summary>
    public sealed class PipelineOptions
    {
        public int NumMicroBatches { get; set; }
        public PipelineSchedule Schedule { get; set; }
        public int VirtualStages { get; set; }
    }

    /// <summary>One RunBatch (shardopt_pipeline_result): the mean loss of the last chunk's micro-batches; this rank's seconds
    /// in its stage, waiting, and from the batch's start to its last action; the pipeline's bubble; the most forwards held.</summary>
    public sealed class PipelineBatchResult
    {
        public readonly double Loss, BusySeconds, WaitSeconds, SpanSeconds, BubbleFraction;
        public readonly bool StepApplied;
        public readonly int PeakActivations, Sends, Recvs;
        internal PipelineBatchResult(shardopt_pipeline_result r)
        {
            Loss = r.loss; StepApplied = r.step_applied != 0; BusySeconds = r.busy_seconds; WaitSeconds = r.wait_seconds; SpanSeconds = r.span_seconds;
            BubbleFraction = r.bubble_fraction; PeakActivations = r.peak_activations; Sends = r.sends; Recvs = r.recvs;
        }
    }

    /// <summary>This pipeline rank's model chunk(s), run by a PipelineRunner&lt;T&gt; (T: the optimizer's element type).
    /// Forward maps input (empty on the model's first chunk) to the output activation; the last chunk sets call.Loss and
    /// returns null. Backward gets Forward's input and its output's gradient (empty on the last chunk), adds the parameter
    /// gradients into call.Gradient(t) and returns input's gradient (null on the first chunk).</summary>
    public abstract class PipelineStage<T> where T : struct
    {
        public abstract T[] Forward(PipelineCall<T> call, ReadOnlySpan<T> input);
        public abstract T[] Backward(PipelineCall<T> call, ReadOnlySpan<T> input, ReadOnlySpan<T> outputGradient);
    }

    /// <summary>What one Forward or Backward is about (shardopt_stage_call): Chunk is this rank's (0 .. virtual stages - 1),
    /// ModelChunk its place in the model. Gradient(t), the sum over the batch's micro-batches so far, and Parameters(t) are
    /// the library's memory: after the call this object throws ObjectDisposedException.</summary>
    public sealed class PipelineCall<T> where T : struct
    {
        readonly shardopt_stage_call call;
        readonly ShardedOptimizer optimizer;
        double loss;
        bool ended;
        internal PipelineCall(IntPtr call, ShardedOptimizer optimizer)
        {
            this.call = new shardopt_stage_call(call, false);
            this.optimizer = optimizer;
            MicroBatch = this.call.micro_batch; Chunk = this.call.chunk; ModelChunk = this.call.model_chunk; IsFirst = this.call.first != 0; IsLast = this.call.last != 0;
        }
        public int MicroBatch { get; }
        public int Chunk { get; }
        public int ModelChunk { get; }
        public bool IsFirst { get; }
        public bool IsLast { get; }
        public double Loss { get => loss; set { Check(); loss = value; LossSet = true; } }
        internal bool LossSet { get; private set; }
        public unsafe Span<T> Gradient(int tensor) { Check(); shardopt_stage_call_grad(call, tensor, out IntPtr p, out ulong n); return new Span<T>((void*)p, (int)n); }
        public unsafe ReadOnlySpan<T> Parameters(int tensor)
        { Check(); shardopt_optimizer_tensor_parameters(optimizer.H, tensor, out IntPtr p); return new ReadOnlySpan<T>((void*)p, (int)optimizer.TensorSize(tensor)); }
        void Check() { if (ended) throw new ObjectDisposedException(nameof(PipelineCall<T>), "the stage call returned: its memory is no longer reachable"); }
        internal void End() => ended = true;
    }

    /// <summary>Runs a PipelineStage&lt;T&gt; on this pipeline rank of a HybridShardedOptimizer (PipelineParallelSize p), one
    /// batch per RunBatch(): NumMicroBatches micro-batches in the schedule's order, then one optimizer step on their mean
    /// gradient. Creation is collective over the pipeline group. A stage's exception fails RunBatch on every stage: this
    /// rank rethrows it, the others throw InvalidOperationException naming it. Dispose it before its optimizer.</summary>
    public sealed class PipelineRunner<T> : IDisposable where T : struct
    {
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int ForwardFn(IntPtr user, IntPtr call, IntPtr input, UIntPtr inputCount, IntPtr output, out double loss);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int BackwardFn(IntPtr user, IntPtr call, IntPtr input, UIntPtr inputCount, IntPtr outputGrad, UIntPtr outputGradCount, IntPtr inputGrad);
        readonly ShardedOptimizer optimizer;
        readonly SWIGTYPE_p_shardopt_optimizer_s optimizerHandle;
        readonly PipelineStage<T> stage;
        readonly ForwardFn forward; // the library calls these: they live as long as the runner
        readonly BackwardFn backward;
        SWIGTYPE_p_shardopt_pipeline_s pipe;
        public PipelineRunner(ShardedOptimizer optimizer, PipelineStage<T> stage, PipelineOptions options = null)
        {
            this.optimizer = optimizer ?? throw new ArgumentNullException(nameof(optimizer));
            this.stage = stage ?? throw new ArgumentNullException(nameof(stage));
            options = options ?? new PipelineOptions();
            optimizer.CheckType<T>("PipelineRunner");
            optimizerHandle = optimizer.H;
            forward = Forward; backward = Backward;
            using (var s = new shardopt_pipeline_stage { struct_size = SHARDOPT_SIZEOF_PIPELINE_STAGE, forward = Marshal.GetFunctionPointerForDelegate(forward), backward = Marshal.GetFunctionPointerForDelegate(backward) })
            using (var o = new shardopt_pipeline_options { struct_size = SHARDOPT_SIZEOF_PIPELINE_OPTIONS, num_micro_batches = options.NumMicroBatches, schedule = (int)options.Schedule, virtual_stages = options.VirtualStages })
                shardopt_pipeline_create(optimizerHandle, s, o, out pipe);
        }
        public ShardedOptimizer Optimizer => optimizer;
        /// <summary>Collective over the optimizer's world: one batch, one optimizer step.</summary>
        public PipelineBatchResult RunBatch()
        {
            if (pipe == null) throw new ObjectDisposedException(nameof(PipelineRunner<T>), "the PipelineRunner was disposed");
            if (!ReferenceEquals(optimizer.H, optimizerHandle)) throw new ObjectDisposedException(nameof(PipelineRunner<T>), "the PipelineRunner's optimizer was reset since the runner was made");
            optimizer.BeginPipelineBatch();
            try { using (var r = new shardopt_pipeline_result { struct_size = SHARDOPT_SIZEOF_PIPELINE_RESULT }) { Callbacks.Call(() => shardopt_pipeline_run_batch(pipe, r)); return new PipelineBatchResult(r); } }
            finally { optimizer.EndPipelineBatch(); }
        }
        public void Dispose()
        {
            if (pipe != null) { shardopt_pipeline_destroy(pipe); pipe = null; } // the library refuses from a stage
        }
        unsafe int Forward(IntPtr user, IntPtr callPtr, IntPtr input, UIntPtr inputCount, IntPtr output, out double loss)
        {
            var call = new PipelineCall<T>(callPtr, optimizer);
            double l = 0;
            int rc = Callbacks.Guard(() =>
            {
                T[] result = stage.Forward(call, new ReadOnlySpan<T>((void*)input, (int)inputCount));
                string chunk = $"Forward of model chunk {call.ModelChunk}";
                if (call.IsLast)
                {
                    if (result != null && result.Length != 0) throw new ArgumentException($"{chunk} (the last) returned an output; the last chunk sets call.Loss and returns null");
                    if (!call.LossSet) throw new ArgumentException($"{chunk} (the last) did not set call.Loss");
                    l = call.Loss;
                    return;
                }
                if (result == null) throw new ArgumentException($"{chunk} returned null; it must return its output activation");
                shardopt_activation_resize(output, (ulong)result.Length, out IntPtr data);
                result.AsSpan().CopyTo(new Span<T>((void*)data, result.Length));
            });
            call.End();
            loss = l;
            return rc;
        }
        unsafe int Backward(IntPtr user, IntPtr callPtr, IntPtr input, UIntPtr inputCount, IntPtr outputGrad, UIntPtr outputGradCount, IntPtr inputGrad)
        {
            var call = new PipelineCall<T>(callPtr, optimizer);
            int rc = Callbacks.Guard(() =>
            {
                int n = (int)inputCount;
                T[] g = stage.Backward(call, new ReadOnlySpan<T>((void*)input, n), new ReadOnlySpan<T>((void*)outputGrad, (int)outputGradCount));
                string chunk = $"Backward of model chunk {call.ModelChunk}";
                if (call.IsFirst)
                {
                    if (g != null && g.Length != 0) throw new ArgumentException($"{chunk} (the first) returned an input gradient; the first chunk has no input: return null");
                    return;
                }
                if (g == null || g.Length != n) throw new ArgumentException($"{chunk} returned {(g == null ? "null" : g.Length + " elements")} for an input of {n}");
                g.AsSpan().CopyTo(new Span<T>((void*)inputGrad, n));
            });
            call.End();
            return rc;
        }
    }
}
