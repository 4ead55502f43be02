// BatchMemory: where the model's batches live. The training loop reads the optimizer's parameters
// into params(), asks the model for a gradient in grad() and steps on it; host memory by default
// (host_batch_memory.cpp), or with TrainingOptions::device_batches the optimizer's device memory
// (src/sharding/engine/space_batch_memory.cpp), moved device to device on its compute stream.
#pragma once

#include <cstddef>
#include <memory>

#include "shardopt/training.hpp"

namespace shardopt::training {

class Trainee;

class BatchMemory {
  public:
    virtual ~BatchMemory() = default;

    // Packed parameters and gradient (the layout's element count each).
    virtual void *params() noexcept = 0;
    virtual void *grad() noexcept = 0;
    virtual bool on_device() const noexcept = 0;
    // Batch::on_device, device and cuda_stream.
    virtual void describe(Batch &b) const noexcept = 0;

    // params() <- the optimizer's current parameters (collective where they are sharded).
    virtual void read_parameters() = 0;
    // params() <- / -> a packed host copy.
    virtual void load(const void *packed_host) = 0;
    virtual void store(void *packed_host) = 0;
    virtual void clear_grad() = 0;
    virtual void scale_grad(double factor) = 0;
};

// Host memory, read through the trainee's get_parameters.
std::unique_ptr<BatchMemory> host_batch_memory(Trainee &trainee);

} // namespace shardopt::training
