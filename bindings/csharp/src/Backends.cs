using System;
using Shardopt.Native;

namespace Shardopt.DistributedTraining
{
    /// <summary>Reduction of a collective (AiDotNet's ReductionOperation).</summary>
    public enum ReductionOperation { Sum = 0, Average = 1, Min = 2, Max = 3, Product = 4 }

    internal static class NativeInit
    {
        // Loading libshardopt loads UCX, whose error handling (UCX_HANDLE_ERRORS=bt) would replace the
        // runtime's SIGSEGV handler that turns null dereferences into NullReferenceException.
        static NativeInit()
        {
            if (Environment.GetEnvironmentVariable("UCX_HANDLE_ERRORS") == null)
                Environment.SetEnvironmentVariable("UCX_HANDLE_ERRORS", "none");
        }
        internal static void Ensure() { }
    }

    /// <summary>One rank's communicator (AiDotNet's ICommunicationBackend); collectives work in place.</summary>
    public class CommunicationBackend : IDisposable
    {
        SWIGTYPE_p_shardopt_comm_s handle;

        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }

        internal SWIGTYPE_p_shardopt_comm_s Handle
        {
            get { if (handle == null) throw new ObjectDisposedException(GetType().Name); return handle; }
        }

        public int Rank => shardopt_native.so_comm_rank(Handle);
        public int WorldSize => shardopt_native.so_comm_size(Handle);
        public bool IsInitialized => handle != null;
        public void SetTimeout(long milliseconds) => shardopt_native.so_comm_set_timeout(Handle, milliseconds);
        public void Barrier() => shardopt_native.so_barrier(Handle);
        public void Abort(string reason) => shardopt_native.so_comm_abort(Handle, reason);

        public unsafe void AllReduce(Span<float> data, ReductionOperation op)
        {
            fixed (float* p = &System.Runtime.InteropServices.MemoryMarshal.GetReference(data)) shardopt_native.so_allreduce(Handle, (IntPtr)p, (ulong)data.Length, 0, (int)op);
        }

        public unsafe void AllReduce(Span<double> data, ReductionOperation op)
        {
            fixed (double* p = &System.Runtime.InteropServices.MemoryMarshal.GetReference(data)) shardopt_native.so_allreduce(Handle, (IntPtr)p, (ulong)data.Length, 1, (int)op);
        }

        public unsafe void Broadcast(Span<float> data, int root = 0)
        {
            fixed (float* p = &System.Runtime.InteropServices.MemoryMarshal.GetReference(data)) shardopt_native.so_broadcast(Handle, (IntPtr)p, (ulong)data.Length, 0, root);
        }

        public void Dispose()
        {
            if (handle != null) { var h = handle; handle = null; shardopt_native.so_comm_destroy(h); }
        }

        public void Shutdown() => Dispose();
    }

    /// <summary>Rank <c>rank</c> of an in-process group (threads of this process); ranks sharing
    /// <c>environmentId</c> form one group; build each rank's object on the thread that drives it.</summary>
    public sealed class InMemoryCommunicationBackend : CommunicationBackend
    {
        public string EnvironmentId { get; }

        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default")
            : base(Create(rank, worldSize, environmentId)) { EnvironmentId = environmentId; }

        static SWIGTYPE_p_shardopt_comm_s Create(int rank, int worldSize, string id)
        {
            NativeInit.Ensure();
            if (id == null) throw new ArgumentNullException(nameof(id));
            return shardopt_native.so_comm_inmemory(id, rank, worldSize);
        }
    }

    /// <summary>This process's rank over UCX, from the environment (tools/shardopt-run, mpirun, srun).</summary>
    public sealed class UcxCommunicationBackend : CommunicationBackend
    {
        public UcxCommunicationBackend() : base(Create()) { }
        static SWIGTYPE_p_shardopt_comm_s Create() { NativeInit.Ensure(); return shardopt_native.so_comm_from_env("ucx"); }
    }

    /// <summary>NCCL: throws NotSupportedException until NCCL lands in the C ABI.</summary>
    public sealed class NcclCommunicationBackend : CommunicationBackend
    {
        public NcclCommunicationBackend(int rank = 0, int worldSize = 1, int deviceId = -1) : base(Create(rank, worldSize, deviceId)) { }
        static SWIGTYPE_p_shardopt_comm_s Create(int r, int w, int d) { NativeInit.Ensure(); return shardopt_native.so_comm_nccl(r, w, d); }
    }
}
