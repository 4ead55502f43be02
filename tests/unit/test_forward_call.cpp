// moved_buffers + forward_call, the pieces StagedComm and HostBufferComm are built from (both
// need a GPU): a wrapper that runs every collective on buffers of its own, sized and filled as
// moved_buffers says, must pass the conformance suite's collective cases like the backend below.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "comm/forward_call.hpp"
#include "conformance_cases.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;

namespace {

// The shape of StagedComm::run on host memory: copy in, forward, copy out.
class MovingComm final : public Communicator {
  public:
    explicit MovingComm(CommunicatorPtr inner) : Communicator(inner->rank(), inner->size()), inner_(std::move(inner)) {}
    ~MovingComm() override { shutdown_queues(); }
    std::string backend_name() const override { return inner_->backend_name() + "+moved"; }
    std::uint64_t bytes_sent() const noexcept override { return inner_->bytes_sent(); }

  protected:
    void run(const Call &call) override {
        if (call.kind == CallKind::barrier || call.kind == CallKind::send || call.kind == CallKind::recv)
            return forward_call(*inner_, call);
        const MovedBuffers m = moved_buffers(call, rank(), size());
        // Poisoned, so anything moved_buffers forgets to copy in shows up in the result.
        in_.assign(m.in_capacity + 1, 0xA5);
        out_.assign(m.out_capacity + 1, 0x5A);
        if (m.in_bytes) std::memcpy(in_.data(), m.in_source, m.in_bytes);
        Call moved = call;
        moved.send = in_.data();
        moved.recv = m.in_place ? in_.data() : out_.data();
        forward_call(*inner_, moved);
        if (m.out_bytes) std::memcpy(call.recv, moved.recv, m.out_bytes);
    }
    CommunicatorPtr run_split(int color, int key) override {
        auto child = inner_->split(color, key);
        return child ? std::make_shared<MovingComm>(std::move(child)) : nullptr;
    }
    void on_abort(const std::string &reason, ErrorCode code) override { inner_->abort(reason, code); }

  private:
    CommunicatorPtr inner_;
    std::vector<unsigned char> in_, out_;
};

} // namespace

BOOST_AUTO_TEST_CASE(collectives_through_moved_buffers) {
    for (int ws : {1, 2, 3, 4})
        for (const auto &c : conformance::collective_cases()) {
            if (ws < c.min_size) continue;
            std::vector<CommunicatorPtr> moved;
            for (auto &comm : make_inprocess_group(ws)) moved.push_back(std::make_shared<MovingComm>(comm));
            try {
                run_on_ranks(moved, c.run);
            } catch (const std::exception &e) {
                BOOST_ERROR(c.name << " at world size " << ws << ": " << e.what());
            }
        }
}

BOOST_AUTO_TEST_CASE(what_each_collective_moves) {
    Call call;
    call.count = 3;
    call.dtype = DType::f32;
    call.root = 1;
    call.kind = CallKind::broadcast;
    const MovedBuffers at_root = moved_buffers(call, 1, 4), elsewhere = moved_buffers(call, 0, 4);
    BOOST_TEST((at_root.in_place && at_root.in_bytes == 12 && at_root.out_bytes == 0));
    BOOST_TEST((elsewhere.in_bytes == 0 && elsewhere.out_bytes == 12 && elsewhere.in_capacity == 12));
    call.kind = CallKind::reduce;
    BOOST_TEST(moved_buffers(call, 0, 4).out_bytes == 0u);
    BOOST_TEST(moved_buffers(call, 0, 4).out_capacity == 12u); // the collective may still write it
    call.kind = CallKind::reduce_scatter;
    BOOST_TEST((moved_buffers(call, 0, 4).in_bytes == 48 && moved_buffers(call, 0, 4).out_bytes == 12));
    call.kind = CallKind::send;
    BOOST_CHECK_THROW(moved_buffers(call, 0, 4), Error);
}
