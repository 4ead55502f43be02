using System;
using System.Runtime.InteropServices;
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

    /// <summary>The element types shardopt computes in: float (SHARDOPT_F32) and double (SHARDOPT_F64).
    /// Any other T raises NotSupportedException naming it.</summary>
    internal static class Elem<T> where T : struct
    {
        internal static readonly int DType = typeof(T) == typeof(float) ? shardopt_native.SHARDOPT_F32
                                           : typeof(T) == typeof(double) ? shardopt_native.SHARDOPT_F64 : -1;
        internal static readonly int Size = typeof(T) == typeof(double) ? 8 : 4;

        internal static int Check()
        {
            if (DType < 0)
                throw new NotSupportedException($"shardopt computes in float or double; {typeof(T).FullName} is not a supported element type T");
            return DType;
        }
    }

    internal static class DTypes
    {
        internal static string Name(int dtype) => dtype == shardopt_native.SHARDOPT_F64 ? "double" : "float";
    }

    /// <summary>One rank's communicator (AiDotNet's ICommunicationBackend); collectives work in place.</summary>
    public class CommunicationBackend : IDisposable
    {
        SWIGTYPE_p_shardopt_comm_s handle;

        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }

        internal SWIGTYPE_p_shardopt_comm_s Handle
        {
            get { if (handle == null) throw new ObjectDisposedException(GetType().Name, "the communication backend was disposed (Shutdown/Dispose)"); return handle; }
        }

        public int Rank => shardopt_native.so_comm_rank(Handle);
        public int WorldSize => shardopt_native.so_comm_size(Handle);
        public bool IsInitialized => handle != null;
        /// <summary>AiDotNet's Initialize(): the native communicator is connected when the object is built, so
        /// this only checks it is still alive (ObjectDisposedException after Shutdown).</summary>
        public void Initialize() { var _ = Handle; }
        public void SetTimeout(long milliseconds) => shardopt_native.so_comm_set_timeout(Handle, milliseconds);
        public void Barrier() => shardopt_native.so_barrier(Handle);
        public void Abort(string reason) => shardopt_native.so_comm_abort(Handle, reason);

        public void AllReduce(Span<float> data, ReductionOperation op) => AllReduceT<float>(data, op);
        public void AllReduce(Span<double> data, ReductionOperation op) => AllReduceT<double>(data, op);
        public void Broadcast(Span<float> data, int root = 0) => BroadcastT<float>(data, root);
        public void Broadcast(Span<double> data, int root = 0) => BroadcastT<double>(data, root);
        /// <summary>recv (WorldSize * send.Length elements) = every rank's send, in rank order.</summary>
        public void AllGather(ReadOnlySpan<float> send, Span<float> recv) => AllGatherT<float>(send, recv);
        public void AllGather(ReadOnlySpan<double> send, Span<double> recv) => AllGatherT<double>(send, recv);

        // the address of a span's first element, or of a dummy byte when it is empty (never NULL)
        internal unsafe void AllReduceT<T>(Span<T> data, ReductionOperation op) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            var b = MemoryMarshal.AsBytes(data);
            byte none = 0;
            fixed (byte* p = &MemoryMarshal.GetReference(b))
                shardopt_native.so_allreduce(h, b.Length > 0 ? (IntPtr)p : (IntPtr)(&none), (ulong)data.Length, dt, (int)op);
        }

        internal unsafe void BroadcastT<T>(Span<T> data, int root) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            var b = MemoryMarshal.AsBytes(data);
            byte none = 0;
            fixed (byte* p = &MemoryMarshal.GetReference(b))
                shardopt_native.so_broadcast(h, b.Length > 0 ? (IntPtr)p : (IntPtr)(&none), (ulong)data.Length, dt, root);
        }

        internal unsafe void AllGatherT<T>(ReadOnlySpan<T> send, Span<T> recv) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            long need = (long)send.Length * WorldSize;
            if (recv.Length != need)
                throw new ArgumentException($"AllGather: recv must hold WorldSize * send.Length = {need} elements (got {recv.Length})", nameof(recv));
            var sb = MemoryMarshal.AsBytes(send);
            var rb = MemoryMarshal.AsBytes(recv);
            byte none = 0, none2 = 0;
            fixed (byte* sp = &MemoryMarshal.GetReference(sb))
            fixed (byte* rp = &MemoryMarshal.GetReference(rb))
                shardopt_native.so_allgather(h, sb.Length > 0 ? (IntPtr)sp : (IntPtr)(&none), rb.Length > 0 ? (IntPtr)rp : (IntPtr)(&none2), (ulong)send.Length, dt);
        }

        internal unsafe void ReduceScatterT<T>(ReadOnlySpan<T> send, Span<T> recv, ReductionOperation op) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            long need = (long)recv.Length * WorldSize;
            if (send.Length != need)
                throw new ArgumentException($"ReduceScatter: the data must hold WorldSize * {recv.Length} = {need} elements (got {send.Length})", nameof(send));
            var sb = MemoryMarshal.AsBytes(send);
            var rb = MemoryMarshal.AsBytes(recv);
            byte none = 0, none2 = 0;
            fixed (byte* sp = &MemoryMarshal.GetReference(sb))
            fixed (byte* rp = &MemoryMarshal.GetReference(rb))
                shardopt_native.so_reduce_scatter(h, sb.Length > 0 ? (IntPtr)sp : (IntPtr)(&none), rb.Length > 0 ? (IntPtr)rp : (IntPtr)(&none2), (ulong)recv.Length, dt, (int)op);
        }

        internal unsafe void SendT<T>(ReadOnlySpan<T> data, int dest, int tag) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            var b = MemoryMarshal.AsBytes(data);
            byte none = 0;
            fixed (byte* p = &MemoryMarshal.GetReference(b))
                shardopt_native.so_send(h, b.Length > 0 ? (IntPtr)p : (IntPtr)(&none), (ulong)data.Length, dt, dest, tag);
        }

        internal unsafe void ReceiveT<T>(Span<T> data, int source, int tag) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            var b = MemoryMarshal.AsBytes(data);
            byte none = 0;
            fixed (byte* p = &MemoryMarshal.GetReference(b))
                shardopt_native.so_recv(h, b.Length > 0 ? (IntPtr)p : (IntPtr)(&none), (ulong)data.Length, dt, source, tag);
        }

        public void Dispose()
        {
            if (handle != null) { var h = handle; handle = null; shardopt_native.so_comm_destroy(h); }
        }

        public void Shutdown() => Dispose();
    }

    /// <summary>AiDotNet's ICommunicationBackend&lt;T&gt; over T[] (AiDotNet: Vector&lt;T&gt;); T is float or double.</summary>
    public interface ICommunicationBackend<T> : IDisposable where T : struct
    {
        int Rank { get; }
        int WorldSize { get; }
        bool IsInitialized { get; }
        void Initialize();
        void Shutdown();
        void Barrier();
        void AllReduce(T[] data, ReductionOperation operation);
        T[] AllGather(T[] sendData);
        T[] Broadcast(T[] data, int root = 0);
        T[] Scatter(T[] sendData, int root = 0);
        T[] ReduceScatter(T[] data, ReductionOperation operation);
        void Send(T[] data, int destinationRank, int tag = 0);
        T[] Receive(int sourceRank, int count, int tag = 0);
    }

    /// <summary>A communicator typed by its element type T (float or double, else NotSupportedException).</summary>
    public class CommunicationBackend<T> : CommunicationBackend, ICommunicationBackend<T> where T : struct
    {
        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) : base(handle) { }

        internal static void CheckType() => Elem<T>.Check();

        public void AllReduce(T[] data, ReductionOperation operation)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            AllReduceT<T>(data, operation);
        }

        /// <summary>Every rank's data, concatenated in rank order (all ranks pass the same length).</summary>
        public T[] AllGather(T[] sendData)
        {
            if (sendData == null) throw new ArgumentNullException(nameof(sendData));
            var recv = new T[(long)sendData.Length * WorldSize];
            AllGatherT<T>(sendData, recv);
            return recv;
        }

        /// <summary>In place: every rank's data becomes root's; returns data.</summary>
        public T[] Broadcast(T[] data, int root = 0)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            BroadcastT<T>(data, root);
            return data;
        }

        /// <summary>Rank r gets root's sendData[r*n, (r+1)*n) with n = sendData.Length / WorldSize (sendData may be
        /// null on the other ranks). The C ABI has no scatter: root's length goes out in a broadcast, then the
        /// whole array (so each rank receives WorldSize times its share), and each rank keeps its slice.</summary>
        public T[] Scatter(T[] sendData, int root = 0)
        {
            int size = WorldSize;
            if (Rank == root && sendData == null) throw new ArgumentNullException(nameof(sendData));
            var lenD = new double[] { Rank == root ? sendData.Length : 0 };
            BroadcastT<double>(lenD, root);
            long total = (long)lenD[0];
            if (total % size != 0)
                throw new ArgumentException($"Scatter: root's data ({total} elements) does not split into {size} equal parts");
            var all = Rank == root ? sendData : new T[total];
            if (Rank == root && total != sendData.Length) throw new ArgumentException("Scatter: root's data changed length");
            BroadcastT<T>(all, root);
            int n = (int)(total / size);
            var mine = new T[n];
            Array.Copy(all, (long)Rank * n, mine, 0, n);
            return mine;
        }

        /// <summary>Reduces data (WorldSize equal parts) across ranks and returns this rank's part.</summary>
        public T[] ReduceScatter(T[] data, ReductionOperation operation)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            int size = WorldSize;
            if (data.Length % size != 0)
                throw new ArgumentException($"ReduceScatter: data ({data.Length} elements) does not split into {size} equal parts", nameof(data));
            var recv = new T[data.Length / size];
            ReduceScatterT<T>(data, recv, operation);
            return recv;
        }

        public void Send(T[] data, int destinationRank, int tag = 0)
        {
            if (data == null) throw new ArgumentNullException(nameof(data));
            SendT<T>(data, destinationRank, tag);
        }

        public T[] Receive(int sourceRank, int count, int tag = 0)
        {
            if (count < 0) throw new ArgumentOutOfRangeException(nameof(count), count, "Receive: count must be >= 0");
            var data = new T[count];
            ReceiveT<T>(data, sourceRank, tag);
            return data;
        }
    }

    internal static class Backends
    {
        internal static SWIGTYPE_p_shardopt_comm_s InMemory(int rank, int worldSize, string id)
        {
            NativeInit.Ensure();
            if (id == null) throw new ArgumentNullException("environmentId");
            return shardopt_native.so_comm_inmemory(id, rank, worldSize);
        }

        internal static SWIGTYPE_p_shardopt_comm_s Ucx(bool singleProcess)
        {
            NativeInit.Ensure();
            if (singleProcess)
            {
                foreach (var v in new[] { "SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS" })
                    if (Environment.GetEnvironmentVariable(v) is string s && s != "1")
                        throw new ArgumentException($"singleProcess: true, but {v}={s} says this is one process of {s}");
                Environment.SetEnvironmentVariable("SHARDOPT_WORLD_SIZE", "1");
            }
            return shardopt_native.so_comm_from_env("ucx");
        }
    }

    /// <summary>Rank <c>rank</c> of an in-process group (threads of this process); ranks sharing
    /// <c>environmentId</c> form one group; build each rank's object on the thread that drives it.</summary>
    public sealed class InMemoryCommunicationBackend : CommunicationBackend
    {
        public string EnvironmentId { get; }

        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default")
            : base(Backends.InMemory(rank, worldSize, environmentId)) { EnvironmentId = environmentId; }
    }

    /// <summary>AiDotNet's InMemoryCommunicationBackend&lt;T&gt;(rank, worldSize, environmentId): rank
    /// <c>rank</c> of the in-process group <c>environmentId</c>, built on the thread that drives that rank.</summary>
    public sealed class InMemoryCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    {
        public string EnvironmentId { get; }

        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default")
            : base(Create(rank, worldSize, environmentId)) { EnvironmentId = environmentId; }

        static SWIGTYPE_p_shardopt_comm_s Create(int rank, int worldSize, string id) { CheckType(); return Backends.InMemory(rank, worldSize, id); }
    }

    /// <summary>This process's rank over UCX, from the environment (tools/shardopt-run, mpirun, srun, torchrun).
    /// Without a world size there, ArgumentException (SHARDOPT_ERR_INVALID_ARGUMENT) - unless singleProcess is
    /// true, which asks for a world of one (SHARDOPT_WORLD_SIZE=1).</summary>
    public sealed class UcxCommunicationBackend : CommunicationBackend
    {
        public UcxCommunicationBackend(bool singleProcess = false) : base(Backends.Ucx(singleProcess)) { }
    }

    /// <summary>UcxCommunicationBackend typed by its element type.</summary>
    public sealed class UcxCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    {
        public UcxCommunicationBackend(bool singleProcess = false) : base(Create(singleProcess)) { }
        static SWIGTYPE_p_shardopt_comm_s Create(bool single) { CheckType(); return Backends.Ucx(single); }
    }

    /// <summary>NCCL: throws NotSupportedException until NCCL lands in the C ABI.</summary>
    public sealed class NcclCommunicationBackend : CommunicationBackend
    {
        public NcclCommunicationBackend(int rank = 0, int worldSize = 1, int deviceId = -1) : base(Create(rank, worldSize, deviceId)) { }
        static SWIGTYPE_p_shardopt_comm_s Create(int r, int w, int d) { NativeInit.Ensure(); return shardopt_native.so_comm_nccl(r, w, d); }
    }
}
