// Communication backends (AiDotNet's ICommunicationBackend): a communicator handle of the C ABI per rank.
using System;
using Shardopt.Native;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>Reduction of a collective (AiDotNet's ReductionOperation); values are the C ABI's shardopt_reduce_op.</summary>
    public enum ReductionOperation { Sum = 0, Average = 1, Min = 2, Max = 3, Product = 4 }

    /// <summary>One rank's communicator (AiDotNet's ICommunicationBackend); collectives work in place. Disposing it
    /// releases the rank: peers waiting for it fail at once (SHARDOPT_ERR_PEER_LOST naming it) once no optimizer
    /// built over it is alive.</summary>
    public class CommunicationBackend : IDisposable
    {
        SWIGTYPE_p_shardopt_comm_s handle;

        internal CommunicationBackend(SWIGTYPE_p_shardopt_comm_s handle) { this.handle = handle; }

        internal SWIGTYPE_p_shardopt_comm_s Handle =>
            handle ?? throw new ObjectDisposedException(GetType().Name, "the communication backend was disposed (Shutdown/Dispose)");

        public int Rank { get { shardopt_comm_rank(Handle, out int r); return r; } }
        public int WorldSize { get { shardopt_comm_size(Handle, out int s); return s; } }
        public bool IsInitialized => handle != null;
        /// <summary>AiDotNet's Initialize(): the communicator is connected when the object is built; this checks it is alive.</summary>
        public void Initialize() { var _ = Handle; }
        public void SetTimeout(long milliseconds) => shardopt_comm_set_timeout(Handle, milliseconds);
        public void Barrier() => shardopt_barrier(Handle);
        /// <summary>Fails this rank's pending and later calls, and the other in-process ranks', with reason.</summary>
        public void Abort(string reason) => shardopt_comm_abort(Handle, reason);

        public void AllReduce(Span<float> data, ReductionOperation op) => AllReduceT<float>(data, op);
        public void AllReduce(Span<double> data, ReductionOperation op) => AllReduceT<double>(data, op);
        public void Broadcast(Span<float> data, int root = 0) => BroadcastT<float>(data, root);
        public void Broadcast(Span<double> data, int root = 0) => BroadcastT<double>(data, root);
        /// <summary>recv (WorldSize * send.Length elements) = every rank's send, in rank order.</summary>
        public void AllGather(ReadOnlySpan<float> send, Span<float> recv) => AllGatherT<float>(send, recv);
        public void AllGather(ReadOnlySpan<double> send, Span<double> recv) => AllGatherT<double>(send, recv);

        internal unsafe void AllReduceT<T>(Span<T> data, ReductionOperation op) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            byte none;
            fixed (byte* p = &Pin.Ref<T>(data)) shardopt_allreduce(h, Pin.Or(p, &none), Pin.Or(p, &none), (ulong)data.Length, dt, (int)op);
        }

        internal unsafe void BroadcastT<T>(Span<T> data, int root) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            byte none;
            fixed (byte* p = &Pin.Ref<T>(data)) shardopt_broadcast(h, Pin.Or(p, &none), (ulong)data.Length, dt, root);
        }

        // The C ABI knows send's count only: recv's length (and reduce-scatter's send) is checked here.
        internal unsafe void AllGatherT<T>(ReadOnlySpan<T> send, Span<T> recv) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            long need = (long)send.Length * WorldSize;
            if (recv.Length != need)
                throw new ArgumentException($"AllGather: recv must hold WorldSize * send.Length = {need} elements (got {recv.Length})", nameof(recv));
            byte a, b;
            fixed (byte* s = &Pin.Ref(send)) fixed (byte* r = &Pin.Ref<T>(recv))
                shardopt_allgather(h, Pin.Or(s, &a), Pin.Or(r, &b), (ulong)send.Length, dt);
        }

        internal unsafe void ReduceScatterT<T>(ReadOnlySpan<T> send, Span<T> recv, ReductionOperation op) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            long need = (long)recv.Length * WorldSize;
            if (send.Length != need)
                throw new ArgumentException($"ReduceScatter: the data must hold WorldSize * {recv.Length} = {need} elements (got {send.Length})", nameof(send));
            byte a, b;
            fixed (byte* s = &Pin.Ref(send)) fixed (byte* r = &Pin.Ref<T>(recv))
                shardopt_reduce_scatter(h, Pin.Or(s, &a), Pin.Or(r, &b), (ulong)recv.Length, dt, (int)op);
        }

        internal unsafe void SendT<T>(ReadOnlySpan<T> data, int dest, int tag, bool receive) where T : struct
        {
            int dt = Elem<T>.Check();
            var h = Handle;
            byte none;
            fixed (byte* p = &Pin.Ref(data))
                if (receive) shardopt_recv(h, Pin.Or(p, &none), (ulong)data.Length, dt, dest, tag);
                else shardopt_send(h, Pin.Or(p, &none), (ulong)data.Length, dt, dest, tag);
        }

        public void Dispose()
        {
            if (handle != null) { var h = handle; handle = null; shardopt_comm_destroy(h); }
        }

        public void Shutdown() => Dispose();

        internal static SWIGTYPE_p_shardopt_comm_s InMemory(int rank, int worldSize, string id)
        {
            NativeLib.Load();
            shardopt_comm_create_inprocess_member(id ?? throw new ArgumentNullException("environmentId"), rank, worldSize, out var c);
            return c;
        }

        // singleProcess: a world of one without a launcher; else this process's rank from the launcher's environment.
        internal static SWIGTYPE_p_shardopt_comm_s FromEnvironment(string backend, bool singleProcess)
        {
            NativeLib.Load();
            SWIGTYPE_p_shardopt_comm_s c;
            if (singleProcess) shardopt_comm_create_single(backend, out c);
            else shardopt_comm_create_from_env(backend, out c);
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

        public void AllReduce(T[] data, ReductionOperation operation) => AllReduceT<T>(data ?? throw new ArgumentNullException(nameof(data)), operation);

        /// <summary>Every rank's data, concatenated in rank order (all ranks pass the same length).</summary>
        public T[] AllGather(T[] sendData)
        {
            var recv = new T[(long)(sendData ?? throw new ArgumentNullException(nameof(sendData))).Length * WorldSize];
            AllGatherT<T>(sendData, recv);
            return recv;
        }

        /// <summary>In place: every rank's data becomes root's; returns data.</summary>
        public T[] Broadcast(T[] data, int root = 0)
        {
            BroadcastT<T>(data ?? throw new ArgumentNullException(nameof(data)), root);
            return data;
        }

        /// <summary>Rank r gets root's sendData[r*n, (r+1)*n) with n = sendData.Length / WorldSize (sendData may be null
        /// on the other ranks). The C ABI has no scatter: root's length is broadcast, then its array, and each rank keeps
        /// its slice.</summary>
        public T[] Scatter(T[] sendData, int root = 0)
        {
            int size = WorldSize, rank = Rank;
            if (rank == root && sendData == null) throw new ArgumentNullException(nameof(sendData));
            var length = new double[] { rank == root ? sendData.Length : 0 };
            BroadcastT<double>(length, root);
            long total = (long)length[0];
            if (total % size != 0) throw new ArgumentException($"Scatter: root's data ({total} elements) does not split into {size} equal parts");
            var all = rank == root ? sendData : new T[total];
            BroadcastT<T>(all, root);
            var mine = new T[total / size];
            Array.Copy(all, rank * mine.Length, mine, 0, mine.Length);
            return mine;
        }

        /// <summary>Reduces data (WorldSize equal parts) across ranks and returns this rank's part.</summary>
        public T[] ReduceScatter(T[] data, ReductionOperation operation)
        {
            int size = WorldSize;
            if ((data ?? throw new ArgumentNullException(nameof(data))).Length % size != 0)
                throw new ArgumentException($"ReduceScatter: data ({data.Length} elements) does not split into {size} equal parts", nameof(data));
            var recv = new T[data.Length / size];
            ReduceScatterT<T>(data, recv, operation);
            return recv;
        }

        public void Send(T[] data, int destinationRank, int tag = 0) => SendT<T>(data ?? throw new ArgumentNullException(nameof(data)), destinationRank, tag, false);

        public T[] Receive(int sourceRank, int count, int tag = 0)
        {
            var data = new T[count >= 0 ? count : throw new ArgumentOutOfRangeException(nameof(count), count, "Receive: count must be >= 0")];
            SendT<T>(data, sourceRank, tag, true);
            return data;
        }
    }

    /// <summary>Rank <c>rank</c> of the in-process group <c>environmentId</c> (ranks are threads of this process); build
    /// each rank's object on the thread that drives it.</summary>
    public sealed class InMemoryCommunicationBackend : CommunicationBackend
    {
        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default")
            : base(InMemory(rank, worldSize, environmentId)) { EnvironmentId = environmentId; }
        public string EnvironmentId { get; }
    }

    /// <summary>AiDotNet's InMemoryCommunicationBackend&lt;T&gt;(rank, worldSize, environmentId).</summary>
    public sealed class InMemoryCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    {
        public InMemoryCommunicationBackend(int rank, int worldSize, string environmentId = "default")
            : base(Typed(Elem<T>.Check(), InMemory(rank, worldSize, environmentId))) { EnvironmentId = environmentId; }
        public string EnvironmentId { get; }
    }

    /// <summary>This process's rank over UCX, from the launcher's environment (tools/shardopt-run, mpirun, srun,
    /// torchrun); singleProcess: true asks for a world of one without a launcher.</summary>
    public sealed class UcxCommunicationBackend : CommunicationBackend
    {
        public UcxCommunicationBackend(bool singleProcess = false) : base(FromEnvironment("ucx", singleProcess)) { }
    }

    public sealed class UcxCommunicationBackend<T> : CommunicationBackend<T> where T : struct
    {
        public UcxCommunicationBackend(bool singleProcess = false) : base(Typed(Elem<T>.Check(), FromEnvironment("ucx", singleProcess))) { }
    }

    /// <summary>NCCL (one GPU per rank), from the launcher's environment; NotSupportedException where NCCL or a CUDA
    /// device cannot be used. Its collectives take device memory: use it through an optimizer in CUDA memory.</summary>
    public sealed class NcclCommunicationBackend : CommunicationBackend
    {
        public NcclCommunicationBackend() : base(FromEnvironment("nccl", false)) { }
    }
}
