#include "offline.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <xxhash.h>

#include "atomic_file.hpp"
#include "checkpoint_reader.hpp"
#include "consolidated.hpp"
#include "container_format.hpp"
#include "safetensors_writer.hpp"
#include "target_manifest.hpp"
#include "shardopt/error.hpp"

namespace shardopt::checkpoint {
namespace {

std::size_t elem_of(const LayoutInfo &layout) { return dtype_size(layout.dtype); }

std::string text_field(const nlohmann::json &j, const char *key) {
    if (!j.is_object()) return "";
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Each element range [offset, offset + count) of every tensor in order, in steps of at most a
// window: fn(tensor, offset, count).
template <typename F> void for_each_window(const LayoutInfo &layout, F &&fn) {
    const std::uint64_t per = std::max<std::uint64_t>(1, checkpoint_window_bytes() / elem_of(layout));
    for (int t = 0; t < int(layout.tensors.size()); ++t)
        for (std::uint64_t at = 0; at < layout.tensors[std::size_t(t)].count; at += per)
            fn(t, at, std::min(per, layout.tensors[std::size_t(t)].count - at));
}

std::vector<int> rank_state_ranks(const SegmentIndex &index) {
    std::vector<int> ranks;
    for (const auto &part : index.rank_state_parts())
        ranks.push_back(std::atoi(part.c_str() + std::strlen(SegmentIndex::kRankStatePrefix)));
    return ranks;
}

} // namespace

TorchState torch_state(const Manifest &m) {
    TorchState out;
    std::vector<std::string> &names = out.slots;
    const auto option = [&](const char *key) {
        if (!m.optimizer.is_object()) return false;
        const auto it = m.optimizer.find(key);
        return it != m.optimizer.end() && ((it->is_boolean() && it->get<bool>()) || (it->is_number() && it->get<double>() != 0));
    };
    out.step = true; // every torch.optim class below but SGD counts steps per parameter
    switch (OptimizerKind(m.optimizer_kind)) {
    case OptimizerKind::sgd: names = {"momentum_buffer"}, out.torch_class = "SGD", out.step = false; break;
    case OptimizerKind::adam: names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, out.torch_class = "Adam"; break;
    case OptimizerKind::adamw: names = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, out.torch_class = "AdamW"; break;
    case OptimizerKind::lamb: names = {"exp_avg", "exp_avg_sq"}; break; // no torch.optim class
    case OptimizerKind::adagrad: names = {"sum"}, out.torch_class = "Adagrad"; break;
    case OptimizerKind::rmsprop:
        names = {"square_avg"}, out.torch_class = "RMSprop";
        if (option("momentum")) names.push_back("momentum_buffer");
        if (option("centered")) names.push_back("grad_avg");
        break;
    case OptimizerKind::nadam: names = {"exp_avg", "exp_avg_sq"}; break; // torch's NAdam also keeps mu_product
    case OptimizerKind::adamax: names = {"exp_avg", "exp_inf"}, out.torch_class = "Adamax"; break;
    case OptimizerKind::adadelta: names = {"square_avg", "acc_delta"}, out.torch_class = "Adadelta"; break;
    case OptimizerKind::lion: names = {"exp_avg"}; break; // the name of lion-pytorch's state
    case OptimizerKind::adafactor:                          // not trained by the engine yet: generic names
    case OptimizerKind::muon: break;                        // torch's keep other state: no class
    }
    if (out.torch_class.empty()) out.step = false;
    // a slot torch does not name (or a count torch would not keep) is no torch state
    if (int(names.size()) < m.state_slots) out.torch_class.clear(), out.step = false;
    names.resize(std::size_t(m.state_slots));
    for (int k = 0; k < m.state_slots; ++k)
        if (names[std::size_t(k)].empty()) names[std::size_t(k)] = "state" + std::to_string(k);
    return out;
}

namespace {

std::vector<std::string> slot_names(const Manifest &m) { return torch_state(m).slots; }

// A container file written at offsets: placed after a header whose checksums are filled in once
// the data is there; published atomically.
class ContainerWriter {
  public:
    ContainerWriter(const std::string &path, const std::string &tag, nlohmann::json header,
                    std::vector<SegmentRecord> records, std::uint64_t data_bytes)
        : header_(std::move(header)), records_(std::move(records)), data_bytes_(data_bytes),
          head_bytes_(container_head(header_, records_, data_bytes_).size()),
          file_(path, tag, PositionalFile::Mode::create, head_bytes_ + data_bytes_) {}
    // Record i's bytes (in its data area).
    void put(std::size_t i, const void *data) {
        records_[i].xxh3 = xxh3(data, std::size_t(records_[i].bytes));
        file_.write_at(head_bytes_ + records_[i].data_offset, data, std::size_t(records_[i].bytes));
    }
    // Record i lies in another file (the parameters'): only its checksum.
    void checksum(std::size_t i, const void *data) { records_[i].xxh3 = xxh3(data, std::size_t(records_[i].bytes)); }
    // Returns the file's size and its header's checksum.
    std::pair<std::uint64_t, std::uint64_t> publish() {
        const std::string head = container_head(header_, records_, data_bytes_);
        require(head.size() == head_bytes_, ErrorCode::internal, "checkpoint writer: header length changed");
        file_.write_at(0, head.data(), head.size());
        file_.sync();
        file_.publish();
        return {head_bytes_ + data_bytes_, get_u64(reinterpret_cast<const unsigned char *>(head.data()) + 24)};
    }
    const std::vector<SegmentRecord> &records() const { return records_; }

  private:
    nlohmann::json header_;
    std::vector<SegmentRecord> records_;
    std::uint64_t data_bytes_, head_bytes_;
    PositionalFile file_;
};

// Removes what a checkpoint in `dir` no longer references once `keep` are its files.
void remove_stale(const std::string &dir, const std::vector<std::string> &keep) {
    for (const auto &name : list_directory(dir)) {
        const bool ours = is_shard_file_name(name) || is_params_file_name(name) || name == kSafetensorsFile ||
                          name.find(".tmp.") != std::string::npos;
        if (ours && std::find(keep.begin(), keep.end(), name) == keep.end()) remove_file_quietly(join_path(dir, name));
    }
    fsync_directory(dir);
}

std::string real_path(const std::string &path) {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

void write_consolidated(const OpenCheckpoint &in, const std::string &dst, Manifest meta, bool keep_rank_states) {
    const LayoutInfo &layout = meta.layout;
    const std::size_t elem = elem_of(layout);
    const SegmentIndex &index = *in.index;
    meta.kind = "consolidated";
    meta.generation = new_generation();
    meta.files.clear();
    const std::string params_file = params_file_name(meta.generation);
    const std::string params_head = safetensors_head(
        layout, {{"producer", "shardopt"}, {"step_count", std::to_string(meta.step_count)}, {"generation", meta.generation}});
    // The parameters into their own file's data area, the state and the ranks' states into the container's.
    std::vector<SegmentRecord> records;
    std::uint64_t params_at = params_head.size(), data_bytes = 0;
    for (int k = -1; k < meta.state_slots; ++k)
        for_each_window(layout, [&](int t, std::uint64_t offset, std::uint64_t count) {
            SegmentRecord r{part_name(k), t, offset, count, 0, count * elem, 0, {}};
            if (k < 0) {
                r.file = params_file;
                r.data_offset = params_at;
                params_at += r.bytes;
            } else {
                r.data_offset = data_bytes;
                data_bytes += r.bytes;
            }
            records.push_back(std::move(r));
        });
    std::vector<int> ranks;
    if (keep_rank_states) ranks = rank_state_ranks(index);
    std::vector<std::vector<unsigned char>> states(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        index.read_rank_state(rank_state_part(ranks[i]), states[i]);
        records.push_back({rank_state_part(ranks[i]), 0, 0, states[i].size(), data_bytes, states[i].size(), 0, {}});
        data_bytes += states[i].size();
    }
    make_directories(dst);
    PositionalFile params(join_path(dst, params_file), meta.generation, PositionalFile::Mode::create, params_at);
    params.write_at(0, params_head.data(), params_head.size());
    ContainerWriter file(join_path(dst, kManifestFile), meta.generation, manifest_to_json(meta), records, data_bytes);
    std::vector<unsigned char> buffer;
    std::size_t i = 0;
    for (; i < records.size() && records[i].part.rfind(SegmentIndex::kRankStatePrefix, 0) != 0; ++i) {
        const SegmentRecord &r = file.records()[i];
        buffer.resize(std::size_t(r.bytes));
        index.read(r.part, r.tensor, r.offset, r.count, buffer.data());
        if (r.file.empty()) {
            file.put(i, buffer.data());
        } else { // a parameter: its checksum in the container, its bytes in the parameters' file
            file.checksum(i, buffer.data());
            params.write_at(r.data_offset, buffer.data(), buffer.size());
        }
    }
    for (std::size_t s = 0; i < records.size(); ++i, ++s) file.put(i, states[s].data());
    params.sync();
    params.publish();
    file.publish();
    link_safetensors(dst, params_file, meta.generation); // model.safetensors, for other tools
    remove_stale(dst, {params_file, kSafetensorsFile});
}

void write_sharded(const OpenCheckpoint &in, const std::string &dst, Manifest meta, int world, bool keep_rank_states) {
    const LayoutInfo &layout = meta.layout;
    const std::size_t elem = elem_of(layout);
    const SegmentIndex &index = *in.index;
    meta.kind = "sharded-manifest";
    meta.generation = new_generation();
    meta.world_size = world;
    meta.files.clear();
    make_directories(dst);
    const std::uint64_t per = std::max<std::uint64_t>(1, checkpoint_window_bytes() / elem);
    std::vector<std::string> keep;
    std::vector<unsigned char> buffer, state;
    for (int r = 0; r < world; ++r) {
        // Rank r's slice of every tensor, in pieces of at most a window.
        std::vector<SegmentRecord> records;
        std::uint64_t data_bytes = 0;
        for (int k = -1; k < meta.state_slots; ++k)
            for (int t = 0; t < int(layout.tensors.size()); ++t) {
                const std::uint64_t n = layout.tensors[std::size_t(t)].count;
                const std::uint64_t lo = n * std::uint64_t(r) / std::uint64_t(world),
                                    hi = n * std::uint64_t(r + 1) / std::uint64_t(world);
                for (std::uint64_t at = lo; at < hi; at += per) {
                    const std::uint64_t count = std::min(per, hi - at);
                    records.push_back({part_name(k), t, at, count, data_bytes, count * elem, 0, {}});
                    data_bytes += count * elem;
                }
            }
        const bool has_state = keep_rank_states && index.read_rank_state(rank_state_part(r), state);
        if (has_state) {
            records.push_back({rank_state_part(r), 0, 0, state.size(), data_bytes, state.size(), 0, {}});
            data_bytes += state.size();
        }
        const std::string name = shard_file_name(r, world, meta.generation);
        const nlohmann::json header = {{"format", kFormatName}, {"kind", "shard"},          {"rank", r},
                                       {"world_size", world},  {"generation", meta.generation},
                                       {"layout", layout_to_json(layout)}};
        ContainerWriter file(join_path(dst, name), meta.generation, header, records, data_bytes);
        for (std::size_t i = 0; i < records.size(); ++i) {
            const SegmentRecord &rec = records[i];
            if (has_state && i + 1 == records.size()) {
                file.put(i, state.data());
                continue;
            }
            buffer.resize(std::size_t(rec.bytes));
            index.read(rec.part, rec.tensor, rec.offset, rec.count, buffer.data());
            file.put(i, buffer.data());
        }
        const auto [bytes, header_xxh3] = file.publish();
        meta.files.push_back({name, r, bytes, header_xxh3});
        keep.push_back(name);
    }
    write_file_atomically(join_path(dst, kManifestFile),
                          [&](ByteSink &sink) { write_container(sink, manifest_to_json(meta), {}); });
    remove_stale(dst, keep);
}

} // namespace

nlohmann::json inspect_checkpoint(const std::string &path, bool verify) {
    const OpenCheckpoint in = open_checkpoint(path, nullptr, 0);
    const Manifest &m = in.meta;
    nlohmann::json out = {{"path", path},
                          {"form", m.kind == "consolidated" ? "consolidated" : "sharded"},
                          {"format_version", in.format_version},
                          {"generation", m.generation},
                          {"step_count", m.step_count},
                          {"world_size", m.world_size},
                          {"strategy", text_field(m.sharding, "strategy")},
                          {"optimizer", m.optimizer},
                          {"sharding", m.sharding},
                          {"state_slots", m.state_slots},
                          {"state_names", slot_names(m)},
                          {"layout", layout_to_json(m.layout)},
                          {"files", in.files}};
    std::uint64_t elements = 0;
    for (const auto &t : m.layout.tensors) elements += t.count;
    out["parameters"] = elements;
    out["bytes_per_part"] = elements * elem_of(m.layout);
    const std::vector<int> ranks = rank_state_ranks(*in.index);
    out["rank_states"] = ranks;
    if (!verify) return out;
    // Every element of every part, checksums checked on the way; each part's digest.
    nlohmann::json digests = nlohmann::json::object();
    std::vector<unsigned char> buffer;
    XXH3_state_t *state = XXH3_createState();
    if (!state) throw std::bad_alloc();
    try {
        for (int k = -1; k < m.state_slots; ++k) {
            XXH3_64bits_reset(state);
            for_each_window(m.layout, [&](int t, std::uint64_t offset, std::uint64_t count) {
                buffer.resize(std::size_t(count * elem_of(m.layout)));
                in.index->read(part_name(k), t, offset, count, buffer.data());
                XXH3_64bits_update(state, buffer.data(), buffer.size());
            });
            digests[part_name(k)] = hex64(XXH3_64bits_digest(state));
        }
        for (int r : ranks) {
            in.index->read_rank_state(rank_state_part(r), buffer);
            digests[rank_state_part(r)] = hex64(xxh3(buffer.data(), buffer.size()));
        }
    } catch (...) {
        XXH3_freeState(state);
        throw;
    }
    XXH3_freeState(state);
    out["digests"] = digests;
    out["verified"] = true;
    return out;
}

void convert_checkpoint(const std::string &src, const std::string &dst, const ConvertOptions &options) {
    require(!dst.empty(), ErrorCode::invalid_argument, "convert: empty destination");
    require(options.world_size >= 0 && options.world_size <= (1 << 24), ErrorCode::invalid_argument,
            "convert: world size " + std::to_string(options.world_size) + " is out of range");
    const OpenCheckpoint in = open_checkpoint(src, nullptr, 0);
    const std::string from_dir = real_path(in.base_dir.empty() ? src : in.base_dir);
    require(!is_directory(dst) || real_path(dst) != from_dir, ErrorCode::invalid_argument,
            "convert: the destination is the source's directory; write elsewhere");
    const int world = options.world_size > 0 ? options.world_size : in.meta.world_size;
    const bool keep_rank_states = world == in.meta.world_size;
    Manifest meta = in.meta;
    meta.world_size = world;
    if (options.consolidated) write_consolidated(in, dst, meta, keep_rank_states);
    else write_sharded(in, dst, meta, world, keep_rank_states);
}

void export_checkpoint(const std::string &src, const std::string &params_path, const std::string &state_path) {
    require(!params_path.empty(), ErrorCode::invalid_argument, "export: empty parameters path");
    const OpenCheckpoint in = open_checkpoint(src, nullptr, 0);
    const Manifest &m = in.meta;
    const std::size_t elem = elem_of(m.layout);
    const std::map<std::string, std::string> metadata = {{"producer", "shardopt"},
                                                         {"step_count", std::to_string(m.step_count)},
                                                         {"optimizer", text_field(m.optimizer, "kind_name")}};
    std::vector<unsigned char> buffer;
    // One safetensors file of `layout`'s tensors, part k's elements of tensor t for its tensor i.
    auto write = [&](const std::string &path, const LayoutInfo &layout, const std::vector<std::pair<int, int>> &from) {
        const std::string head = safetensors_head(layout, metadata);
        std::uint64_t bytes = 0;
        for (const auto &t : layout.tensors) bytes += t.count * elem;
        const auto slash = path.find_last_of('/');
        if (slash != std::string::npos && slash > 0) make_directories(path.substr(0, slash));
        PositionalFile file(path, new_generation(), PositionalFile::Mode::create, head.size() + bytes);
        file.write_at(0, head.data(), head.size());
        std::uint64_t at = head.size();
        const std::uint64_t per = std::max<std::uint64_t>(1, checkpoint_window_bytes() / elem);
        for (std::size_t i = 0; i < layout.tensors.size(); ++i)
            for (std::uint64_t o = 0; o < layout.tensors[i].count; o += per) {
                const std::uint64_t count = std::min(per, layout.tensors[i].count - o);
                buffer.resize(std::size_t(count * elem));
                in.index->read(part_name(from[i].first), from[i].second, o, count, buffer.data());
                file.write_at(at, buffer.data(), buffer.size());
                at += buffer.size();
            }
        file.sync();
        file.publish();
    };
    std::vector<std::pair<int, int>> from;
    for (int t = 0; t < int(m.layout.tensors.size()); ++t) from.push_back({-1, t});
    write(params_path, m.layout, from);
    if (state_path.empty()) return;
    require(m.state_slots > 0, ErrorCode::invalid_argument,
            "export: this checkpoint's optimizer keeps no state (" + text_field(m.optimizer, "kind_name") + ")");
    const std::vector<std::string> names = slot_names(m);
    LayoutInfo state_layout;
    state_layout.dtype = m.layout.dtype;
    from.clear();
    for (int t = 0; t < int(m.layout.tensors.size()); ++t)
        for (int k = 0; k < m.state_slots; ++k) {
            state_layout.tensors.push_back({m.layout.tensors[std::size_t(t)].name + "." + names[std::size_t(k)],
                                            m.layout.tensors[std::size_t(t)].count});
            from.push_back({k, t});
        }
    write(state_path, state_layout, from);
}

SerializedCheckpoint describe_serialized(const void *bytes, std::size_t size) {
    require(bytes && size, ErrorCode::invalid_argument, "a serialized checkpoint: no bytes");
    const OpenCheckpoint in = open_checkpoint("", bytes, size);
    SerializedCheckpoint out;
    out.meta = in.meta;
    out.torch = torch_state(in.meta);
    for (const auto &t : in.meta.layout.tensors) out.element_count += t.count;
    return out;
}

void read_serialized_part(const void *bytes, std::size_t size, int slot, void *out, std::uint64_t count) {
    require(bytes && size, ErrorCode::invalid_argument, "a serialized checkpoint: no bytes");
    const OpenCheckpoint in = open_checkpoint("", bytes, size);
    const Manifest &m = in.meta;
    require(slot >= -1 && slot < m.state_slots, ErrorCode::invalid_argument,
            "slot " + std::to_string(slot) + " outside -1 (parameters) .. " + std::to_string(m.state_slots - 1) +
                " (this checkpoint's " + text_field(m.optimizer, "kind_name") + " keeps " +
                std::to_string(m.state_slots) + " state slots)");
    std::uint64_t total = 0;
    for (const auto &t : m.layout.tensors) total += t.count;
    require(count == total, ErrorCode::invalid_argument,
            "the buffer holds " + std::to_string(count) + " elements; the checkpoint's part has " +
                std::to_string(total));
    auto *at = static_cast<unsigned char *>(out);
    for_each_window(m.layout, [&](int t, std::uint64_t offset, std::uint64_t n) {
        in.index->read(part_name(slot), t, offset, n, at);
        at += n * elem_of(m.layout);
    });
}

} // namespace shardopt::checkpoint
