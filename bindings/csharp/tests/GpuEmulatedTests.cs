// Issue 34, label gpu_emulated (ctest bindings.csharp_gpu_emulated): the caller's own CUDA memory as the parameter buffer
// (Initialize(layout, initial, DeviceMemory<float>)) and OrderStream, on the C ABI built against the CUDA stand-in
// (capi/tests: shardopt_standin, preloaded in place of libshardopt.so.2), so without a GPU. The test's device memory,
// streams and copies are the stand-in's CUDA calls as a CUDA library would make them (capi/tests/cuda_copy.cpp), imported
// through the binding's own native module, whose libshardopt.so.2 is then the stand-in. Skipped without it.
using System;
using System.Diagnostics;
using System.Linq;
using System.Runtime.InteropServices;
using System.Threading;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    static class Cuda // the stand-in's test helpers (0: done; 3: a stream's work still pending)
    {
        const string Lib = "shardopt_csharp"; // its libshardopt.so.2: the preloaded stand-in, which exports them
        [DllImport(Lib)] internal static extern int test_cuda_malloc(out IntPtr ptr, UIntPtr bytes);
        [DllImport(Lib)] internal static extern int test_cuda_free(IntPtr ptr);
        [DllImport(Lib)] internal static extern int test_cuda_copy(IntPtr dst, IntPtr src, UIntPtr bytes);
        [DllImport(Lib)] internal static extern int test_cuda_copy_async(IntPtr dst, IntPtr src, UIntPtr bytes, IntPtr stream);
        [DllImport(Lib)] internal static extern int test_cuda_stream_create(out IntPtr stream);
        [DllImport(Lib)] internal static extern int test_cuda_stream_destroy(IntPtr stream);
        [DllImport(Lib)] internal static extern int test_cuda_stream_synchronize(IntPtr stream);
        [DllImport(Lib)] internal static extern int test_cuda_stream_query(IntPtr stream);
        [DllImport(Lib)] internal static extern int test_cuda_gate_enqueue(IntPtr stream, out IntPtr gate);
        [DllImport(Lib)] internal static extern void test_cuda_gate_open(IntPtr gate, int release);
        internal static void Ok(int status, string what) { if (status != 0) throw new Exception($"stand-in {what} failed ({status})"); }
        internal static IntPtr Malloc(long bytes) { Ok(test_cuda_malloc(out IntPtr p, (UIntPtr)bytes), "cudaMalloc"); return p; }
        internal static IntPtr Stream() { Ok(test_cuda_stream_create(out IntPtr s), "cudaStreamCreate"); return s; }
        internal static unsafe float[] Read(IntPtr device, long count)
        {
            var host = new float[count];
            fixed (float* h = host) Ok(test_cuda_copy((IntPtr)h, device, (UIntPtr)(count * 4)), "cudaMemcpy");
            return host;
        }
        internal static unsafe void Write(IntPtr device, float[] values)
        {
            fixed (float* h = values) Ok(test_cuda_copy(device, (IntPtr)h, (UIntPtr)(values.Length * 4)), "cudaMemcpy");
        }
    }

    static bool StandinOrSkip(string test)
    {
        if (Environment.GetEnvironmentVariable("SHARDOPT_STANDIN_LIBRARY") != null) return true;
        Console.WriteLine($"SKIP {test}: needs the CUDA stand-in preloaded (SHARDOPT_STANDIN_LIBRARY; ctest bindings.csharp_gpu_emulated)");
        return false;
    }

    // A linear least-squares model over 32 samples of 8 features (5 + 3 parameters), exact data.
    static readonly float[,] DevX = new float[32, 8];
    static readonly float[] DevY = DevData();
    static readonly float[] DevInitial = Enumerable.Range(0, 8).Select(i => 0.5f - i / 7f).ToArray();
    static float[] DevData() // fills DevX, returns the targets
    {
        var y = new float[32];
        for (int s = 0; s < 32; ++s)
            for (int j = 0; j < 8; ++j) { DevX[s, j] = ((s * 7 + j * 3) % 11 - 5) / 4f; y[s] += DevX[s, j] * (j - 3.5f) / 4f; }
        return y;
    }
    static double DevModel(ReadOnlySpan<float> p, Span<float> g, ReadOnlySpan<long> samples, Dataset d)
    {
        double loss = 0;
        g.Clear();
        foreach (long s in samples)
        {
            float r = -DevY[s];
            for (int j = 0; j < 8; ++j) r += DevX[s, j] * p[j];
            loss += r * r / 2;
            for (int j = 0; j < 8; ++j) g[j] += DevX[s, j] * r / samples.Length;
        }
        return loss / samples.Length;
    }
    static ParameterLayout DevLayout() => new ParameterLayout().Add("w", 5).Add("v", 3);
    static ShardingConfiguration<float> DevConfig(CommunicationBackend<float> b, MemorySpace memory = MemorySpace.Cuda) =>
        new ShardingConfiguration<float>(b) { Memory = memory };
    static DDPOptimizer<float> DevAdam(ShardingConfiguration<float> cfg) =>
        new DDPOptimizer<float>(new AdamOptimizer(Plain(new AdamOptimizerOptions { LearningRate = 0.05 }, 8, 3)), cfg);
    // Trains 3 epochs of 4 steps: (the packed parameters, the optimizer's whole device buffer read back).
    static (float[], float[]) DevTrain(ShardedOptimizer<float> opt)
    {
        var r = opt.Optimize(DevModel, new OptimizationInputData { NumSamples = 32 });
        Assert(r.Steps == 12, $"12 steps, got {r.Steps}");
        var view = opt.Parameters;
        return (opt.GetParameters(), Cuda.Read(view.DevicePointer, view.Length));
    }

    static void DeviceParametersAreTheCallersMemory()
    {
        if (!StandinOrSkip(nameof(DeviceParametersAreTheCallersMemory))) return;
        using (var b = new StagedCommunicationBackend<float>(0, 1))
        {
            float[] wantPacked, wantFull;
            using (var reference = DevAdam(DevConfig(b))) // the library's own device memory
            {
                reference.Initialize(DevLayout(), DevInitial);
                (wantPacked, wantFull) = DevTrain(reference);
            }
            IntPtr stream = Cuda.Stream(), mine = IntPtr.Zero;
            try
            {
                using (var opt = DevAdam(DevConfig(b)))
                {
                    long n = opt.PaddedCountFor(DevLayout());
                    mine = Cuda.Malloc(n * 4);
                    Cuda.Write(mine, Enumerable.Repeat(99f, (int)n).ToArray());
                    opt.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(mine, n, stream)); // orders `stream` after it
                    Assert(opt.Parameters.DevicePointer == mine && opt.Parameters.Length == n, "the optimizer's parameters are the caller's memory");
                    Assert(opt.GetParameters().SequenceEqual(DevInitial), "initial written into the caller's memory");
                    var (packed, full) = DevTrain(opt);
                    Assert(packed.SequenceEqual(wantPacked) && full.SequenceEqual(wantFull), "equal to the run in the library's memory, bit for bit");
                    Assert(Cuda.Read(mine, n).SequenceEqual(wantFull), "the updates are in the caller's buffer");
                    Assert(!packed.SequenceEqual(DevInitial), "training changed the parameters");
                    opt.Reset(); // re-created over the same memory
                    Assert(opt.Parameters.DevicePointer == mine && Cuda.Read(mine, 5).SequenceEqual(DevInitial.Take(5)), "Reset: the caller's memory again, initial parameters");
                    opt.OrderStream(stream);
                    opt.Parameters.OrderStream(IntPtr.Zero); // the legacy default stream
                }
                // without initial, the memory holds the initial parameters; ZeRO-1 and ZeRO-2 take it too
                Cuda.Write(mine, wantFull);
                using (var opt = new ZeRO2Optimizer<float>(new AdamOptimizer(), DevConfig(b)).Initialize(DevLayout(), null, new DeviceMemory<float>(mine, wantFull.Length)))
                    Assert(opt.GetParameters().SequenceEqual(wantPacked), "the caller's memory as the initial parameters");
            }
            finally
            {
                if (mine != IntPtr.Zero) Cuda.Ok(Cuda.test_cuda_free(mine), "cudaFree");
                Cuda.Ok(Cuda.test_cuda_stream_destroy(stream), "cudaStreamDestroy");
            }
        }
    }

    static void DeviceParameterMistakesRaise()
    {
        if (!StandinOrSkip(nameof(DeviceParameterMistakesRaise))) return;
        // the type's own checks
        var e = Throws<ArgumentException>(() => new DeviceMemory<float>(IntPtr.Zero, 4));
        Assert(e.Message.Contains("pointer is null"), e.Message);
        e = Throws<ArgumentException>(() => new DeviceMemory<double>(new IntPtr(0x1004), 4));
        Assert(e.Message.Contains("not aligned to Double (8 bytes)"), e.Message);
        var r = Throws<ArgumentOutOfRangeException>(() => new DeviceMemory<float>(new IntPtr(0x1000), 0));
        Assert(r.Message.Contains("at least 1 element"), r.Message);
        Throws<NotSupportedException>(() => new DeviceMemory<int>(new IntPtr(0x1000), 4));
        using (var b = new StagedCommunicationBackend<float>(0, 1))
        using (var opt = DevAdam(DevConfig(b)))
        {
            long n = opt.PaddedCountFor(DevLayout());
            IntPtr mine = Cuda.Malloc((n + 1) * 8);
            try
            {
                e = Throws<ArgumentException>(() => opt.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(mine, n + 1)));
                Assert(e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.Message.Contains($"param_count is {n + 1} but the layout needs {n}"), e.Message);
                e = Throws<ArgumentException>(() => opt.Initialize(DevLayout(), DevInitial, default(DeviceMemory<float>)));
                Assert(e.Message.Contains("empty DeviceMemory<Single>"), e.Message);
                using (var b64 = new StagedCommunicationBackend<double>(0, 1))
                using (var f64 = new DDPOptimizer<double>(new AdamOptimizer(), new ShardingConfiguration<double>(b64) { Memory = MemorySpace.Cuda }))
                {   // float memory for an optimizer of doubles (the untyped Initialize takes float)
                    e = Throws<ArgumentException>(() => ((ShardedOptimizer)f64).Initialize(DevLayout(), null, new DeviceMemory<float>(mine, n)));
                    Assert(e.Message.Contains("elements are double, got Single"), e.Message);
                }
                var host = new float[n];
                var pin = GCHandle.Alloc(host, GCHandleType.Pinned);
                try
                {   // host memory said to be device memory: the library's check, naming it
                    e = Throws<ArgumentException>(() => opt.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(pin.AddrOfPinnedObject(), n)));
                    Assert(e.Message.Contains("is host memory; the CUDA optimizer needs device"), e.Message);
                }
                finally { pin.Free(); }
                e = Throws<ArgumentException>(() => opt.Initialize(DevLayout(), DevInitial, host)); // a managed array for CUDA memory
                Assert(e.Message.Contains("parameters is host memory") && e.Message.Contains("the optimizer's memory is CUDA device memory"), e.Message);
                Assert(!opt.IsInitialized, "nothing created");
                using (var hostOpt = DevAdam(DevConfig(b, MemorySpace.Host)))
                {   // device memory for an optimizer in host memory: never read on the host
                    e = Throws<ArgumentException>(() => hostOpt.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(mine, n)));
                    Assert(e.Message.Contains("parameters is CUDA device memory (a DeviceMemory<Single>), the optimizer's memory is host memory"), e.Message);
                }
                using (var fsdp = new FSDPOptimizer<float>(new AdamOptimizer(), DevConfig(b)))
                {
                    var u = Throws<NotSupportedException>(() => fsdp.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(mine, n)));
                    Assert(u.Message.Contains("caller-owned parameters"), u.Message);
                }
                // OrderStream's arguments: an initialized optimizer, a stream the runtime knows
                var io = Throws<InvalidOperationException>(() => opt.OrderStream(IntPtr.Zero));
                Assert(io.Message.Contains("not initialized"), io.Message);
                opt.Initialize(DevLayout(), DevInitial, new DeviceMemory<float>(mine, n));
                e = Throws<ArgumentException>(() => opt.OrderStream(new IntPtr(0x5eed)));
                Assert(e.Message.Contains("cudaStreamWaitEvent on the consumer's stream failed"), e.Message);
                opt.ZeroGrad();
                var grad = opt.TensorGradient(0);
                opt.Step();
                Throws<ObjectDisposedException>(() => grad.OrderStream(IntPtr.Zero)); // an expired view
                opt.Dispose();
                Throws<ObjectDisposedException>(() => opt.OrderStream(IntPtr.Zero));
            }
            finally { Cuda.Ok(Cuda.test_cuda_free(mine), "cudaFree"); }
        }
    }

    // OrderStream makes the consumer's stream wait for the optimizer's work: its compute stream held at a gate, with a write
    // of the parameters behind it, a consumer's read on its own stream cannot run until the gate opens.
    static void OrderStreamOrdersTheConsumer()
    {
        if (!StandinOrSkip(nameof(OrderStreamOrdersTheConsumer))) return;
        IntPtr compute = Cuda.Stream(), consumer = Cuda.Stream(), scratch = Cuda.Malloc(32), gate = IntPtr.Zero;
        try
        {
            using (var b = new StagedCommunicationBackend<float>(0, 1))
            {
                var cfg = DevConfig(b);
                cfg.CudaStream = compute;
                using (var opt = DevAdam(cfg))
                {
                    opt.Initialize(DevLayout(), DevInitial);
                    var view = opt.Parameters;
                    Assert(view.CudaStream == compute, "the view's stream is the compute stream");
                    Cuda.Ok(Cuda.test_cuda_gate_enqueue(compute, out gate), "gate");
                    var fresh = new float[] { 7, 8, 9, 10 };
                    var pin = GCHandle.Alloc(fresh, GCHandleType.Pinned);
                    try
                    {
                        Cuda.Ok(Cuda.test_cuda_copy_async(view.DevicePointer, pin.AddrOfPinnedObject(), (UIntPtr)16, compute), "copy on the compute stream");
                        view.OrderStream(consumer);
                        Cuda.Ok(Cuda.test_cuda_copy_async(scratch, view.DevicePointer, (UIntPtr)16, consumer), "the consumer's read");
                        var clock = Stopwatch.StartNew();
                        while (clock.ElapsedMilliseconds < 400)
                        {
                            Assert(Cuda.test_cuda_stream_query(consumer) == 3, "the consumer's stream ran before the optimizer's work it was ordered after");
                            Thread.Sleep(20);
                        }
                        Cuda.test_cuda_gate_open(gate, 0);
                        Cuda.Ok(Cuda.test_cuda_stream_synchronize(consumer), "sync");
                        Assert(Cuda.Read(scratch, 4).SequenceEqual(fresh), "the consumer saw the finished work");
                        Cuda.Ok(Cuda.test_cuda_stream_synchronize(compute), "sync");
                    }
                    finally
                    {
                        if (gate != IntPtr.Zero) Cuda.test_cuda_gate_open(gate, 1);
                        pin.Free();
                    }
                }
            }
        }
        finally
        {
            Cuda.Ok(Cuda.test_cuda_free(scratch), "cudaFree");
            Cuda.Ok(Cuda.test_cuda_stream_destroy(consumer), "cudaStreamDestroy");
            Cuda.Ok(Cuda.test_cuda_stream_destroy(compute), "cudaStreamDestroy");
        }
    }

    static (string, Action)[] GpuEmulatedGroup() => new (string, Action)[] {
        ("DeviceParametersAreTheCallersMemory", DeviceParametersAreTheCallersMemory), ("DeviceParameterMistakesRaise", DeviceParameterMistakesRaise),
        ("OrderStreamOrdersTheConsumer", OrderStreamOrdersTheConsumer),
        ("DeviceBatchesTrainAsHostCopies", DeviceBatchesTrainAsHostCopies), ("DeviceBatchesRefusals", DeviceBatchesRefusals) }; // DeviceBatchTests.cs
}
