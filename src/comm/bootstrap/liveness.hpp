// Liveness: the rendezvous TCP connections, kept open for the life of the job as a channel that
// says when a process is gone.
//
// Rank 0 (the hub) keeps one connection per rank; every other rank keeps its connection to
// rank 0. The kernel closes a process's sockets however it dies (SIGKILL included), so:
//   - rank 0 sees rank r's connection close (or fail) -> rank r is lost; it tells every other
//     rank with a LOST frame;
//   - a rank sees its connection to rank 0 close -> rank 0 is lost;
//   - a rank that shuts down cleanly sends BYE first, and is reported as having left the job
//     (rank 0 relays that too), so nobody waits on it until a timeout.
// A background thread sleeps on the sockets (so news travels even while the application
// computes and never calls into the communicator); poll() is a cheap atomic check for the
// communication thread's progress loop, returning the ranks found gone since the last call.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frame.hpp"

namespace shardopt::bootstrap {

class Liveness {
  public:
    struct Event {
        int rank;
        bool left;          // true: closed cleanly (BYE); false: died or its connection broke
        std::string reason; // in words
    };

    // Rank 0: conns[r] is rank r's connection (conns[0] empty). Other ranks: one connection,
    // to rank 0.
    Liveness(int rank, int world_size, std::vector<Socket> conns);
    ~Liveness();
    Liveness(const Liveness &) = delete;
    Liveness &operator=(const Liveness &) = delete;

    int rank() const { return rank_; }
    // Ranks found gone since the last call (cheap when there is no news: one atomic load).
    std::vector<Event> poll();
    // Clean shutdown: stop watching, tell the others this rank is leaving, close (idempotent).
    void goodbye();

  private:
    struct Peer {
        Socket sock;
        int rank = -1; // the rank at the other end
        std::vector<std::uint8_t> in;
        bool open = false;
    };
    void watch();                          // the thread
    std::vector<Event> read_available();   // the thread: non-blocking read of every socket
    void drop(Peer &p, bool left, const std::string &reason, std::vector<Event> &events);
    void relay(int rank, bool left, const std::string &reason);

    int rank_, world_size_;
    std::vector<Peer> peers_;           // the thread's until goodbye() joined it
    std::vector<bool> reported_;        // the thread's
    int wake_[2] = {-1, -1};            // pipe: goodbye() wakes the thread
    std::thread thread_;
    std::atomic<bool> news_{false};
    std::mutex mutex_;
    std::vector<Event> pending_;        // under mutex_
    bool said_goodbye_ = false;
};

} // namespace shardopt::bootstrap
