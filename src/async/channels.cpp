#include "channels.hpp"

namespace shardopt::async {

void Channel::send(const void *data, std::size_t bytes, int peer, int tag) {
    std::lock_guard<std::mutex> lock(send_);
    comm_->send(data, bytes, DType::u8, peer, tag);
}

Channels::Channels(Communicator &world) : grads(world.split(0, world.rank())), params(world.split(0, world.rank())) {
    notices.resize(std::size_t(world.size()));
    for (int w = 1; w < world.size(); ++w) {
        const bool member = world.rank() == 0 || world.rank() == w;
        CommunicatorPtr pair = world.split(member ? 0 : -1, world.rank());
        if (member) notices[std::size_t(w)] = std::move(pair);
    }
}

void Channels::set_timeout(Communicator::Duration timeout) {
    grads.comm().set_timeout(2 * timeout);
    params.comm().set_timeout(2 * timeout);
    for (auto &n : notices)
        if (n) n->set_timeout(timeout);
}

void Channels::abort(const std::string &reason, ErrorCode code) {
    grads.comm().abort(reason, code);
    params.comm().abort(reason, code);
    for (auto &n : notices)
        if (n) n->abort(reason, code);
}

std::uint64_t Channels::bytes_sent() const {
    std::uint64_t total = grads.comm().bytes_sent() + params.comm().bytes_sent();
    for (const auto &n : notices)
        if (n) total += n->bytes_sent();
    return total;
}

} // namespace shardopt::async
