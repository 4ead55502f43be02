// The GPU communicators' host side, which runs anywhere: backend names, and the errors a
// machine without a GPU (or a build without CUDA/NCCL) gives instead of a communicator.
#define BOOST_TEST_MODULE gpu communicator host side
#include <boost/test/unit_test.hpp>

#include <string>

#include "shardopt/cuda_optimizer.hpp"
#include "shardopt/gpu_comm.hpp"
#include "shardopt/inprocess.hpp"
#include "shardopt/ucx.hpp"

using namespace shardopt;

namespace {

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
