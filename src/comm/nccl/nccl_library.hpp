// NcclApi: libnccl loaded at run time. libshardopt.so does not link NCCL (a large library that
// most users never need, and absent from CPU-only hosts); the NCCL backend opens it with dlopen
// when the first NCCL communicator is created, and calls NCCL only through this table.
//
// The library is "libnccl.so.2" (the dynamic loader's search: ldconfig, LD_LIBRARY_PATH), or the
// path in the environment variable SHARDOPT_NCCL_LIBRARY. nccl.h is still compiled against, for
// the types, constants and the functions' signatures; its major version must be the library's.
#pragma once

#include <nccl.h>

#include <string>

namespace shardopt::nccl {

// Every NCCL function the backend calls. Each field has the type of nccl.h's declaration.
#define SHARDOPT_NCCL_FUNCTIONS(X)                                                                                     \
    X(ncclGetVersion)                                                                                                  \
    X(ncclGetErrorString)                                                                                              \
    X(ncclGetLastError)                                                                                                \
    X(ncclGetUniqueId)                                                                                                 \
    X(ncclCommInitRankConfig)                                                                                          \
    X(ncclCommSplit)                                                                                                   \
    X(ncclCommFinalize)                                                                                                \
    X(ncclCommDestroy)                                                                                                 \
    X(ncclCommAbort)                                                                                                   \
    X(ncclCommGetAsyncError)                                                                                           \
    X(ncclCommCount)                                                                                                   \
    X(ncclCommUserRank)                                                                                                \
    X(ncclAllReduce)                                                                                                   \
    X(ncclReduceScatter)                                                                                               \
    X(ncclAllGather)                                                                                                   \
    X(ncclBroadcast)                                                                                                   \
    X(ncclReduce)                                                                                                      \
    X(ncclSend)                                                                                                        \
    X(ncclRecv)

struct NcclApi {
#define SHARDOPT_NCCL_FIELD(name) decltype(&::name) name = nullptr;
    SHARDOPT_NCCL_FUNCTIONS(SHARDOPT_NCCL_FIELD)
#undef SHARDOPT_NCCL_FIELD
    std::string path; // what was opened
    int version = 0;  // ncclGetVersion's code, e.g. 22809 for 2.28.9
};

// The library to open: $SHARDOPT_NCCL_LIBRARY when set and not empty, else "libnccl.so.2".
std::string library_path();

// Opens `path` and resolves every function, now, without touching the process-wide table below.
// Throws Error(unsupported) naming the path and what went wrong (the loader's message, the
// missing symbol, or a major version other than the headers') and how to fix it. A library that
// was opened stays loaded for the life of the process (NCCL cannot be unloaded safely).
NcclApi load_library(const std::string &path);

// The process-wide table: the first call loads library_path() (once, thread-safe); every later
// call returns the same table, or throws the same Error when that load failed.
const NcclApi &api();

// Whether api() succeeds (loads the library on first use); never throws.
bool api_available() noexcept;

} // namespace shardopt::nccl
