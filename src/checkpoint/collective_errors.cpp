#include "collective_errors.hpp"

#include <string>
#include <vector>

#include "shardopt/error.hpp"

namespace shardopt::checkpoint {

void run_agreed(Communicator &comm, const std::function<void()> &fn) {
    ErrorCode code = ErrorCode::ok;
    std::string message;
    try {
        fn();
    } catch (const Error &e) {
        code = e.code();
        message = e.what();
    } catch (const std::bad_alloc &) {
        code = ErrorCode::out_of_memory;
        message = "out of memory during a checkpoint operation";
    } catch (const std::exception &e) {
        code = ErrorCode::internal;
        message = e.what();
    }
    int32_t failing = code == ErrorCode::ok ? comm.size() : comm.rank();
    comm.allreduce(&failing, &failing, 1, DType::i32, ReduceOp::min);
    if (failing == comm.size()) return;
    int64_t info[2] = {int64_t(code), int64_t(message.size())};
    comm.broadcast(info, 2, DType::i64, failing);
    message.resize(std::size_t(info[1]));
    if (info[1] > 0) comm.broadcast(message.data(), std::size_t(info[1]), DType::u8, failing);
    if (comm.rank() != failing) message += " (reported by rank " + std::to_string(failing) + ")";
    throw Error(ErrorCode(info[0]), message);
}

} // namespace shardopt::checkpoint
