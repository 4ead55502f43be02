// The AsyncCheckpoint behind ShardedOptimizer::save_async: a ShardedSave (checkpoint_target.hpp)
// whose shard is written by a thread of its own and published on the optimizer's thread.
#pragma once

#include <functional>
#include <memory>

#include "checkpoint_target.hpp"
#include "shardopt/async_checkpoint.hpp"

namespace shardopt {

// `world`: the checkpoint's communicator (host buffers), valid for the object's life.
// `quiesce`: run before each of its collectives (the optimizer finishing what it left in flight
// on that communicator).
std::unique_ptr<AsyncCheckpoint> start_async_save(std::unique_ptr<checkpoint::ShardedSave> save,
                                                  Communicator &world, std::function<void()> quiesce,
                                                  double snapshot_seconds);

} // namespace shardopt
