// FSDP's prefetch: which unit to start gathering while the caller works on the one it asked for.
#pragma once

#include <cstddef>
#include <vector>

namespace shardopt::engine {

// A step gathers its units in the order the previous step did (torch FSDP records its execution
// order the same way): a module's forward need not follow the layout, and a torch unit of several
// buckets is walked up while the units go down, which a guess from the last two units gets wrong
// at every unit (a wasted allgather and a buffer over the plan each time). Before a step has been
// recorded, or once this step strays from the record, the direction of travel is the guess.
class GatherOrder {
  public:
    // Unit b (of `units`) is being gathered: the unit to prefetch, or -1. Asking again for the
    // unit just asked for changes nothing.
    int next_after(int b, int units);
    // The step's units were released: what it gathered is the order the next step follows (a step
    // that gathered nothing keeps the record it had).
    void end_step();

  private:
    std::vector<int> recording_, replay_;
    std::size_t replay_at_ = 0; // the replay's entry this step reaches next
    bool following_ = true;     // this step has gathered as the replay did so far
    int last_ = -1, predicted_ = -1;
};

} // namespace shardopt::engine
