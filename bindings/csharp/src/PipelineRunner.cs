using System;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>The order of each pipeline stage's forwards and backwards. OneFOneB holds at most p micro-batches
    /// per stage, GPipe all of them; InterleavedOneFOneB gives each rank VirtualStages model chunks (chunks r,
    /// r + p, ...) for a bubble VirtualStages times smaller. Values are the C ABI's shardopt_pipeline_schedule.</summary>
    public enum PipelineSchedule { OneFOneB = 0, GPipe = 1, InterleavedOneFOneB = 2 }

    /// <summary>How a PipelineRunner cuts each batch. Every stage must pass the same options.</summary>
    public sealed class PipelineOptions
    {
        /// <summary>Micro-batches per batch; 0 = the pipeline depth p.</summary>
        public int NumMicroBatches { get; set; }
        public PipelineSchedule Schedule { get; set; } = PipelineSchedule.OneFOneB;
        /// <summary>Model chunks per rank, InterleavedOneFOneB only; 0 = 2 there, 1 otherwise.</summary>
        public int VirtualStages { get; set; }
    }

    /// <summary>The outcome of one RunBatch.</summary>
    public sealed class PipelineBatchResult
    {
        /// <summary>Mean of the last chunk's micro-batch losses (every stage gets it).</summary>
        public double Loss { get; internal set; }
        /// <summary>The batch's one optimizer step updated the parameters.</summary>
        public bool StepApplied { get; internal set; }
        /// <summary>This rank, in seconds: inside the stage, waiting for activations and gradients, from the
        /// batch's start to its last action.</summary>
        public double BusySeconds { get; internal set; }
        public double WaitSeconds { get; internal set; }
        public double SpanSeconds { get; internal set; }
        /// <summary>The pipeline: 1 - summed busy / (stages x longest span).</summary>
        public double BubbleFraction { get; internal set; }
        /// <summary>Most forwards this rank held before their backward.</summary>
        public int PeakActivations { get; internal set; }
        public int Sends { get; internal set; }
        public int Recvs { get; internal set; }
    }

    /// <summary>Pipeline parallelism (docs/pipeline.md): runs a PipelineStage&lt;T&gt; on this pipeline rank of a
    /// HybridShardedOptimizer with PipelineParallelSize p (or of any sharded optimizer, as a single stage), one batch
    /// per RunBatch(): NumMicroBatches micro-batches in the schedule's order, activations and their gradients sent
    /// between neighbouring stages, the micro-batches' gradients summed, then exactly one optimizer step on their
    /// mean. Creation is collective over the pipeline group (stages with other options fail with
    /// InvalidOperationException SHARDOPT_ERR_MISMATCH). Each chunk's output size per micro-batch is agreed with the
    /// next stage on the first batch and must not change (InvalidOperationException SHARDOPT_ERR_MISMATCH on every
    /// stage). An exception thrown by a stage fails RunBatch on every stage: this rank rethrows it, the others throw
    /// InvalidOperationException naming it. Dispose the runner before its optimizer.</summary>
    public sealed class PipelineRunner<T> : IDisposable where T : struct
    {
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int NativeForward(int microBatch, int chunk, int modelChunk, int first, int last, IntPtr input,
                                   UIntPtr inputCount, out double loss);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate int NativeBackward(int microBatch, int chunk, int modelChunk, int first, int last, IntPtr input,
                                    UIntPtr inputCount, IntPtr outputGradient, UIntPtr outputGradientCount, IntPtr inputGradient);

        readonly ShardedOptimizer optimizer;
        readonly SWIGTYPE_p_shardopt_optimizer_s optimizerHandle;
        readonly PipelineStage<T> stage;
        // the native pipeline calls these: they live as long as the runner
        readonly NativeForward forward;
        readonly NativeBackward backward;
        SWIGTYPE_p_so_pipeline_s pipe;
        Exception failure; // this rank's stage exception in the running batch
        bool running;

        public PipelineRunner(ShardedOptimizer optimizer, PipelineStage<T> stage, PipelineOptions options = null)
        {
            this.optimizer = optimizer ?? throw new ArgumentNullException(nameof(optimizer));
            this.stage = stage ?? throw new ArgumentNullException(nameof(stage));
            options = options ?? new PipelineOptions();
            if (options.NumMicroBatches < 0)
                throw new ArgumentOutOfRangeException(nameof(options), options.NumMicroBatches, "NumMicroBatches must be >= 0 (0 = the pipeline depth)");
            if (options.VirtualStages < 0)
                throw new ArgumentOutOfRangeException(nameof(options), options.VirtualStages, "VirtualStages must be >= 0");
            optimizer.CheckType<T>("PipelineRunner");
            optimizerHandle = optimizer.H;
            forward = Forward;
            backward = Backward;
            pipe = shardopt_native.so_pipeline_create_fn(optimizerHandle, Marshal.GetFunctionPointerForDelegate(forward),
                                                         Marshal.GetFunctionPointerForDelegate(backward), (ulong)Elem<T>.Size,
                                                         options.NumMicroBatches, (int)options.Schedule, options.VirtualStages);
        }

        public ShardedOptimizer Optimizer => optimizer;

        /// <summary>Collective over the optimizer's world: one batch, one optimizer step.</summary>
        public PipelineBatchResult RunBatch()
        {
            if (pipe == null) throw new ObjectDisposedException(nameof(PipelineRunner<T>), "the PipelineRunner was disposed");
            if (!ReferenceEquals(optimizer.H, optimizerHandle))
                throw new ObjectDisposedException(nameof(PipelineRunner<T>), "the PipelineRunner's optimizer was reset since the runner was made");
            optimizer.BeginPipelineBatch();
            running = true;
            failure = null;
            try
            {
                using (var r = new so_pipeline_result())
                {
                    try { shardopt_native.so_pipeline_run(pipe, r); }
                    catch (Exception) when (failure != null) { ExceptionDispatchInfo.Capture(failure).Throw(); }
                    return new PipelineBatchResult { Loss = r.loss, StepApplied = r.step_applied != 0, BusySeconds = r.busy_seconds,
                                                     WaitSeconds = r.wait_seconds, SpanSeconds = r.span_seconds,
                                                     BubbleFraction = r.bubble_fraction, PeakActivations = r.peak_activations,
                                                     Sends = r.sends, Recvs = r.recvs };
                }
            }
            finally
            {
                running = false;
                failure = null;
                optimizer.EndPipelineBatch();
            }
        }

        public void Dispose()
        {
            if (running) throw new InvalidOperationException("not while RunBatch is running (called from a stage callback?)");
            if (pipe != null) { var p = pipe; pipe = null; shardopt_native.so_pipeline_destroy(p); }
        }

        // ---- the callbacks: never unwind through native frames; every rank's error names this one's exception ----
        int Failed(Exception e)
        {
            failure = failure ?? e;
            try { shardopt_native.so_cs_model_error($"{e.GetType().FullName}: {e.Message}"); } catch { }
            return 1;
        }

        unsafe int Forward(int microBatch, int chunk, int modelChunk, int first, int last, IntPtr input, UIntPtr inputCount, out double loss)
        {
            loss = 0;
            var call = new PipelineCall<T>(optimizer, microBatch, chunk, modelChunk, first != 0, last != 0);
            try
            {
                T[] output = stage.Forward(call, new ReadOnlySpan<T>((void*)input, (int)inputCount));
                if (call.IsLast)
                {
                    if (output != null && output.Length != 0)
                        throw new ArgumentException($"Forward of model chunk {modelChunk} (the last) returned an output; the last chunk sets call.Loss and returns null");
                    if (!call.LossSet) throw new ArgumentException($"Forward of model chunk {modelChunk} (the last) did not set call.Loss");
                    loss = call.Loss;
                    return 0;
                }
                if (output == null) throw new ArgumentException($"Forward of model chunk {modelChunk} returned null; it must return its output activation");
                var bytes = MemoryMarshal.AsBytes(new ReadOnlySpan<T>(output));
                byte none = 0;
                fixed (byte* p = &MemoryMarshal.GetReference(bytes))
                    shardopt_native.so_stage_output((IntPtr)(output.Length > 0 ? p : &none), (ulong)output.Length);
                return 0;
            }
            catch (Exception e) { return Failed(e); }
            finally { call.End(); }
        }

        unsafe int Backward(int microBatch, int chunk, int modelChunk, int first, int last, IntPtr input, UIntPtr inputCount,
                            IntPtr outputGradient, UIntPtr outputGradientCount, IntPtr inputGradient)
        {
            var call = new PipelineCall<T>(optimizer, microBatch, chunk, modelChunk, first != 0, last != 0);
            try
            {
                int n = (int)inputCount;
                T[] gi = stage.Backward(call, new ReadOnlySpan<T>((void*)input, n),
                                        new ReadOnlySpan<T>((void*)outputGradient, (int)outputGradientCount));
                if (call.IsFirst)
                {
                    if (gi != null && gi.Length != 0)
                        throw new ArgumentException($"Backward of model chunk {modelChunk} (the first) returned an input gradient; the first chunk has no input: return null");
                    return 0;
                }
                if (gi == null) throw new ArgumentException($"Backward of model chunk {modelChunk} returned null; it must return the gradient of its input ({n} elements)");
                if (gi.Length != n) throw new ArgumentException($"Backward of model chunk {modelChunk} returned {gi.Length} elements for an input of {n}");
                new ReadOnlySpan<T>(gi).CopyTo(new Span<T>((void*)inputGradient, n));
                return 0;
            }
            catch (Exception e) { return Failed(e); }
            finally { call.End(); }
        }
    }
}
