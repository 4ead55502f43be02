#include "nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <mutex>

#include "shardopt/error.hpp"

namespace shardopt::nccl {

namespace {

constexpr const char *default_library = "libnccl.so.2";

std::string version_text(int code) {
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch; older ones major * 1000 + ...
    const int major = code >= 10000 ? code / 10000 : code / 1000;
    const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

int major_of(int code) { return code >= 10000 ? code / 10000 : code / 1000; }

std::string how_to_fix() {
    const std::string headers = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                                std::to_string(NCCL_PATCH);
    return "install NCCL " + std::to_string(NCCL_MAJOR) + ".x (shardopt was built against NCCL " + headers +
           ") where the dynamic loader finds " + default_library +
           " (ldconfig or LD_LIBRARY_PATH), or set SHARDOPT_NCCL_LIBRARY to the path of the library";
}

[[noreturn]] void fail(const std::string &what) {
    throw Error(ErrorCode::unsupported, "backend 'nccl' is not available: " + what + "; " + how_to_fix());
}

std::string last_dlerror() {
    const char *text = dlerror();
    return text ? text : "unknown error";
}

} // namespace

std::string library_path() {
    const char *env = std::getenv("SHARDOPT_NCCL_LIBRARY");
    return env && *env ? env : default_library;
}

NcclApi load_library(const std::string &path) {
    // Local: NCCL's symbols do not leak into the global namespace of later loaded libraries.
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) fail("cannot load the NCCL library '" + path + "' (" + last_dlerror() + ")");

    NcclApi api;
    api.path = path;
    (void)dlerror();
#define SHARDOPT_NCCL_RESOLVE(name)                                                                                    \
    api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));                                             \
    if (!api.name)                                                                                                     \
        fail("the NCCL library '" + path + "' has no function " #name " (" + last_dlerror() +                          \
             "): it is not NCCL, or an NCCL older than shardopt needs");
    SHARDOPT_NCCL_FUNCTIONS(SHARDOPT_NCCL_RESOLVE)
#undef SHARDOPT_NCCL_RESOLVE

    if (api.ncclGetVersion(&api.version) != ncclSuccess)
        fail("ncclGetVersion failed in the NCCL library '" + path + "'");
    if (major_of(api.version) != NCCL_MAJOR)
        fail("the NCCL library '" + path + "' is NCCL " + version_text(api.version) + ", major version " +
             std::to_string(major_of(api.version)) + ", not " + std::to_string(NCCL_MAJOR));
    // The handle is never closed: NCCL keeps threads and CUDA state that outlive any one call.
    return api;
}

namespace {

struct Loaded {
    std::once_flag once;
    NcclApi api;
    std::exception_ptr error; // set when the load failed
};

Loaded &loaded() {
    static Loaded instance;
    std::call_once(instance.once, [] {
        try {
            instance.api = load_library(library_path());
        } catch (...) {
            instance.error = std::current_exception();
        }
    });
    return instance;
}

} // namespace

const NcclApi &api() {
    Loaded &l = loaded();
    if (l.error) std::rethrow_exception(l.error);
    return l.api;
}

bool api_available() noexcept {
    try {
        return !loaded().error;
    } catch (...) { // std::call_once itself failing (std::system_error)
        return false;
    }
}

} // namespace shardopt::nccl
