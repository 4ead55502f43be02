#include "gpu_support.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "shardopt/half.hpp"

namespace gpu_test {

void cuda_ok(cudaError_t status, const char *what) {
    BOOST_REQUIRE_MESSAGE(status == cudaSuccess,
                          what << " failed: " << cudaGetErrorName(status) << ": " << cudaGetErrorString(status));
}

DeviceMemory::DeviceMemory(std::size_t bytes) { cuda_ok(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 16)), "cudaMalloc"); }
DeviceMemory::~DeviceMemory() { (void)cudaFree(ptr_); }

// --- page-locked host memory -------------------------------------------------------------

namespace {

struct PinnedCache {
    std::mutex mutex;
    std::multimap<std::size_t, void *> free; // capacity -> block
};

// Never destroyed: freeing page-locked memory in static destruction could run after the CUDA
// runtime has shut down; the process's exit returns it.
PinnedCache &pinned_cache() {
    static PinnedCache *cache = new PinnedCache;
    return *cache;
}

} // namespace

PinnedMemory::PinnedMemory(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 64);
    {
        PinnedCache &cache = pinned_cache();
        std::lock_guard<std::mutex> lock(cache.mutex);
        const auto it = cache.free.lower_bound(bytes);
        if (it != cache.free.end() && it->first / 2 <= bytes) { // the smallest that fits, if not far too big
            capacity_ = it->first;
            ptr_ = it->second;
            cache.free.erase(it);
            return;
        }
    }
    cuda_ok(cudaMallocHost(&ptr_, bytes), "cudaMallocHost");
    capacity_ = bytes;
}

PinnedMemory::~PinnedMemory() { release(); }

PinnedMemory::PinnedMemory(PinnedMemory &&other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

PinnedMemory &PinnedMemory::operator=(PinnedMemory &&other) noexcept {
    if (this != &other) {
        release();
        ptr_ = std::exchange(other.ptr_, nullptr);
        capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
}

void PinnedMemory::release() noexcept {
    if (ptr_ == nullptr) return;
    PinnedCache &cache = pinned_cache();
    try {
        std::lock_guard<std::mutex> lock(cache.mutex);
        cache.free.emplace(capacity_, ptr_);
    } catch (...) { // no memory for the cache entry: give the block back instead
        (void)cudaFreeHost(ptr_);
    }
    ptr_ = nullptr;
    capacity_ = 0;
}

// --- threads -------------------------------------------------------------------------------

namespace {

// One thread per hardware thread (the caller is one of them), started on first use, idle on a
// condition variable between runs. Tasks are handed out by an atomic counter.
class Workers {
  public:
    static Workers &instance() {
        static Workers workers;
        return workers;
    }

    void run(std::size_t tasks, const std::function<void(std::size_t)> &fn) {
        if (tasks == 0) return;
        if (threads_.empty() || tasks == 1) {
            for (std::size_t i = 0; i < tasks; ++i) fn(i);
            return;
        }
        std::lock_guard<std::mutex> one_run(run_mutex_);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = &fn;
            tasks_ = tasks;
            next_.store(0, std::memory_order_relaxed);
            error_ = nullptr;
            active_ = threads_.size();
            ++generation_;
        }
        wake_.notify_all();
        work();
        std::exception_ptr error;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            done_.wait(lock, [&] { return active_ == 0; });
            job_ = nullptr;
            error = std::exchange(error_, nullptr);
        }
        if (error) std::rethrow_exception(error);
    }

  private:
    Workers() {
        const unsigned hardware = std::thread::hardware_concurrency();
        const unsigned threads = std::min(std::max(hardware, 1u), 64u);
        for (unsigned i = 1; i < threads; ++i) threads_.emplace_back([this] { loop(); });
    }

    ~Workers() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        for (std::thread &thread : threads_) thread.join();
    }

    void work() {
        for (;;) {
            const std::size_t task = next_.fetch_add(1, std::memory_order_relaxed);
            if (task >= tasks_) return;
            try {
                (*job_)(task);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex_);
                if (!error_) error_ = std::current_exception();
            }
        }
    }

    void loop() {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            lock.unlock();
            work();
            lock.lock();
            if (--active_ == 0) done_.notify_one();
        }
    }

    std::vector<std::thread> threads_;
    std::mutex run_mutex_; // one run at a time
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::size_t active_ = 0; // helper threads still in the current run
    const std::function<void(std::size_t)> *job_ = nullptr;
    std::size_t tasks_ = 0;
    std::atomic<std::size_t> next_{0};
    std::exception_ptr error_;
};

// Element-wise passes go over the flat arrays in blocks of this many elements, one task each.
constexpr std::size_t kBlock = std::size_t(1) << 14;

std::size_t block_count(std::size_t n) { return (n + kBlock - 1) / kBlock; }

// Runs fn(begin, end) for every block of [0, n), over the threads.
template <class Fn> void for_blocks(std::size_t n, Fn &&fn) {
    parallel_for(block_count(n), [&](std::size_t b) { fn(b * kBlock, std::min(n, (b + 1) * kBlock)); });
}

} // namespace

void parallel_for(std::size_t tasks, const std::function<void(std::size_t)> &fn) { Workers::instance().run(tasks, fn); }

// --- normal values -------------------------------------------------------------------------

namespace {

uint64_t mix64(uint64_t z) { // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

constexpr int kNormalBits = 16;
constexpr std::size_t kNormalPoints = (std::size_t(1) << kNormalBits) + 1;

// The standard normal quantiles at p = (i + 0.5) / kNormalPoints, by Newton's method on the
// CDF from the previous one (the CDF is convex left of 0 and concave right of it, so each
// search approaches its root from one side).
const float *normal_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(kNormalPoints);
        const double sqrt2 = std::sqrt(2.0), sqrt2pi = 2.5066282746310002;
        double x = -4.0;
        for (std::size_t i = 0; i < kNormalPoints; ++i) {
            const double p = (double(i) + 0.5) / double(kNormalPoints);
            for (int iteration = 0; iteration < 100; ++iteration) {
                const double cdf = 0.5 * std::erfc(-x / sqrt2);
                const double pdf = std::exp(-0.5 * x * x) / sqrt2pi;
                const double next = x - (cdf - p) / pdf;
                const bool converged = std::fabs(next - x) < 1e-12;
                x = next;
                if (converged) break;
            }
            t[i] = float(x);
        }
        return t;
    }();
    return table.data();
}

// Value `index` of stream `key`: a 64-bit hash picks a quantile interval (top 16 bits) and a
// point within it (the next 24).
inline float normal_at(const float *table, uint64_t key, uint64_t index) {
    const uint64_t h = mix64(key + index * 0x9e3779b97f4a7c15ull);
    const std::size_t i = std::size_t(h >> (64 - kNormalBits));
    const float f = float(uint32_t(h >> (64 - kNormalBits - 24)) & 0xffffffu) * 0x1p-24f;
    const float a = table[i], b = table[i + 1];
    return a + f * (b - a);
}

} // namespace

float standard_normal(uint64_t key, uint64_t index) { return normal_at(normal_table(), key, index); }

uint64_t stream_key(uint64_t seed, uint64_t stream) {
    return mix64(mix64(seed ^ 0x5851f42d4c957f2dull) + (stream + 1) * 0xd1b54a32d192ed03ull);
}

// --- ulp distances and storage bits ----------------------------------------------------------

namespace {

// Integers in the order of the floats they encode (-0 and +0 both 0).
inline int64_t ordered_bits(uint32_t u) {
    int32_t i;
    std::memcpy(&i, &u, 4);
    return i >= 0 ? int64_t(i) : int64_t(std::numeric_limits<int32_t>::min()) - int64_t(i);
}

inline bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// ulp_distance on the bit patterns.
inline int64_t ulp_bits(uint32_t a, uint32_t b) {
    if (a == b) return 0;
    if (is_nan_bits(a) || is_nan_bits(b))
        return is_nan_bits(a) && is_nan_bits(b) ? 0 : std::numeric_limits<int64_t>::max();
    return std::abs(ordered_bits(a) - ordered_bits(b));
}

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline uint32_t bits_at(const float *p, std::size_t i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    return u;
}

int64_t ordered_16(uint16_t h) { return (h & 0x8000u) ? -int64_t(h & 0x7fffu) : int64_t(h); }

bool is_nan_16(uint16_t h, bool bf16) {
    return bf16 ? (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0 : (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

// The storage types, as compile-time tags (no switch per element).
template <DType D> using Storage = std::integral_constant<DType, D>;

template <class F> void with_storage(DType dtype, F &&f) {
    switch (dtype) {
    case DType::bf16: f(Storage<DType::bf16>{}); break;
    case DType::f16: f(Storage<DType::f16>{}); break;
    default: f(Storage<DType::f32>{}); break;
    }
}

template <DType D> inline uint32_t encode(float value) {
    if constexpr (D == DType::bf16) return bf16::from_float(value);
    else if constexpr (D == DType::f16) return f16::from_float(value);
    else return float_bits(value);
}

template <DType D> inline float decode(uint32_t bits) {
    if constexpr (D == DType::bf16) return shardopt::detail::bits_float(bits << 16);
    else if constexpr (D == DType::f16) return shardopt::detail::bits_float(f16::to_float_bits(uint16_t(bits)));
    else return shardopt::detail::bits_float(bits);
}

// Element i of a flat buffer of the storage type.
template <DType D> inline void put(char *bytes, std::size_t i, uint32_t bits) {
    if constexpr (D == DType::f32) std::memcpy(bytes + i * 4, &bits, 4);
    else {
        const uint16_t half = uint16_t(bits);
        std::memcpy(bytes + i * 2, &half, 2);
    }
}

inline uint16_t get_16(const char *bytes, std::size_t i) {
    uint16_t half;
    std::memcpy(&half, bytes + i * 2, 2);
    return half;
}

int64_t ulp_16(uint16_t a, uint16_t b, bool bf16);

// Gradients [begin, end) of stream `key`: normal * stddev * loss_scale, stored in the dtype at
// `upload` and, as the dtype rounded them, as floats at `grads`.
template <DType D>
void make_normals(const float *table, uint64_t key, float stddev, float loss_scale, std::size_t begin,
                  std::size_t end, char *upload, float *grads) {
    for (std::size_t i = begin; i < end; ++i) {
        const float value = normal_at(table, key, i) * stddev * loss_scale;
        const uint32_t bits = encode<D>(value);
        put<D>(upload, i, bits);
        grads[i] = decode<D>(bits);
    }
}

// The largest ulp distance between a[i] and b[i] over [begin, end). Runs of bitwise-equal
// elements (nearly all of them: the kernels round as the CPU rules do) are passed over 64 at a
// time by a loop the compiler vectorizes; only a run with a difference is measured element by
// element.
int64_t max_distance(const float *a, const float *b, std::size_t begin, std::size_t end) {
    constexpr std::size_t kRun = 64;
    int64_t worst = 0;
    for (std::size_t run = begin; run < end; run += kRun) {
        const std::size_t stop = std::min(end, run + kRun);
        uint32_t differ = 0;
        for (std::size_t i = run; i < stop; ++i) differ |= bits_at(a, i) ^ bits_at(b, i);
        if (differ == 0) continue;
        for (std::size_t i = run; i < stop; ++i) {
            const uint32_t x = bits_at(a, i), y = bits_at(b, i);
            if (x != y) worst = std::max(worst, ulp_bits(x, y));
        }
    }
    return worst;
}

// The same for bf16/f16 parameters (device, as stored) against the reference's master
// weights rounded to the dtype.
template <DType D>
int64_t max_param_distance(const char *device, const float *reference_master, std::size_t begin, std::size_t end) {
    int64_t worst = 0;
    for (std::size_t i = begin; i < end; ++i) {
        const uint16_t a = get_16(device, i), b = uint16_t(encode<D>(reference_master[i]));
        if (a != b) worst = std::max(worst, ulp_16(a, b, D == DType::bf16));
    }
    return worst;
}

int64_t ulp_16(uint16_t a, uint16_t b, bool bf16) {
    if (a == b) return 0;
    if (is_nan_16(a, bf16) || is_nan_16(b, bf16))
        return is_nan_16(a, bf16) && is_nan_16(b, bf16) ? 0 : std::numeric_limits<int64_t>::max();
    return std::abs(ordered_16(a) - ordered_16(b));
}

} // namespace

int64_t ulp_distance(float a, float b) { return ulp_bits(float_bits(a), float_bits(b)); }

int64_t ulp_distance_16(uint16_t a, uint16_t b, bool bf16) { return ulp_16(a, b, bf16); }

uint32_t to_bits(float value, DType dtype) {
    switch (dtype) {
    case DType::bf16: return encode<DType::bf16>(value);
    case DType::f16: return encode<DType::f16>(value);
    default: return encode<DType::f32>(value);
    }
}

float from_bits(uint32_t bits, DType dtype) {
    switch (dtype) {
    case DType::bf16: return decode<DType::bf16>(bits);
    case DType::f16: return decode<DType::f16>(bits);
    default: return decode<DType::f32>(bits);
    }
}

// --- Lockstep ------------------------------------------------------------------------------

Lockstep::Lockstep(const cuda::DeviceOptimizerOptions &options, const Layout &layout, uint32_t seed)
    : options_(options), layout_(layout), seed_(seed), elem_(dtype_size(options.dtype)) {
    for (std::size_t size : layout.sizes) {
        offsets_.push_back(elements_);
        elements_ += size;
    }
    param_total_ = layout.param_shift + elements_;
    grad_total_ = layout.grad_shift + elements_;
    params_ = std::make_unique<DeviceMemory>(param_total_ * elem_);
    grads_device_ = std::make_unique<DeviceMemory>(grad_total_ * elem_);
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");

    // The initial parameters: standard normal values (stream 0 of the seed), zeros before them.
    previous_.params = PinnedMemory(param_total_ * elem_);
    current_.params = PinnedMemory(param_total_ * elem_);
    {
        char *bytes = previous_.params.get();
        std::memset(bytes, 0, layout.param_shift * elem_);
        char *values = bytes + layout.param_shift * elem_;
        const float *table = normal_table();
        const uint64_t key = stream_key(seed_, 0);
        with_storage(options.dtype, [&](auto storage) {
            constexpr DType D = decltype(storage)::value;
            for_blocks(elements_, [&](std::size_t begin, std::size_t end) {
                for (std::size_t i = begin; i < end; ++i) put<D>(values, i, encode<D>(normal_at(table, key, i)));
            });
        });
    }
    cuda_ok(cudaMemcpyAsync(params_->get(), previous_.params.get(), param_total_ * elem_, cudaMemcpyHostToDevice,
                            stream_),
            "uploading parameters");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");

    std::vector<cuda::DeviceTensor> tensors;
    for (std::size_t t = 0; t < layout.sizes.size(); ++t)
        tensors.push_back({params_->get() + (layout.param_shift + offsets_[t]) * elem_, layout.sizes[t]});
    optimizer_ = cuda::DeviceOptimizer::create(tensors, options, stream_);
    reference_ = Optimizer::create(options.optimizer);
    slots_ = optimizer_->state_slots();
    BOOST_REQUIRE(slots_ == reference_->state_slots() && slots_ <= Segment<float>::kMaxStateSlots);
    for (HostValues *values : {&previous_, &current_}) {
        if (options.dtype != DType::f32) values->master = PinnedMemory(elements_ * sizeof(float));
        values->state = PinnedMemory(std::size_t(slots_) * elements_ * sizeof(float));
    }
    read_device(previous_);

    grad_upload_ = PinnedMemory(grad_total_ * elem_);
    std::memset(grad_upload_.get(), 0, grad_total_ * elem_); // the elements before the gradients stay 0
    grads_.assign(elements_, 0.0f);
    scaled_.assign(elements_, 0.0f);
    stats_.assign(std::size_t(reference_->tensor_stats()) * layout.sizes.size(), 0.0);
}

Lockstep::~Lockstep() {
    optimizer_.reset();
    (void)cudaStreamDestroy(stream_);
}

float *Lockstep::master_of(const HostValues &values) const {
    if (options_.dtype == DType::f32) return values.params.as<float>() + layout_.param_shift;
    return values.master.as<float>();
}

float *Lockstep::state_of(const HostValues &values, int slot) const {
    return values.state.as<float>() + std::size_t(slot) * elements_;
}

std::vector<const void *> Lockstep::grad_pointers() const {
    std::vector<const void *> pointers;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t)
        pointers.push_back(grads_device_->get() + (layout_.grad_shift + offsets_[t]) * elem_);
    return pointers;
}

void Lockstep::set_lr(double lr) {
    optimizer_->set_lr(lr);
    reference_->set_lr(lr);
}

// The parameter buffer in one copy; master weights (bf16/f16) and state one tensor and slot at
// a time, as DeviceOptimizer offers them, straight into the page-locked arrays. For f32 the
// master weights are the parameters (DeviceOptimizer's read_master copies the same memory).
void Lockstep::read_device(HostValues &values) {
    cuda_ok(cudaMemcpyAsync(values.params.get(), params_->get(), param_total_ * elem_, cudaMemcpyDeviceToHost,
                            stream_),
            "reading parameters");
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    const bool mixed = options_.dtype != DType::f32;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t) {
        if (layout_.sizes[t] == 0) continue;
        if (mixed) optimizer_->read_master(int(t), master_of(values) + offsets_[t]);
        for (int k = 0; k < slots_; ++k) optimizer_->read_state(int(t), k, state_of(values, k) + offsets_[t]);
    }
}

void Lockstep::make_grads(const GradSpec &spec, float loss_scale) {
    cuda_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); // the last upload is done with the buffer
    const float *table = normal_table();
    const uint64_t key = stream_key(seed_, ++steps_made_);
    const float stddev = spec.stddev;
    char *upload = grad_upload_.get() + layout_.grad_shift * elem_;
    float *grads = grads_.data();
    with_storage(options_.dtype, [&](auto storage) {
        constexpr DType D = decltype(storage)::value;
        for_blocks(elements_, [&](std::size_t begin, std::size_t end) {
            make_normals<D>(table, key, stddev, loss_scale, begin, end, upload, grads); // of the scaled loss
        });
        if (spec.poison && spec.poison_tensor < layout_.sizes.size() &&
            spec.poison_index < layout_.sizes[spec.poison_tensor]) {
            const std::size_t i = offsets_[spec.poison_tensor] + spec.poison_index;
            const uint32_t bits = encode<D>(spec.poison_value);
            put<D>(upload, i, bits);
            grads[i] = decode<D>(bits);
        }
    });
}

// The CPU reference steps the previous values in place (they are not needed afterwards) with
// the device's gradient scale: grad * (1 / loss_scale * clip), one float multiply, as the
// kernels do. Element-wise rules are cut into blocks over the threads (every element gets the
// same arithmetic whatever the cut); LAMB's phase 1 sums whole tensors, one task per tensor,
// each in the order of a single-threaded update, before its element-wise phase 2.
void Lockstep::reference_step(int64_t step, float grad_scale) {
    const float *grads = grads_.data();
    float *scaled = scaled_.data();
    for_blocks(elements_, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) scaled[i] = grads[i] * grad_scale;
    });

    float *master = master_of(previous_);
    std::vector<Segment<float>> segments, pieces;
    for (std::size_t t = 0; t < layout_.sizes.size(); ++t) {
        if (layout_.sizes[t] == 0) continue;
        Segment<float> seg;
        seg.param = master + offsets_[t];
        seg.grad = scaled + offsets_[t];
        for (int k = 0; k < slots_; ++k) seg.state[k] = state_of(previous_, k) + offsets_[t];
        seg.count = layout_.sizes[t];
        seg.tensor = int(t);
        seg.stats[0] = t * std::size_t(reference_->tensor_stats());
        segments.push_back(seg);
        for (std::size_t offset = 0; offset < seg.count; offset += kBlock) {
            Segment<float> piece = seg;
            piece.param += offset;
            piece.grad += offset;
            for (int k = 0; k < slots_; ++k) piece.state[k] += offset;
            piece.count = std::min(kBlock, seg.count - offset);
            pieces.push_back(piece);
        }
    }
    const Optimizer &rule = *reference_;
    double *stats = nullptr;
    if (rule.tensor_stats() > 0) {
        std::fill(stats_.begin(), stats_.end(), 0.0);
        stats = stats_.data();
        parallel_for(segments.size(), [&](std::size_t s) { rule.begin_step(segments[s], step, stats); });
    }
    parallel_for(pieces.size(), [&](std::size_t p) { rule.apply(pieces[p], step, stats); });
}

// Every element of the master weights, every state slot and (bf16/f16) the parameters: the
// device's values just read against the reference's, the largest distance of each.
void Lockstep::compare(StepCheck &check) const {
    std::vector<std::array<int64_t, 3>> found(block_count(elements_), std::array<int64_t, 3>{0, 0, 0});
    const float *device_master = master_of(current_), *reference_master = master_of(previous_);
    std::vector<const float *> device_state, reference_state;
    for (int k = 0; k < slots_; ++k) {
        device_state.push_back(state_of(current_, k));
        reference_state.push_back(state_of(previous_, k));
    }
    const char *device_params = current_.params.get() + layout_.param_shift * elem_;
    with_storage(options_.dtype, [&](auto storage) {
        constexpr DType D = decltype(storage)::value;
        for_blocks(elements_, [&](std::size_t begin, std::size_t end) {
            std::array<int64_t, 3> &block = found[begin / kBlock];
            block[0] = max_distance(device_master, reference_master, begin, end);
            for (int k = 0; k < slots_; ++k)
                block[1] = std::max(block[1], max_distance(device_state[std::size_t(k)],
                                                           reference_state[std::size_t(k)], begin, end));
            if constexpr (D != DType::f32)
                block[2] = max_param_distance<D>(device_params, reference_master, begin, end);
        });
    });
    for (const auto &block : found) {
        check.master_ulp = std::max(check.master_ulp, block[0]);
        check.state_ulp = std::max(check.state_ulp, block[1]);
        check.param_ulp = std::max(check.param_ulp, block[2]);
    }
}

StepCheck Lockstep::step(const GradSpec &spec) {
    const cuda::StepInfo before = optimizer_->step_info();
    make_grads(spec, before.loss_scale);
    cuda_ok(cudaMemcpyAsync(grads_device_->get(), grad_upload_.get(), grad_total_ * elem_, cudaMemcpyHostToDevice,
                            stream_),
            "uploading gradients");
    optimizer_->step(grad_pointers(), stream_);

    StepCheck check;
    check.info = optimizer_->step_info();
    read_device(current_);
    const auto same = [](const PinnedMemory &a, const PinnedMemory &b, std::size_t bytes) {
        return bytes == 0 || std::memcmp(a.get(), b.get(), bytes) == 0;
    };
    check.unchanged = same(current_.params, previous_.params, param_total_ * elem_) &&
                      (options_.dtype == DType::f32 ||
                       same(current_.master, previous_.master, elements_ * sizeof(float))) &&
                      same(current_.state, previous_.state, std::size_t(slots_) * elements_ * sizeof(float));
    check.skipped = check.info.last_skipped;
    if (check.skipped) return check; // the tests look at `unchanged`; the reference does not move

    reference_step(check.info.steps, check.info.last_grad_scale);
    compare(check);
    std::swap(previous_, current_); // what the device holds now is where the next step starts
    return check;
}

} // namespace gpu_test
