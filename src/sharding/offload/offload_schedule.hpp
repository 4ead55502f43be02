// OffloadSchedule: when ZeRO-Offload moves each bucket's data between the device and host
// memory, as DeepSpeed's ZeRO-Offload does it:
//
//   backward  bucket b's reduction completes -> b's reduced gradient (the rank's owned region) is
//             copied to the host at once, while later buckets are still being reduced;
//   step      every copy waited for -> the global gradient norm on the host (the skip and clip
//             decisions need all of it) -> bucket by bucket: the CPU update of b, then b's
//             updated parameters copied to the device while b+1 is updated; the device waits for
//             b's copy before b's parameter allgather (ZeRO-1/2) and before anything the caller
//             enqueues next;
//   FSDP      with the parameter shard on the host (cpu_offload_params), gather(u) copies u's shard
//             to the device, the device waits for it, and the unit is gathered there.
//
// Before the CPU update of b writes b's master weights (or set_parameters, a load replace
// them), the host waits until the last copy out of them to the device has read them. (Before a
// gradient staging buffer is reused, the device waits until the copy out of it is done: the
// engine keeps that mark with the buffer.)
//
// The schedule decides and remembers where each bucket's data is; it issues nothing. The engine
// runs each Op it returns through the space's copy lanes (engine/offload_lanes.hpp).
#pragma once

#include <string>
#include <vector>

namespace shardopt {

struct OffloadOp {
    enum class Kind {
        copy_grads_to_host,      // enqueue the device-to-host copy of b's reduced owned region
        wait_grads_on_host,      // the host waits for it
        norm_on_host,            // the global gradient norm from the host copies (bucket -1)
        wait_params_copy,        // the host waits until the last copy of b's master weights is done
        begin_update,            // clip b's host gradient, start the CPU update (LAMB: its statistics)
        sum_update_stats,        // LAMB: sum the per-tensor statistics across the ranks (bucket -1)
        finish_update,           // the CPU update of b
        copy_params_to_device,   // enqueue the host-to-device copy of b's updated owned region
        device_waits_params,     // the device waits for it (before the gather and the caller's kernels)
        copy_shard_to_device,    // FSDP with the shard on the host: enqueue its copy into unit b's buffer
        gather_params,           // b's parameter allgather (ZeRO-1/2 after the update; FSDP's gather)
    };
    Kind kind;
    int bucket = -1;
    bool operator==(const OffloadOp &o) const noexcept { return kind == o.kind && bucket == o.bucket; }
    bool operator!=(const OffloadOp &o) const noexcept { return !(*this == o); }
};
const char *offload_op_name(OffloadOp::Kind kind) noexcept;
std::string to_string(const OffloadOp &op);            // "copy_grads_to_host(2)", "norm_on_host"
std::string to_string(const std::vector<OffloadOp> &ops); // comma-separated

class OffloadSchedule {
  public:
    // Where a bucket's reduced gradient is within a step.
    enum class Grads { on_device, to_host, on_host };

    struct Config {
        int buckets = 0;
        // Whether this rank owns elements of each bucket (its chunk of a small bucket may be all
        // padding): buckets it does not own copy and update nothing. Empty: it owns some of each.
        std::vector<bool> owns;
        bool params_stay_on_host = false; // cpu_offload_params: the update writes the resident shard
        bool gather_after_update = false; // ZeRO-1/2: allgather each bucket after its update
        bool update_stats = false;        // LAMB with tensors split across ranks
    };
    explicit OffloadSchedule(Config config);

    int buckets() const noexcept { return config_.buckets; }
    Grads grads(int b) const;
    // True while a copy to the device may still be reading b's host parameters (the master
    // weights, or FSDP's resident shard): the host must wait for it before writing them.
    bool host_params_in_use(int b) const;
    // Buckets whose gradient copy was issued this step, in issue order.
    const std::vector<int> &copy_order() const noexcept { return copied_; }

    // zero_grad: a new backward; every reduced gradient of the last step is gone.
    void begin_backward();
    // Bucket b's reduction has completed (its Work waited for or tested done): what to issue now.
    std::vector<OffloadOp> reduction_complete(int b);
    // step(), once every bucket's reduction has completed: the host waits for the gradients and
    // sums the norm. Error(invalid_state) naming a bucket whose reduction was never reported.
    std::vector<OffloadOp> gradients_on_host();
    // step(), after the norm allowed the update: the update and the copies back, in order.
    std::vector<OffloadOp> update();
    // FSDP gather(u): what makes unit u's parameters available on the device.
    std::vector<OffloadOp> gather(int u);
    // set_parameters, a checkpoint load, state synchronization are about to replace the
    // parameters (and the engine then the master weights): the host waits for the copies still
    // reading them first.
    std::vector<OffloadOp> replace_parameters();

  private:
    int check(int b) const;
    bool owns(int b) const { return config_.owns.empty() || config_.owns[std::size_t(b)]; }
    // Appends wait_params_copy(b) when a copy may still read b's host parameters.
    void wait_until_unread(int b, std::vector<OffloadOp> &ops);

    Config config_;
    std::vector<Grads> grads_;
    std::vector<bool> params_read_; // host_params_in_use
    std::vector<int> copied_;
};

} // namespace shardopt
