// libFuzzer harness for the checkpoint reader: any bytes given to deserialize (or found in a
// checkpoint file) must be refused with shardopt::Error or read correctly, never crash, hang
// or allocate beyond the input's size.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/byte_io.hpp"
#include "checkpoint/container_format.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/resharding.hpp"
#include "shardopt/error.hpp"

using namespace shardopt;
using namespace shardopt::checkpoint;

namespace {

void read_everything(const std::uint8_t *data, std::size_t size) {
    try {
        auto source = std::make_shared<MemorySource>(size ? data : reinterpret_cast<const std::uint8_t *>(""), size);
        auto container = std::make_shared<Container>(read_container(*source));
        LayoutInfo layout;
        int slots = 0;
        const auto kind = container->header.find("kind");
        if (kind != container->header.end() && *kind == "shard") {
            const auto l = container->header.find("layout");
            if (l == container->header.end()) return;
            layout = layout_from_json(*l, source->name());
            slots = 4;
        } else {
            const Manifest m = manifest_from_json(container->header, source->name());
            layout = m.layout;
            slots = m.state_slots;
            check_same_layout(m.layout, m.layout);
        }
        SegmentIndex index(layout);
        index.add(source, container);
        // What a loader would read: every tensor's parts, as far as they fit the input (a real
        // load sizes its buffers from the model, not from the file).
        const std::size_t elem = dtype_size(layout.dtype);
        for (std::size_t t = 0; t < layout.tensors.size(); ++t) {
            const std::uint64_t n = layout.tensors[t].count;
            if (n == 0 || n > size / elem) continue;
            std::vector<unsigned char> buf(n * elem);
            for (int k = -1; k < slots; ++k) {
                try {
                    index.read(k < 0 ? "param" : "state." + std::to_string(k), int(t), 0, n, buf.data());
                } catch (const Error &) {
                }
            }
        }
    } catch (const Error &) {
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    read_everything(data, size);
    // Mutations almost never keep the header checksum valid, which would hide the JSON
    // validation behind it: also try the input with its header checksum repaired.
    if (size >= kPreambleBytes) {
        const std::uint64_t header_len = get_u64(data + 16);
        if (header_len <= size - kPreambleBytes) {
            std::vector<std::uint8_t> fixed(data, data + size);
            put_u64(fixed.data() + 24, xxh3(fixed.data() + kPreambleBytes, std::size_t(header_len)));
            read_everything(fixed.data(), fixed.size());
        }
    }
    return 0;
}
