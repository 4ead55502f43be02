// Communication backends (AiDotNet's ICommunicationBackend): a communicator handle of the C ABI per rank.
using System;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>Reduction of a collective (AiDotNet's ReductionOperation); values are the C ABI's shardopt_reduce_op.</summary>
    public enum ReductionOperation { Sum = 0, Average = 1, Min = 2, Max = 3, Product = 4 }

    /// <summary>One rank's communicator (AiDotNet's ICommunicationBackend); collectives work in place. Disposing it releases
    /// the rank: once no optimizer built over it is alive either, peers waiting for it fail at once (SHARDOPT_ERR_PEER_LOST
    /// naming it). Abort fails this rank's pending and later calls, and the other in-process ranks', with reason.</summary>
    public class CommunicationBackend : IDisposable
    {
        SWIGTYPE_p_shardopt_comm_s handle;
        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }
        internal SWIGTYPE_p_shardopt_comm_s Handle => handle ?? throw new ObjectDisposedException(GetType().Name, "the communication backend was disposed (Shutdown/Dispose)");
        public int Rank { get { shardopt_comm_rank(Handle, out int r); return r; } }
        public int WorldSize { get { shardopt_comm_size(Handle, out int s); return s; } }
        public bool IsInitialized => handle != null;
        /// <summary>AiDotNet's Initialize(): the communicator is connected when the object is built; this checks it is alive.</summary>
        public void Initialize() { var _ = Handle; }
        public void SetTimeout(long milliseconds) => shardopt_comm_set_timeout(Handle, milliseconds);
        public void Barrier() => shardopt_barrier(Handle);
        public void Abort(string reason) => shardopt_comm_abort(Handle, reason);
        public void Dispose() { if (handle != null) { var h = handle; handle = null; shardopt_comm_destroy(h); } }
        public void Shutdown() => Dispose();
        public void AllReduce(Span<float> data, ReductionOperation op) => AllReduceT<float>(data, op);
        public void AllReduce(Span<double> data, ReductionOperation op) => AllReduceT<double>(data, op);
        public void Broadcast(Span<float> data, int root = 0) => BroadcastT<float>(data, root);
        public void Broadcast(Span<double> data, int root = 0) => BroadcastT<double>(data, root);
        /// <summary>recv (WorldSize * send.Length elements) = every rank's send, in rank order.</summary>
        public void AllGather(ReadOnlySpan<float> send, Span<float> recv) => AllGatherT<float>(send, recv);
        public void AllGather(ReadOnlySpan<double> send, Span<double> recv) => AllGatherT<double>(send, recv);
        // The handle, element type, addresses and lengths of two arrays pinned for a call (the C ABI knows one count).
        unsafe void Call<T>(ReadOnlySpan<T> a, ReadOnlySpan<T> b, Action<SWIGTYPE_p_shardopt_comm_s, int, IntPtr, ulong, IntPtr, ulong> call) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            byte x, y;
            fixed (byte* p = &Pin.Ref(a)) fixed (byte* q = &Pin.Ref(b)) call(h, dt, Pin.Or(p, &x), (ulong)a.Length, Pin.Or(q, &y), (ulong)b.Length);
        }
        internal void AllReduceT<T>(Span<T> data, ReductionOperation op) where T : struct =>
            Call<T>(data, data, (h, dt, p, n, q, m) => shardopt_allreduce(h, p, p, n, dt, (int)op));
        internal void BroadcastT<T>(Span<T> data, int root) where T : struct => Call<T>(data, data, (h, dt, p, n, q, m) => shardopt_broadcast(h, p, n, dt, root));
        internal void SendT<T>(ReadOnlySpan<T> data, int peer, int tag) where T : struct => Call(data, data, (h, dt, p, n, q, m) => shardopt_send(h, p, n, dt, peer, tag));
        internal void ReceiveT<T>(Span<T> data, int peer, int tag) where T : struct => Call<T>(data, data, (h, dt, p, n, q, m) => shardopt_recv(h, p, n, dt, peer, tag));
        internal void AllGatherT<T>(ReadOnlySpan<T> send, Span<T> recv) where T : struct
        {
            long need = (long)send.Length * WorldSize;
            if (recv.Length != need) throw new ArgumentException($"AllGather: recv must hold WorldSize * send.Length = {need} elements (got {recv.Length})", nameof(recv));
            Call<T>(send, recv, (h, dt, s, n, r, m) => shardopt_allgather(h, s, r, n, dt));
        }
        internal void ReduceScatterT<T>(ReadOnlySpan<T> send, Span<T> recv, ReductionOperation op) where T : struct
        {
            if (send.Length % WorldSize != 0 || send.Length / WorldSize != recv.Length)
                throw new ArgumentException($"ReduceScatter: data ({send.Length} elements) does not split into {WorldSize} equal parts of {recv.Length}", nameof(send));
            Call<T>(send, recv, (h, dt, s, n, r, m) => shardopt_reduce_scatter(h, s, r, m, dt, (int)op));
        }
        internal unsafe T[] ScatterT<T>(ReadOnlySpan<T> send, int root) where T : struct
        {
            IntPtr part = IntPtr.Zero;
            ulong n = 0;
            Call<T>(send, send, (h, dt, p, count, q, m) => shardopt_scatter(h, p, count, dt, root, out part, out n));
            try { return new ReadOnlySpan<T>((void*)part, (int)n).ToArray(); }
            finally { shardopt_buffer_free(part); }
        }
        internal static SWIGTYPE_p_shardopt_comm_s InMemory(int rank, int worldSize, string id)
        {
            Errors.LoadNative();
            shardopt_comm_create_inprocess_member(id ?? throw new ArgumentNullException("environmentId"), rank, worldSize, out var c);
            return c;
        }
        // singleProcess: a world of one without a launcher; else this process's rank from the launcher's environment.
        internal static SWIGTYPE_p_shardopt_comm_s FromEnvironment(string backend, bool singleProcess)
        {
            Errors.LoadNative();
            SWIGTYPE_p_shardopt_comm_s c;
            if (singleProcess) shardopt_comm_create_single(backend, out c); else shardopt_comm_create_from_env(backend, out c);
            return c;
        }
        internal static SWIGTYPE_p_shardopt_comm_s Typed(int elementTypeChecked, SWIGTYPE_p_shardopt_comm_s comm) => comm;
    }

    /// <summary>AiDotNet's ICommunicationBackend&lt;T&gt; over T[] (AiDotNet: Vector&lt;T&gt;); T is float or double.</summary>
    public interface ICommunicationBackend<T> : IDisposable where T : struct
    {
        int Rank { get; }
        int WorldSize { get; }
        bool IsInitialized { get; }
        void Initialize(); void Shutdown(); void Barrier();
        void AllReduce(T[] data, ReductionOperation operation);
        T[] AllGather(T[] sendData); T[] Broadcast(T[] data, int root = 0); T[] Scatter(T[] sendData, int root = 0);
        T[] ReduceScatter(T[] data, ReductionOperation operation);
        void Send(T[] data, int destinationRank, int tag = 0); T[] Receive(int sourceRank, int count, int tag = 0);
    }

    /// <summary>A communicator typed by its element type T (float or double, else NotSupportedException). AllGather: every
    /// rank's data in rank order; Broadcast: in place, returns data; ReduceScatter: this rank's part of the reduced data.</summary>
    public class CommunicationBackend<T> : CommunicationBackend, ICommunicationBackend<T> where T : struct
    {
        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) : base(handle) { }
        static T[] NotNull(T[] data, string name) => data ?? throw new ArgumentNullException(name);
        public void AllReduce(T[] data, ReductionOperation operation) => AllReduceT<T>(NotNull(data, nameof(data)), operation);
        public T[] AllGather(T[] sendData) { var recv = new T[(long)NotNull(sendData, nameof(sendData)).Length * WorldSize]; AllGatherT<T>(sendData, recv); return recv; }
        public T[] Broadcast(T[] data, int root = 0) { BroadcastT<T>(NotNull(data, nameof(data)), root); return data; }
        public T[] ReduceScatter(T[] data, ReductionOperation operation) { var recv = new T[NotNull(data, nameof(data)).Length / WorldSize]; ReduceScatterT<T>(data, recv, operation); return recv; }
        public void Send(T[] data, int destinationRank, int tag = 0) => SendT<T>(NotNull(data, nameof(data)), destinationRank, tag);
        public T[] Receive(int sourceRank, int count, int tag = 0)
        {
            var data = new T[count >= 0 ? count : throw new ArgumentOutOfRangeException(nameof(count), count, "Receive: count must be >= 0")];
            ReceiveT<T>(data, sourceRank, tag);
            return data;
        }
        /// <summary>Rank r gets root's sendData[r*n, (r+1)*n) with n = sendData.Length / WorldSize (sendData may be null on the
        /// other ranks): the library's shardopt_scatter, so a length that does not split fails every rank at once.</summary>
        public T[] Scatter(T[] sendData, int root = 0) => ScatterT<T>(sendData, root);
    }

    /// <summary>Rank <c>rank</c> of the in-process group <c>environmentId</c> (ranks are threads of this process): build each
    /// rank's object on the thread that drives it. The generic form is AiDotNet's InMemoryCommunicationBackend&lt;T&gt;.</summary>
    public sealed class InMemoryCommunicationBackend : CommunicationBackend
    {
        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default") : base(InMemory(rank, worldSize, environmentId)) { EnvironmentId = environmentId; }
        public string EnvironmentId { get; }
    }
    public sealed class InMemoryCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    {
        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default") : base(Typed(Elem<T>.Check(), InMemory(rank, worldSize, environmentId))) { EnvironmentId = environmentId; }
        public string EnvironmentId { get; }
    }

    /// <summary>This process's rank over UCX, from the launcher's environment (tools/shardopt-run, mpirun, srun, torchrun);
    /// singleProcess: true asks for a world of one without a launcher.</summary>
    public sealed class UcxCommunicationBackend : CommunicationBackend
    { public UcxCommunicationBackend(bool singleProcess = false) : base(FromEnvironment("ucx", singleProcess)) { } }
    public sealed class UcxCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    { public UcxCommunicationBackend(bool singleProcess = false) : base(Typed(Elem<T>.Check(), FromEnvironment("ucx", singleProcess))) { } }

    /// <summary>NCCL (one GPU per rank) from the launcher's environment; NotSupportedException where NCCL or a CUDA device cannot
    /// be used. Its collectives take device memory: use it through an optimizer in CUDA memory.</summary>
    public sealed class NcclCommunicationBackend : CommunicationBackend { public NcclCommunicationBackend() : base(FromEnvironment("nccl", false)) { } }
}
