// The GPU communicators' host side, which runs anywhere: backend names, and the errors a
// machine without a GPU (or a build without CUDA/NCCL) gives instead of a communicator.
#define BOOST_TEST_MODULE gpu communicator host side
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include "shardopt/device_optimizer.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/ucx.hpp"

#ifdef SHARDOPT_HAVE_NCCL
#include "comm/nccl/nccl_library.hpp"
#endif

using namespace shardopt;

namespace {

template <class F> void expect_unsupported_call(F &&call, const std::string &what, const std::string &needle) {
    try {
        call();
        BOOST_FAIL(what << " succeeded");
    } catch (const Error &e) {
        BOOST_TEST_MESSAGE(what << ": " << e.what());
        BOOST_TEST(int(e.code()) == int(ErrorCode::unsupported), what << ": " << e.what());
        BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, what << ": " << e.what());
    }
}

void expect_unsupported(const std::string &backend, const std::string &needle) {
    try {
        create_communicator_from_env(backend);
        BOOST_FAIL("backend " << backend << " gave a communicator on a machine that cannot run it");
    } catch (const Error &e) {
        BOOST_TEST_MESSAGE(backend << ": " << e.what());
        BOOST_TEST(int(e.code()) == int(ErrorCode::unsupported));
        BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "message: " << e.what());
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(unknown_backend_lists_the_gpu_ones) {
    try {
        create_communicator_from_env("cuda-magic");
        BOOST_FAIL("an unknown backend name was accepted");
    } catch (const Error &e) {
        BOOST_TEST(std::string(e.what()).find("nccl, staged") != std::string::npos, e.what());
    }
}

// Where nothing can run them, each says why (no silent fallback to a host backend).
BOOST_AUTO_TEST_CASE(gpu_backends_without_a_device_say_why) {
    if (cuda::device_count() > 0) return; // a GPU machine: the gpu-labelled tests cover them
    expect_unsupported("nccl", gpu::nccl_available() ? "backend 'nccl': no CUDA device" : "not available");
    expect_unsupported("staged", gpu::staged_available() ? "backend 'staged': no CUDA device" : "not available");
    const BootstrapConfig one;
    BOOST_CHECK_THROW(gpu::create_nccl_communicator(one), Error);
    BOOST_CHECK_THROW(gpu::create_staged_communicator(one), Error);
}

BOOST_AUTO_TEST_CASE(host_communicators_have_no_stream) {
    auto comm = make_inprocess_group(1)[0];
    try {
        gpu::stream_of(*comm);
        BOOST_FAIL("an in-process communicator reported a stream");
    } catch (const Error &e) {
        BOOST_TEST(int(e.code()) == int(ErrorCode::invalid_argument));
        BOOST_TEST(std::string(e.what()).find("inprocess") != std::string::npos, e.what());
    }
    BOOST_CHECK_THROW(gpu::set_stream(*comm, nullptr), Error);
    BOOST_CHECK_THROW(gpu::device_of(*comm), Error);
}

#ifdef SHARDOPT_HAVE_NCCL
// NCCL is opened at run time; a library that is not there, or is not NCCL, is `unsupported`
// with a message that names it and says how to fix it. load_library does not touch the
// process-wide table, so these run whatever the host has.
BOOST_AUTO_TEST_CASE(nccl_loader_names_a_library_it_cannot_use) {
    const std::string missing = "/nonexistent/libnccl.so.2";
    expect_unsupported_call([&] { nccl::load_library(missing); }, "loading " + missing, "'" + missing + "'");
    expect_unsupported_call([&] { nccl::load_library(missing); }, "loading " + missing, "SHARDOPT_NCCL_LIBRARY");
    // A library that loads but has no NCCL in it.
    expect_unsupported_call([] { nccl::load_library("libc.so.6"); }, "loading libc.so.6 as NCCL",
                            "has no function ncclGetVersion");
}

BOOST_AUTO_TEST_CASE(nccl_library_path_follows_the_environment) {
    const char *old = std::getenv("SHARDOPT_NCCL_LIBRARY");
    const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
    ::setenv("SHARDOPT_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2", 1);
    BOOST_TEST(nccl::library_path() == "/opt/nccl/lib/libnccl.so.2");
    ::setenv("SHARDOPT_NCCL_LIBRARY", "", 1);
    BOOST_TEST(nccl::library_path() == "libnccl.so.2");
    ::unsetenv("SHARDOPT_NCCL_LIBRARY");
    BOOST_TEST(nccl::library_path() == "libnccl.so.2");
    if (saved) ::setenv("SHARDOPT_NCCL_LIBRARY", saved->c_str(), 1);
}

// SHARDOPT_NCCL_LIBRARY naming a missing file: the backend is unavailable (no throw from
// nccl_available) and creating it fails with `unsupported` naming the path, before any device
// or rendezvous is touched. NCCL is loaded once per process, so this runs in a process of its
// own (ctest unit.gpu_comm_host.nccl_missing runs it by name; it is off in a plain run).
BOOST_AUTO_TEST_CASE(nccl_backend_with_a_missing_library, *boost::unit_test::disabled()) {
    const std::string missing = "/nonexistent/libnccl.so.2";
    ::setenv("SHARDOPT_NCCL_LIBRARY", missing.c_str(), 0); // ctest sets it already
    BOOST_REQUIRE(nccl::library_path() == missing);
    BOOST_TEST(!gpu::nccl_available());
    expect_unsupported("nccl", "'" + missing + "'");
    expect_unsupported_call([] { gpu::create_nccl_communicator(BootstrapConfig{}); }, "create_nccl_communicator",
                            "'" + missing + "'");
    expect_unsupported_call([] { nccl::api(); }, "nccl::api()", "cannot load the NCCL library");
}
#endif
