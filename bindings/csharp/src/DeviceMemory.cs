// Caller-owned CUDA memory handed to the library: a device address with its element type, count and stream.
using System;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>CUDA device (or managed) memory of the caller's, as a CUDA library hands it out: Length elements of T (float
    /// or double) at Pointer, used by the caller on Stream (a cudaStream_t; IntPtr.Zero: the legacy default stream). An
    /// optimizer in MemorySpace.Cuda keeps its parameters there (ShardedOptimizer&lt;T&gt;.Initialize(layout, initial, memory)):
    /// updated in place on its compute stream, never freed by the library, so keep it allocated until the optimizer is
    /// disposed. Checked when made (a non-null pointer aligned to T, at least one element); the library checks that it is
    /// device memory of the optimizer's GPU. default(DeviceMemory&lt;T&gt;) is empty (IsEmpty) and refused where memory is
    /// needed.</summary>
    public struct DeviceMemory<T> where T : struct
    {
        public DeviceMemory(IntPtr pointer, long length, IntPtr stream = default(IntPtr))
        {
            int size = Elem<T>.Check() == SHARDOPT_F64 ? 8 : 4;
            if (pointer == IntPtr.Zero) throw new ArgumentException("pointer is null: pass the address of a CUDA allocation (cudaMalloc, a tensor's data pointer)", nameof(pointer));
            if (pointer.ToInt64() % size != 0) throw new ArgumentException($"pointer 0x{pointer.ToInt64():x} is not aligned to {typeof(T).Name} ({size} bytes)", nameof(pointer));
            if (length < 1 || length > long.MaxValue / size) throw new ArgumentOutOfRangeException(nameof(length), $"length must be at least 1 element of {typeof(T).Name} (got {length})");
            Pointer = pointer; Length = length; Stream = stream;
        }
        /// <summary>The device address of the first element.</summary>
        public IntPtr Pointer { get; }
        /// <summary>Elements of T.</summary>
        public long Length { get; }
        /// <summary>The CUDA stream the caller uses this memory on (IntPtr.Zero: the legacy default stream). Initialize orders it
        /// after the optimizer's creation (the initial parameters written there), as OrderStream does; work the caller
        /// enqueued on the memory before Initialize must have finished (the library cannot wait for a stream of yours).</summary>
        public IntPtr Stream { get; }
        public bool IsEmpty => Pointer == IntPtr.Zero;
        public override string ToString() => IsEmpty ? $"DeviceMemory<{typeof(T).Name}>(empty)" : $"DeviceMemory<{typeof(T).Name}>(0x{Pointer.ToInt64():x}, {Length} elements, stream 0x{Stream.ToInt64():x})";
    }
}
