// Peer benchmark: MPI_Allreduce (f32 sum) with the MPI library's defaults (Open MPI: its shared
// memory transport between local ranks). Run under mpirun; prints peer=openmpi lines.
#include <mpi.h>

#include <vector>

#include "peer_line.hpp"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const PeerArgs args(argc, argv);
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::vector<float> a(args.max_bytes / 4 + 1, 1.0f), b(args.max_bytes / 4 + 1, 0.0f);
    for (std::size_t bytes = args.min_bytes; bytes <= args.max_bytes; bytes *= 4) {
        const int count = int(bytes / 4);
        time_allreduce(
            "openmpi", rank, n, bytes, args.iters(bytes),
            [&] { MPI_Allreduce(a.data(), b.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
            [&] { MPI_Barrier(MPI_COMM_WORLD); });
    }
    MPI_Finalize();
    return 0;
}
