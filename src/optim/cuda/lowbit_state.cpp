#include "lowbit_state.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "../lowbit.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_upload.hpp"
#include "lowbit_books.hpp"
#include "shardopt/error.hpp"

namespace shardopt::cuda::detail {
namespace {

std::size_t aligned(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

} // namespace

LowbitState::LowbitState(StatePrecision precision, int slots, const std::vector<std::size_t> &counts,
                         const std::vector<TensorSlice> &slices)
    : precision_(precision), slots_(slots), counts_(counts), slices_(slices), index_(counts.size(), -1) {
    require(slices_.size() == counts_.size(), ErrorCode::invalid_argument,
            std::to_string(slices_.size()) + " slices for " + std::to_string(counts_.size()) + " tensors");
    const std::size_t block = lowbit::block_elements(precision);
    for (std::size_t t = 0; t < counts.size(); ++t) {
        TensorSlice &s = slices_[t];
        if (s.tensor_count == 0) s.tensor_count = counts[t];
        require(s.offset + counts[t] <= s.tensor_count, ErrorCode::invalid_argument,
                "slice " + std::to_string(t) + " ends past its tensor");
        if (counts[t] == 0 || !lowbit::quantizes(precision, s.tensor_count)) continue;
        index_[t] = int(entries_.size());
        LowbitEntry entry;
        entry.tensor = int32_t(t);
        entry.first = int64_t(s.offset % block);
        entry.end = entry.first + int64_t(counts[t]);
        entry.shared[0] = s.shared_first ? 1 : 0;
        entry.shared[1] = s.shared_last ? 1 : 0;
        entries_.push_back(entry);
        // Groups of kLowbitGroup code indices from code 0 (whole quantization blocks each).
        const std::size_t row = entries_.size() - 1;
        const std::size_t last_group = std::size_t(entry.end - 1) / kLowbitGroup;
        for (std::size_t g = 0; g <= last_group; ++g) {
            Chunk group;
            group.tensor = int32_t(row);
            group.offset = int64_t(g * kLowbitGroup);
            group.count = int32_t(std::min<int64_t>(kLowbitGroup, entry.end - group.offset));
            groups_.push_back(group);
            if ((entry.shared[0] && g == 0) || (entry.shared[1] && g == last_group)) maxima_groups_.push_back(group);
        }
    }
    require(groups_.size() <= std::size_t(std::numeric_limits<int32_t>::max()), ErrorCode::invalid_argument,
            "the quantized tensors need " + std::to_string(groups_.size()) + " blocks of " +
                std::to_string(kLowbitGroup) + " elements, more than one launch can cover");
}

int LowbitState::bits() const noexcept { return lowbit::code_bits(precision_); }

void LowbitState::create(cudaStream_t stream) {
    if (entries_.empty()) return;
    std::size_t total = 0;
    std::vector<std::size_t> at;
    for (const LowbitEntry &entry : entries_) {
        const TensorSlice &s = slices_[std::size_t(entry.tensor)];
        const std::size_t count = counts_[std::size_t(entry.tensor)];
        for (int k = 0; k < slots_; ++k) {
            at.push_back(total);
            total += aligned(lowbit::code_bytes(precision_, s.offset, count));
            at.push_back(total);
            total += aligned(lowbit::blocks_touched(precision_, s.offset, count) * sizeof(float));
        }
    }
    arrays_ = DeviceBuffer(total, "low-bit optimizer state");
    if (!maxima_groups_.empty())
        tops_ = DeviceBuffer(counts_.size() * kTopsPerTensor * sizeof(float), "shared low-bit blocks' maxima");
    std::size_t next = 0;
    for (LowbitEntry &entry : entries_) {
        for (int k = 0; k < slots_; ++k) {
            entry.codes[k] = arrays_.as<std::uint8_t>() + at[next++];
            entry.scales[k] = reinterpret_cast<float *>(arrays_.as<char>() + at[next++]);
        }
        if (entry.shared[0] || entry.shared[1])
            entry.tops = tops_.as<float>() + std::size_t(entry.tensor) * kTopsPerTensor;
    }
    table_ = upload(entries_, "low-bit tensor table", stream);
    group_table_ = upload(groups_, "low-bit group table", stream);
    if (!maxima_groups_.empty()) maxima_table_ = upload(maxima_groups_, "low-bit shared-block group table", stream);
    books_ = upload(std::vector<LowbitBooks>{make_lowbit_books()}, "low-bit codebooks", stream);
    // State 0: every code and scale 0, as the host space starts it (decodes to 0).
    check(cudaMemsetAsync(arrays_.get(), 0, arrays_.bytes(), stream), "zeroing the low-bit optimizer state");
    if (tops_.bytes() > 0) check(cudaMemsetAsync(tops_.get(), 0, tops_.bytes(), stream), "zeroing the maxima");
}

void LowbitState::release() noexcept {
    for (DeviceBuffer *buffer : {&arrays_, &tops_, &table_, &group_table_, &maxima_table_, &books_})
        *buffer = DeviceBuffer();
}

LowbitLaunch LowbitState::launch(const TensorEntry *tensors, const StepScalars *scalars, uint32_t flags, DType dtype,
                                 cudaStream_t stream, bool maxima) const {
    LowbitLaunch low;
    low.tensors = tensors;
    low.entries = table_.as<LowbitEntry>();
    low.groups = (maxima ? maxima_table_ : group_table_).as<Chunk>();
    low.group_count = int((maxima ? maxima_groups_ : groups_).size());
    low.books = books_.as<LowbitBooks>();
    low.scalars = scalars;
    low.flags = flags | (maxima ? uint32_t(kLowbitMaxima) : 0u);
    low.dtype = dtype;
    low.bits = bits();
    low.stream = stream;
    return low;
}

void LowbitState::read_tops(float *host, const Copy &copy) const {
    copy(host, tops_.get(), tops_.bytes(), cudaMemcpyDeviceToHost, "reading the shared low-bit blocks' maxima");
}

void LowbitState::write_tops(const float *host, const Copy &copy) const {
    copy(tops_.get(), host, tops_.bytes(), cudaMemcpyHostToDevice, "writing the shared low-bit blocks' maxima");
}

void LowbitState::read(std::size_t t, int slot, float *host, const Copy &copy) const {
    const LowbitEntry &entry = entries_[std::size_t(index_[t])];
    const TensorSlice &s = slices_[t];
    std::vector<std::uint8_t> codes(lowbit::code_bytes(precision_, s.offset, counts_[t]));
    std::vector<float> scales(lowbit::blocks_touched(precision_, s.offset, counts_[t]));
    copy(codes.data(), entry.codes[slot], codes.size(), cudaMemcpyDeviceToHost, "reading low-bit codes");
    copy(scales.data(), entry.scales[slot], scales.size() * sizeof(float), cudaMemcpyDeviceToHost,
         "reading low-bit scales");
    lowbit::decode_slice(LowBitArray{codes.data(), scales.data()}, precision_, slot == 0, s.offset, counts_[t], host);
}

// Each block's scale its largest |value| (with the other parts' where shared), each value its
// nearest code (lowbit.hpp). A 4-bit nibble no element of the slice owns is left 0: nothing reads it.
void LowbitState::write(std::size_t t, int slot, const float *host, double first_top, double last_top,
                        const Copy &copy) const {
    const LowbitEntry &entry = entries_[std::size_t(index_[t])];
    const TensorSlice &s = slices_[t];
    std::vector<std::uint8_t> codes(lowbit::code_bytes(precision_, s.offset, counts_[t]), 0);
    std::vector<float> scales(lowbit::blocks_touched(precision_, s.offset, counts_[t]), 0.0f);
    lowbit::encode_slice(LowBitArray{codes.data(), scales.data()}, precision_, slot == 0, s.offset, counts_[t], host,
                         first_top, last_top);
    copy(entry.codes[slot], codes.data(), codes.size(), cudaMemcpyHostToDevice, "writing low-bit codes");
    copy(entry.scales[slot], scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice,
         "writing low-bit scales");
}

} // namespace shardopt::cuda::detail
