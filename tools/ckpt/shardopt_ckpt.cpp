// shardopt-ckpt: checkpoints without a job (no communicator, no optimizer, bounded memory).
//
//   shardopt-ckpt inspect PATH [--verify]           the checkpoint as JSON (form, step, world
//                                                   size, optimizer, layout, files); --verify
//                                                   reads every segment and adds each part's digest
//   shardopt-ckpt verify PATH                       the same as inspect --verify, one line out
//   shardopt-ckpt convert SRC DST [--consolidated | --sharded] [--world-size N]
//                                                   the checkpoint in the other form (default:
//                                                   consolidated) or at another world size
//   shardopt-ckpt export SRC PARAMS.safetensors [--state STATE.safetensors]
//                                                   the parameters (and the optimizer state,
//                                                   torch.optim's names) as safetensors
//
// PATH, SRC: a checkpoint directory or its manifest file; DST: a directory (a checkpoint there is
// replaced atomically). Files are read and written a window at a time
// (SHARDOPT_CHECKPOINT_WINDOW_BYTES, 32 MiB by default). Exit status: 0 done, 1 the checkpoint is
// bad or unreadable (the message names the file and what is wrong), 2 usage.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/offline.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;
using namespace shardopt::checkpoint;

namespace {

const char *kUsage =
    "usage: shardopt-ckpt inspect PATH [--verify]\n"
    "       shardopt-ckpt verify PATH\n"
    "       shardopt-ckpt convert SRC DST [--consolidated | --sharded] [--world-size N]\n"
    "       shardopt-ckpt export SRC PARAMS.safetensors [--state STATE.safetensors]\n";

int usage(const std::string &why) {
    if (!why.empty()) std::fprintf(stderr, "shardopt-ckpt: %s\n", why.c_str());
    std::fputs(kUsage, stderr);
    return 2;
}

bool parse_int(const std::string &text, int &out) {
    char *end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < 1 || v > (1 << 24)) return false;
    out = int(v);
    return true;
}

int run(const std::string &command, const std::vector<std::string> &args) {
    std::vector<std::string> positional;
    bool verify = false, consolidated = true;
    int world = 0;
    std::string state;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string &a = args[i];
        if (a == "--verify" && command == "inspect") {
            verify = true;
        } else if ((a == "--consolidated" || a == "--sharded") && command == "convert") {
            consolidated = a == "--consolidated";
        } else if (a == "--world-size" && command == "convert") {
            if (i + 1 >= args.size() || !parse_int(args[i + 1], world)) return usage("--world-size needs a number >= 1");
            ++i;
        } else if (a == "--state" && command == "export") {
            if (i + 1 >= args.size()) return usage("--state needs a file");
            state = args[++i];
        } else if (a.size() > 1 && a[0] == '-') {
            return usage("unknown option '" + a + "' for " + command);
        } else {
            positional.push_back(a);
        }
    }
    if (command == "inspect" || command == "verify") {
        if (positional.size() != 1) return usage(command + " takes one checkpoint");
        const nlohmann::json out = inspect_checkpoint(positional[0], verify || command == "verify");
        if (command == "verify")
            std::printf("%s: ok (%s, step %s, world size %s, %s parameters, every checksum verified)\n",
                        positional[0].c_str(), out["form"].get<std::string>().c_str(),
                        out["step_count"].dump().c_str(), out["world_size"].dump().c_str(),
                        out["parameters"].dump().c_str());
        else
            std::printf("%s\n", out.dump(2).c_str());
        return 0;
    }
    if (command == "convert") {
        if (positional.size() != 2) return usage("convert takes a source and a destination");
        ConvertOptions options;
        options.consolidated = consolidated;
        options.world_size = world;
        convert_checkpoint(positional[0], positional[1], options);
        return 0;
    }
    if (command == "export") {
        if (positional.size() != 2) return usage("export takes a checkpoint and a parameters file");
        export_checkpoint(positional[0], positional[1], state);
        return 0;
    }
    return usage("unknown command '" + command + "'");
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) return usage("");
    const std::string command = argv[1];
    if (command == "-h" || command == "--help" || command == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    try {
        return run(command, std::vector<std::string>(argv + 2, argv + argc));
    } catch (const Error &e) {
        std::fprintf(stderr, "shardopt-ckpt %s: %s (%s)\n", command.c_str(), e.what(), error_code_name(e.code()));
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "shardopt-ckpt %s: %s\n", command.c_str(), e.what());
        return 1;
    }
}
