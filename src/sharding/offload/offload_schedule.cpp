#include "offload_schedule.hpp"

#include <utility>

#include "shardopt/error.hpp"

namespace shardopt {

const char *offload_op_name(OffloadOp::Kind kind) noexcept {
    switch (kind) {
    case OffloadOp::Kind::copy_grads_to_host: return "copy_grads_to_host";
    case OffloadOp::Kind::wait_grads_on_host: return "wait_grads_on_host";
    case OffloadOp::Kind::norm_on_host: return "norm_on_host";
    case OffloadOp::Kind::wait_params_copy: return "wait_params_copy";
    case OffloadOp::Kind::begin_update: return "begin_update";
    case OffloadOp::Kind::sum_update_stats: return "sum_update_stats";
    case OffloadOp::Kind::finish_update: return "finish_update";
    case OffloadOp::Kind::copy_params_to_device: return "copy_params_to_device";
    case OffloadOp::Kind::device_waits_params: return "device_waits_params";
    case OffloadOp::Kind::copy_shard_to_device: return "copy_shard_to_device";
    case OffloadOp::Kind::gather_params: return "gather_params";
    }
    return "invalid-offload-op";
}

std::string to_string(const OffloadOp &op) {
    std::string text = offload_op_name(op.kind);
    if (op.bucket >= 0) text += "(" + std::to_string(op.bucket) + ")";
    return text;
}

std::string to_string(const std::vector<OffloadOp> &ops) {
    std::string text;
    for (const OffloadOp &op : ops) text += (text.empty() ? "" : ", ") + to_string(op);
    return text;
}

OffloadSchedule::OffloadSchedule(Config config)
    : config_(std::move(config)), grads_(std::size_t(config_.buckets), Grads::on_device),
      params_read_(std::size_t(config_.buckets), false) {
    require(config_.buckets >= 0, ErrorCode::invalid_argument, "offload schedule: negative bucket count");
    require(config_.owns.empty() || int(config_.owns.size()) == config_.buckets, ErrorCode::invalid_argument,
            "offload schedule: owns has " + std::to_string(config_.owns.size()) + " entries for " +
                std::to_string(config_.buckets) + " buckets");
}

int OffloadSchedule::check(int b) const {
    require(b >= 0 && b < config_.buckets, ErrorCode::invalid_argument,
            "offload schedule: bucket " + std::to_string(b) + " out of range [0, " + std::to_string(config_.buckets) +
                ")");
    return b;
}

OffloadSchedule::Grads OffloadSchedule::grads(int b) const { return grads_[std::size_t(check(b))]; }
bool OffloadSchedule::host_params_in_use(int b) const { return params_read_[std::size_t(check(b))]; }

void OffloadSchedule::wait_until_unread(int b, std::vector<OffloadOp> &ops) {
    if (!params_read_[std::size_t(b)]) return;
    ops.push_back({OffloadOp::Kind::wait_params_copy, b});
    params_read_[std::size_t(b)] = false;
}

void OffloadSchedule::begin_backward() {
    for (Grads &g : grads_) g = Grads::on_device;
    copied_.clear();
}

std::vector<OffloadOp> OffloadSchedule::reduction_complete(int b) {
    Grads &g = grads_[std::size_t(check(b))];
    if (g != Grads::on_device) return {}; // reported already
    if (!owns(b)) {
        g = Grads::on_host; // nothing of it is this rank's
        return {};
    }
    g = Grads::to_host;
    copied_.push_back(b);
    return {{OffloadOp::Kind::copy_grads_to_host, b}};
}

std::vector<OffloadOp> OffloadSchedule::gradients_on_host() {
    for (int b = 0; b < config_.buckets; ++b)
        require(grads_[std::size_t(b)] != Grads::on_device, ErrorCode::invalid_state,
                "offload schedule: the reduction of bucket " + std::to_string(b) +
                    " was never reported complete, so its gradient is not on its way to the host");
    std::vector<OffloadOp> ops;
    for (int b : copied_) {
        if (grads_[std::size_t(b)] != Grads::to_host) continue;
        ops.push_back({OffloadOp::Kind::wait_grads_on_host, b});
        grads_[std::size_t(b)] = Grads::on_host;
    }
    ops.push_back({OffloadOp::Kind::norm_on_host, -1});
    return ops;
}

std::vector<OffloadOp> OffloadSchedule::update() {
    for (int b = 0; b < config_.buckets; ++b)
        require(grads_[std::size_t(b)] == Grads::on_host, ErrorCode::invalid_state,
                "offload schedule: bucket " + std::to_string(b) + "'s gradient is not on the host yet");
    std::vector<OffloadOp> ops;
    for (int b = 0; b < config_.buckets; ++b)
        if (owns(b)) ops.push_back({OffloadOp::Kind::begin_update, b});
    if (config_.update_stats) ops.push_back({OffloadOp::Kind::sum_update_stats, -1});
    for (int b = 0; b < config_.buckets; ++b) {
        if (owns(b)) {
            wait_until_unread(b, ops); // the last copy out of b's master weights, before they change
            ops.push_back({OffloadOp::Kind::finish_update, b});
            if (!config_.params_stay_on_host) {
                ops.push_back({OffloadOp::Kind::copy_params_to_device, b});
                ops.push_back({OffloadOp::Kind::device_waits_params, b});
                params_read_[std::size_t(b)] = true;
            }
        }
        if (config_.gather_after_update) ops.push_back({OffloadOp::Kind::gather_params, b});
    }
    return ops;
}

std::vector<OffloadOp> OffloadSchedule::gather(int u) {
    check(u);
    if (!config_.params_stay_on_host) return {{OffloadOp::Kind::gather_params, u}};
    params_read_[std::size_t(u)] = true;
    return {{OffloadOp::Kind::copy_shard_to_device, u},
            {OffloadOp::Kind::device_waits_params, u},
            {OffloadOp::Kind::gather_params, u}};
}

std::vector<OffloadOp> OffloadSchedule::replace_parameters() {
    std::vector<OffloadOp> ops;
    for (int b = 0; b < config_.buckets; ++b) wait_until_unread(b, ops);
    return ops;
}

} // namespace shardopt
