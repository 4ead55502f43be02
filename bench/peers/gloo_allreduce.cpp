// Peer benchmark: Gloo's ring allreduce (gloo::AllreduceRing<float>, sum) over its TCP transport
// on loopback, or on the interface GLOO_IFACE names (bench/hosts.sh: eth0 of each namespace). Run under tools/shardopt-run (rank and size from SHARDOPT_RANK /
// SHARDOPT_WORLD_SIZE); the ranks meet through a gloo FileStore in GLOO_STORE_DIR (default: a
// directory under /tmp named after SHARDOPT_JOB_TOKEN). Prints peer=gloo lines.
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allreduce_ring.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "peer_line.hpp"

static std::string env(const char *name, const char *fallback) {
    const char *v = std::getenv(name);
    return v && *v ? v : fallback;
}

int main(int argc, char **argv) {
    const PeerArgs args(argc, argv);
    const int rank = std::atoi(env("SHARDOPT_RANK", "0").c_str());
    const int n = std::atoi(env("SHARDOPT_WORLD_SIZE", "1").c_str());
    const std::string dir = env("GLOO_STORE_DIR", ("/tmp/shardopt-gloo-" + env("SHARDOPT_JOB_TOKEN", "job")).c_str());
    ::mkdir(dir.c_str(), 0700);

    gloo::transport::tcp::attr attr;
    if (const std::string iface = env("GLOO_IFACE", ""); !iface.empty())
        attr.iface = iface;
    else
        attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir);
    gloo::rendezvous::PrefixStore store("bench", file_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
    context->setTimeout(std::chrono::seconds(300));
    context->connectFullMesh(store, dev);

    std::vector<float> a(args.max_bytes / 4 + 1, 1.0f);
    gloo::BarrierAllToAll barrier(context);
    for (std::size_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) {
        std::vector<float *> ptrs{a.data()};
        gloo::AllreduceRing<float> allreduce(context, ptrs, int(bytes / 4));
        time_allreduce(
            "gloo", rank, n, bytes, args.iters(bytes), [&] { allreduce.run(); }, [&] { barrier.run(); });
    }
    barrier.run();
    if (rank == 0) std::system(("rm -rf '" + dir + "'").c_str());
    return 0;
}
