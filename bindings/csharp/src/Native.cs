// What the layer shares: the exceptions of failed C ABI calls, element types, pinning, the callbacks' exception hand-off.
// The C ABI is Shardopt.Native.shardopt_native (SWIG, shardopt_csharp.i): its functions under their C names.
using System;
using System.IO;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using static Shardopt.Native.shardopt_native;

namespace Shardopt.DistributedTraining
{
    /// <summary>What a failed library call tells beside its message ("SHARDOPT_ERR_X: ..."): the C ABI's status code
    /// (1 invalid argument, 2 invalid state, 3 timeout, 4 mismatch, 5 peer lost, 6 I/O, 7 corrupt, 8 out of memory,
    /// 9 unsupported, 10 internal) and the rank of the call's communicator or optimizer (-1: none).</summary>
    public interface IShardoptException { int StatusCode { get; } int Rank { get; } }
    public sealed class ShardoptArgumentException : ArgumentException, IShardoptException
    { internal ShardoptArgumentException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }
    public sealed class ShardoptInvalidOperationException : InvalidOperationException, IShardoptException
    { internal ShardoptInvalidOperationException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }
    public sealed class ShardoptTimeoutException : TimeoutException, IShardoptException
    { internal ShardoptTimeoutException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }
    public sealed class ShardoptIOException : IOException, IShardoptException
    { internal ShardoptIOException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }
    public sealed class ShardoptNotSupportedException : NotSupportedException, IShardoptException
    { internal ShardoptNotSupportedException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }
    public sealed class ShardoptOutOfMemoryException : OutOfMemoryException, IShardoptException
    { internal ShardoptOutOfMemoryException(string m, int s, int r) : base(m) { StatusCode = s; Rank = r; } public int StatusCode { get; } public int Rank { get; } }

    internal static class Errors
    {
        // Loading libshardopt loads UCX, whose UCX_HANDLE_ERRORS=bt would replace the runtime's SIGSEGV handler (which
        // turns null dereferences into NullReferenceException): what can make the first native call calls this first.
        static Errors() { if (Environment.GetEnvironmentVariable("UCX_HANDLE_ERRORS") == null) Environment.SetEnvironmentVariable("UCX_HANDLE_ERRORS", "none"); }
        internal static void LoadNative() { }
    }

    /// <summary>The element types shardopt computes in: float and double; another T raises NotSupportedException.</summary>
    internal static class Elem<T> where T : struct
    {
        internal static readonly int DType = typeof(T) == typeof(float) ? SHARDOPT_F32 : typeof(T) == typeof(double) ? SHARDOPT_F64 : -1;
        internal static int Check() => DType >= 0 ? DType
            : throw new NotSupportedException($"shardopt computes in float or double; {typeof(T).FullName} is not a supported element type T");
        internal static string Name(int dtype) => dtype == SHARDOPT_F64 ? "double" : "float";
    }

    internal static unsafe class Pin
    {
        // A span's first byte, to fix; Or gives its address, or the dummy's when the span is empty (the C ABI takes no NULL).
        internal static ref byte Ref<T>(ReadOnlySpan<T> s) where T : struct => ref MemoryMarshal.GetReference(MemoryMarshal.AsBytes(s));
        internal static IntPtr Or(byte* p, byte* none) => p != null ? (IntPtr)p : (IntPtr)none;
        internal static void Call<T>(ReadOnlySpan<T> s, Action<IntPtr, ulong> call) where T : struct { byte none; fixed (byte* p = &Ref(s)) call(Or(p, &none), (ulong)s.Length); }
        // A copy of a C struct (a proxy's memory is the library's struct, struct_size included).
        internal static S Clone<S>(S from, Func<S, HandleRef> ptr, ulong size) where S : new()
        {
            var to = new S();
            Buffer.MemoryCopy((void*)ptr(from).Handle, (void*)ptr(to).Handle, size, size);
            return to;
        }
    }

    /// <summary>An array pinned while the library reads or writes it.</summary>
    internal sealed class Pinned : IDisposable
    {
        GCHandle h;
        internal Pinned(object array) { h = GCHandle.Alloc(array, GCHandleType.Pinned); }
        internal IntPtr Ptr => h.AddrOfPinnedObject();
        public void Dispose() { if (h.IsAllocated) h.Free(); }
    }

    /// <summary>The library calls the layer's delegates (the model, lr_fn, pipeline stages) on the calling thread; they
    /// never unwind through native frames. Guard keeps the first exception and tells the library, so every rank's error
    /// names it; Call rethrows it as itself on this rank once the native call failed.</summary>
    internal static class Callbacks
    {
        [ThreadStatic] static Exception failure;
        internal static int Guard(Action body)
        {
            try { body(); return 0; }
            catch (Exception e) { failure = failure ?? e; shardopt_model_error($"{e.GetType().FullName}: {e.Message}"); return 1; }
        }
        internal static void Call(Action native)
        {
            failure = null;
            try { native(); }
            catch (Exception) when (failure != null) { ExceptionDispatchInfo.Capture(failure).Throw(); }
            finally { failure = null; }
        }
    }
}
