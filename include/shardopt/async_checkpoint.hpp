// AsyncCheckpoint: a sharded checkpoint whose writing overlaps training.
//
//   auto pending = opt->save_async("ckpt/");   // collective, at a step boundary
//   ... a training step ...
//   if (pending->poll()) ...                     // collective, between steps: true once complete
//   ...
//   pending->finish();                           // collective: waits until it is complete
//
// save_async copies this rank's shard of the parameters and optimizer state into host memory
// (the same segments save() writes) and starts a background thread that writes this rank's
// shard file atomically. Publishing takes two more stages, each entered by poll() once every
// rank is ready for it, so nothing waits on a file: when every rank's shard is written, the
// ranks agree whether any write failed (then every rank throws that error, Error(io) naming the
// path, and the unpublished shard files go) and gather the files' sizes, and rank 0 starts
// writing the manifest `checkpoint.shardopt` in the background, atomically, as save() does; when
// it is in place (the moment the checkpoint exists) the ranks agree on that, and poll() returns
// true. Until then the directory holds the previous checkpoint, whatever happens to the job.
// The files are save()'s, byte for byte apart from the generation in their names, and load at
// any world size and strategy.
//
// poll() and finish() run collectives on the optimizer's communicator, on the thread that
// drives the optimizer, every rank in the same order: one 4-byte allreduce per poll while
// nothing changes. One asynchronous checkpoint per directory at a time. An AsyncCheckpoint must
// not outlive its optimizer; destroying an incomplete one waits for its threads and leaves the
// previous checkpoint in place, or this one if its manifest was already written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardopt {

class AsyncCheckpoint {
  public:
    virtual ~AsyncCheckpoint() = default;

    // The optimizer's step count when the snapshot was taken.
    virtual std::int64_t step_count() const noexcept = 0;
    virtual const std::string &directory() const noexcept = 0;
    // Host memory the snapshot holds until its write ends.
    virtual std::size_t snapshot_bytes() const noexcept = 0;
    // Seconds save_async spent copying (on the calling thread), and the background write took
    // (0 until it ended).
    virtual double snapshot_seconds() const noexcept = 0;
    virtual double write_seconds() const noexcept = 0;

    // This rank's shard file is written (or its write failed). Not collective.
    virtual bool written() const noexcept = 0;
    // Collective: moves publication on as far as it goes without waiting (see above); true on
    // every rank once the checkpoint is complete. Throws on every rank when a write failed.
    virtual bool poll() = 0;
    // Collective: waits for the writes and publishes; returns with the checkpoint complete.
    // Once complete, poll() returns true and finish() returns at once, without collectives; once
    // failed, both throw Error(invalid_state).
    virtual void finish() = 0;
    virtual bool complete() const noexcept = 0;
};

} // namespace shardopt
