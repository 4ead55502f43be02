// Helper process for the checkpoint tests.
//   checkpoint_tool save-loop DIR        train 4-rank ZeRO-2 (f64), save to DIR after every step,
//                                        alternating sharded and consolidated, until killed
//   checkpoint_tool export DIR f32|f64   train 3 steps on 2-rank FSDP, save consolidated to DIR
//                                        and the packed parameters raw to DIR/expected.bin
//   checkpoint_tool seeds DIR            small valid checkpoint files: the fuzzer's seed corpus
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "checkpoint_training.hpp"
#include "shardopt/inprocess.hpp"

using namespace shardopt;
using namespace shardopt::testing;

namespace {

int save_loop(const std::string &dir) {
    ResumeSetup s;
    const auto data = examples::make_blobs(s.samples, s.shape.inputs, s.shape.classes);
    run_inprocess(4, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), mlp_layout(s.shape, DType::f64), s.optimizer,
                                            strategy_options(Strategy::zero2), examples::mlp_init<double>(s.shape).data());
        for (int step = 1;; ++step) {
            train_step<double>(*opt, s, data);
            opt->save(dir, step % 3 == 0 ? CheckpointForm::consolidated : CheckpointForm::sharded);
        }
    });
    return 0;
}

template <typename T> int export_params(const std::string &dir) {
    ResumeSetup s;
    std::vector<T> params;
    params = run_training<T>(s, 2, strategy_options(Strategy::fsdp), 3, {},
                             [&](ShardedOptimizer &opt) { opt.save(dir, CheckpointForm::consolidated); });
    std::ofstream out(dir + "/expected.bin", std::ios::binary);
    out.write(reinterpret_cast<const char *>(params.data()), std::streamsize(params.size() * sizeof(T)));
    std::ofstream names(dir + "/expected.txt");
    for (const auto &t : examples::mlp_tensors(s.shape)) names << t.first << " " << t.second << "\n";
    return out && names ? 0 : 1;
}

int seeds(const std::string &dir) {
    // A tiny model: two tensors in two buckets, 2-rank ZeRO-2 with momentum SGD (one state slot).
    auto layout = [] {
        ParameterSet ps(DType::f32);
        ps.add("w", 5);
        ps.end_bucket();
        ps.add("b", 3);
        return ps;
    };
    OptimizerOptions o = OptimizerOptions::defaults(OptimizerKind::sgd);
    o.momentum = 0.9;
    o.lr = 0.1;
    const float init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    run_inprocess(2, [&](Communicator &comm) {
        auto opt = ShardedOptimizer::create(comm.shared_from_this(), layout(), o, strategy_options(Strategy::zero2), init);
        opt->zero_grad();
        for (int b = 0; b < 2; ++b) {
            auto *g = static_cast<float *>(opt->bucket_grad(b));
            for (std::size_t i = 0; i < opt->layout().bucket(b).count; ++i) g[i] = 0.5f * float(i + 1);
            opt->grad_ready(b);
        }
        opt->step();
        opt->save(dir + "/sharded");
        const auto bytes = opt->serialize();
        if (comm.rank() == 0) {
            std::ofstream out(dir + "/consolidated.bin", std::ios::binary);
            out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
        }
    });
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: checkpoint_tool save-loop DIR | export DIR f32|f64 | seeds DIR\n");
        return 2;
    }
    const std::string cmd = argv[1], dir = argv[2];
    try {
        if (cmd == "save-loop") return save_loop(dir);
        if (cmd == "export") return argc > 3 && std::strcmp(argv[3], "f32") == 0 ? export_params<float>(dir)
                                                                                 : export_params<double>(dir);
        if (cmd == "seeds") return seeds(dir);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "checkpoint_tool: %s\n", e.what());
        return 1;
    }
    return 2;
}
