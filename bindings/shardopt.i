/* shardopt.i — the one SWIG interface over the C ABI (capi/include/shardopt.h). It generates the
 * C#, Java and Python modules at build time (never committed). Each language's half holds only
 * what is that language's: its typemaps (status codes into its exceptions, output arguments,
 * arrays and buffers), its callback trampolines and its idioms; the thin hand-written layers in
 * bindings/<language>/ sit on top. The training policy, defaults and checks are in the C ABI,
 * never here. */
%module shardopt_native

#if defined(SWIGPYTHON)
%include "python/shardopt_python.i"
#elif defined(SWIGJAVA)
%include "java/shardopt_java.i"
#elif defined(SWIGCSHARP)
%include "csharp/shardopt_csharp.i"
#endif
