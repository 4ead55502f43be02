// Issue 34: the GPU from C#. NCCLCommunicationBackend<T>(rank, worldSize, deviceId) and StagedCommunicationBackend<T> are
// the C ABI's shardopt_comm_create: they construct where a GPU (and for NCCL, libnccl) is usable, else the library's
// NotSupportedException (skipped). ShardingConfiguration.Memory and CudaStream reach shardopt_sharding_options for every
// strategy with the ZeRO-Offload flags; an optimizer in CUDA memory over a communicator without a device is the library's
// clear ArgumentException naming the backend.
using System;
using Shardopt.DistributedTraining;

static partial class ShardoptTests
{
    // Constructs the GPU communicator, or says why not (no usable GPU or NCCL here): null.
    static CommunicationBackend<float> GpuBackendOrSkip(Func<CommunicationBackend<float>> make, string backend)
    {
        try { return make(); }
        catch (NotSupportedException e)
        {
            Assert(e.Message.StartsWith("SHARDOPT_ERR_UNSUPPORTED") && e.Message.Contains("'" + backend + "'"), e.Message);
            Console.WriteLine($"SKIP {backend}: {e.Message}");
            return null;
        }
    }

    static void NcclBackendConstructsOrSkips()
    {
        var cases = new (string, Func<CommunicationBackend<float>>)[] {
            ("nccl", () => new NCCLCommunicationBackend<float>()), ("nccl", () => new NCCLCommunicationBackend<float>(0, 1, -1)),
            ("nccl", () => new NcclCommunicationBackend<float>(0, 1)), ("staged", () => new StagedCommunicationBackend<float>(0, 1)) };
        foreach (var entry in cases)
            using (var b = GpuBackendOrSkip(entry.Item2, entry.Item1))
                if (b != null) Assert(b.Rank == 0 && b.WorldSize == 1 && b.DeviceId >= 0, $"{entry.Item1}: rank 0 of 1 on a device");
        // the arguments are the library's to check, before any device is looked for
        var a = Throws<ArgumentException>(() => new NCCLCommunicationBackend<float>(2, 2));
        Assert(a.Message.Contains("rank 2 of worldSize 2"), a.Message);
        a = Throws<ArgumentException>(() => new StagedCommunicationBackend<float>(0, 1, -5));
        Assert(a.Message.Contains("deviceId -5"), a.Message);
        a = Throws<ArgumentException>(() => new NCCLCommunicationBackend<float>(0, -1));
        Assert(a.Message.Contains("give both"), a.Message);
        using (var b = new InMemoryCommunicationBackend<float>(0, 1, "cs-gpu-dev")) Assert(b.DeviceId == -1, "no device in process");
    }

    static void MemoryAndCudaStreamReachTheLibrary()
    {
        using (var b = new InMemoryCommunicationBackend<float>(0, 1, "cs-gpu-mem"))
        {
            var c = new ShardingConfiguration<float>(b);
            Assert(c.Memory == MemorySpace.Host && c.CudaStream == IntPtr.Zero, "host memory, no stream by default");
            var s = Throws<ArgumentException>(() => c.CudaStream = new IntPtr(0x1000)); // the library: no stream with host memory
            Assert(s.Message.Contains("cuda_stream") && c.CudaStream == IntPtr.Zero, s.Message);
            c.Memory = MemorySpace.Cuda;
            c.CudaStream = new IntPtr(0x1000);
            Assert(c.Memory == MemorySpace.Cuda && c.CudaStream == new IntPtr(0x1000), "the C options hold them");
            c.CudaStream = IntPtr.Zero;
            // every strategy and the ZeRO-Offload presets reach the library's creation, and its errors
            const string noDevice = "backend 'inprocess' has no device";
            Func<ShardingConfiguration<float>> plain = () => new ShardingConfiguration<float>(b),
                offload = () => ShardingConfiguration<float>.CreateForZeROOffload(b), full = () => ShardingConfiguration<float>.CreateForZeROOffloadFull(b);
            Func<ShardingConfiguration<float>, ShardedOptimizer<float>> ddp = cfg => new DDPOptimizer<float>(new AdamOptimizer(), cfg),
                zero1 = cfg => new ZeRO1Optimizer<float>(new AdamOptimizer(), cfg), zero2 = cfg => new ZeRO2Optimizer<float>(new AdamOptimizer(), cfg),
                fsdp = cfg => new FSDPOptimizer<float>(new AdamOptimizer(), cfg), local = cfg => new LocalSGDOptimizer<float>(new AdamOptimizer(), cfg),
                hybrid = cfg => new HybridShardedOptimizer<float>(new AdamOptimizer(), cfg);
            var cases = new (Func<ShardingConfiguration<float>, ShardedOptimizer<float>>, Func<ShardingConfiguration<float>>, string)[] {
                (ddp, plain, noDevice), (zero1, plain, noDevice), (zero2, plain, noDevice), (fsdp, plain, noDevice), (local, plain, noDevice),
                (hybrid, plain, noDevice), (ddp, offload, noDevice), (zero2, offload, noDevice), (fsdp, full, noDevice),
                (local, offload, "local_sgd averages its parameters"), (ddp, full, "cpu_offload_params needs parameters sharded at rest") };
            foreach (var entry in cases)
            {
                var cfg = entry.Item2();
                cfg.Memory = MemorySpace.Cuda;
                using (var o = entry.Item1(cfg))
                {
                    var e = Throws<ArgumentException>(() => o.Initialize(new ParameterLayout().Add("w", 4)));
                    Assert(e.Message.StartsWith("SHARDOPT_ERR_INVALID_ARGUMENT") && e.Message.Contains(entry.Item3), e.Message);
                }
            }
            // host memory where device memory is expected: refused before anything reaches the library, naming both
            var mine = new ShardingConfiguration<float>(b) { Memory = MemorySpace.Cuda };
            using (var o = new DDPOptimizer<float>(new AdamOptimizer(), mine))
            {
                var e = Throws<ArgumentException>(() => o.Initialize(new ParameterLayout().Add("w", 4), null, new float[4]));
                Assert(e.Message.Contains("parameters is host memory") && e.Message.Contains("the optimizer's memory is CUDA device memory"), e.Message);
            }
            // compression with CUDA memory: the library's refusal, whatever the communicator
            var z = new ShardingConfiguration<float>(b) { Memory = MemorySpace.Cuda, EnableGradientCompression = true };
            using (var o = new DDPOptimizer<float>(new AdamOptimizer(), z))
            {
                var e = Throws<Exception>(() => o.Initialize(new ParameterLayout().Add("w", 4)));
                Assert(e.Message.StartsWith("SHARDOPT_ERR_"), e.Message);
            }
        }
    }

    static (string, Action)[] GpuGroup() => new (string, Action)[] {
        ("NcclBackendConstructsOrSkips", NcclBackendConstructsOrSkips), ("MemoryAndCudaStreamReachTheLibrary", MemoryAndCudaStreamReachTheLibrary) };
}
