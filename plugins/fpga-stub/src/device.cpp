#include "device.hpp"
#include "node_check.hpp"

#include <cstring>

#include "kernels.hpp"

namespace loom::fpga_stub {
namespace {

constexpr uint64_t kAlignment = 256;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

uint64_t checksum_of(const std::byte* p, uint64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < n; ++i) {
    h ^= static_cast<uint8_t>(p[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

// ------------------------------------------------------------------ FenceState

void FenceState::signal(Status error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (signaled_) return;
    signaled_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

Status FenceState::wait(uint64_t timeout_ns, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout_ns == UINT64_MAX) {
    cv_.wait(lock, [this] { return signaled_; });
  } else if (!cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns > INT64_MAX ? INT64_MAX : timeout_ns),
                           [this] { return signaled_; })) {
    return sdk::deadline_exceeded(what + " did not complete within " + std::to_string(timeout_ns / 1000000) +
                                  " ms");
  }
  return error_;
}

Status FenceState::query(bool* out_signaled) {
  std::lock_guard<std::mutex> lock(mutex_);
  *out_signaled = signaled_;
  return signaled_ ? error_ : Status();
}

Allocation::~Allocation() { device->release(offset, size); }

// ------------------------------------------------------------------ Device

Device::Device(size_t index, const Config& config, const loom_host_services_t* host,
               HandleTable* handles)
    : index_(index), config_(config), host_(host), handles_(handles), uri_("fpga-stub://" + std::to_string(index)),
      name_("fpga-stub simulated accelerator " + std::to_string(index) + " (" +
            std::to_string(config.timing.mac_array) + " int8 MACs at " +
            std::to_string(config.timing.clock_mhz) + " MHz, " +
            std::to_string(config.memory_bytes >> 20) + " MiB)"),
      memory_(new std::byte[config.memory_bytes]) {
  free_[0] = config_.memory_bytes;
  thread_ = std::thread([this] { worker(); });
}

Device::~Device() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  thread_.join();
  queue_.clear();  // drops the allocations in flight before the arena goes
}

void Device::info(loom_device_info_t* out) const {
  out->uri = uri_.c_str();
  out->name = name_.c_str();
  out->kind = LOOM_DEVICE_KIND_ACCELERATOR;
  out->device_memory_bytes = config_.memory_bytes;
  out->host_visible_memory_bytes = 0;
  out->capabilities = LOOM_DEVICE_CAP_ASYNC;
  out->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32) | LOOM_DTYPE_BIT(LOOM_DTYPE_I8) |
                    LOOM_DTYPE_BIT(LOOM_DTYPE_U8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I32);
}

std::string Device::lost_message(const char* entry) const {
  return uri_ + ": " + entry + ": the device is lost (" + lost_reason_ + ")";
}

Status Device::check_alive(const char* entry) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  if (lost_) return {LOOM_STATUS_DEVICE_LOST, lost_message(entry)};
  return Status();
}

Status Device::allocate(uint64_t size, const char* entry, std::shared_ptr<Allocation>* out) {
  LOOM_SDK_RETURN_IF_ERROR(check_alive(entry));
  const uint64_t want = size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  if (size > config_.memory_bytes) {
    return sdk::resource_exhausted(uri_ + ": " + entry + ": " + std::to_string(size) +
                                   " bytes exceed the device's " + std::to_string(config_.memory_bytes));
  }
  std::lock_guard<std::mutex> lock(arena_mutex_);
  const uint64_t n = ++allocations_;
  if (faulty() && config_.faults.alloc == n) {
    return sdk::resource_exhausted(uri_ + ": " + entry + ": allocation #" + std::to_string(n) + " of " +
                                   std::to_string(size) + " bytes failed (injected: fpga.fault.alloc=" +
                                   std::to_string(n) + ")");
  }
  uint64_t largest = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    largest = std::max(largest, it->second);
    if (it->second < want) continue;
    const uint64_t offset = it->first, left = it->second - want;
    free_.erase(it);
    if (left != 0) free_[offset + want] = left;
    // Fresh device memory reads as zeros and carries a valid checksum, so
    // a tensor the host never wrote (an empty one) passes verification.
    std::memset(memory_.get() + offset, 0, want);
    *out = std::make_shared<Allocation>(this, offset, want);
    (*out)->checksum = checksum_of(memory_.get() + offset, want);
    return Status();
  }
  return sdk::resource_exhausted(uri_ + ": " + entry + ": device memory exhausted: " + std::to_string(size) +
                                 " bytes requested, the largest free block has " + std::to_string(largest) +
                                 " of " + std::to_string(config_.memory_bytes));
}

void Device::release(uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(arena_mutex_);
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

Status Device::submit(Submission s) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (lost_) return {LOOM_STATUS_DEVICE_LOST, lost_message(s.entry.c_str())};
    queue_.push_back(std::move(s));
  }
  queue_cv_.notify_all();
  return Status();
}

Status Device::run_sync(Submission s) {
  auto done = std::make_shared<FenceState>();
  s.done = done;
  const std::string what = uri_ + ": " + s.entry;
  LOOM_SDK_RETURN_IF_ERROR(submit(std::move(s)));
  return done->wait(config_.sync_timeout_ms * 1000000, what + " (fpga.sync_timeout_ms)");
}

// ------------------------------------------------------------------ the command processor

void Device::worker() {
  for (;;) {
    Submission s;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      s = std::move(queue_.front());
      queue_.pop_front();
    }
    Status error;
    for (const auto& w : s.waits) {
      // Waits in slices so that a stop is noticed.
      for (;;) {
        bool signaled = false;
        Status e = w->query(&signaled);
        if (signaled) {
          if (!e.ok() && error.ok()) error = Status(e.code(), uri_ + ": " + s.entry + ": a wait fence failed: " + e.message());
          break;
        }
        std::unique_lock<std::mutex> lock(queue_mutex_);
        if (queue_cv_.wait_for(lock, std::chrono::milliseconds(5), [this] { return stop_; })) return;
      }
    }
    bool hung = false;
    for (Command& c : s.commands) {
      if (!error.ok()) break;
      error = run_command(s, c, &hung);
      if (hung) break;
    }
    if (hung) {
      // The queue stalls behind the hung kernel until the device is destroyed.
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stop_; });
      return;
    }
    if (s.done) s.done->signal(error);
  }
}

Status Device::run_command(const Submission& s, Command& c, bool* hung) {
  const uint64_t seq = ++commands_;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (lost_) return {LOOM_STATUS_DEVICE_LOST, lost_message(s.entry.c_str())};
  }
  if (c.kind == Command::Kind::kKernel) return launch(s, c, seq, hung);
  return dma(s, c, seq);
}

Status Device::verify(const Allocation& a, const std::string& what) {
  if (checksum_of(memory_.get() + a.offset, a.size) != a.checksum) {
    return {LOOM_STATUS_DATA_LOSS, what + ": device memory at [" + std::to_string(a.offset) + ", +" +
                                       std::to_string(a.size) + ") fails its checksum: a bit flipped"};
  }
  return Status();
}

void Device::reseal(Allocation& a) { a.checksum = checksum_of(memory_.get() + a.offset, a.size); }

Status Device::dma(const Submission& s, Command& c, uint64_t seq) {
  const bool up = c.kind == Command::Kind::kDmaToDevice;
  const uint64_t n = ++dmas_;
  const uint64_t bytes = c.staging->size();
  const std::string what = uri_ + ": " + s.entry + ": DMA " + (up ? "host->device" : "device->host") + " #" +
                           std::to_string(n) + " (command #" + std::to_string(seq) + ", " +
                           std::to_string(bytes) + " bytes)";
  if (c.offset > c.target->size || bytes > c.target->size - c.offset) {
    return sdk::out_of_range(what + ": range [" + std::to_string(c.offset) + ", +" + std::to_string(bytes) +
                             ") exceeds the buffer's " + std::to_string(c.target->size) + " bytes");
  }
  if (!spend(config_.timing.dma_ns(bytes), std::string(up ? "dma h2d #" : "dma d2h #") + std::to_string(n))) {
    return sdk::Status(LOOM_STATUS_CANCELLED, what + ": the device is shutting down");
  }
  if (faulty() && config_.faults.dma == n) {
    return {LOOM_STATUS_DATA_LOSS, what + " failed (injected: fpga.fault.dma=" + std::to_string(n) + ")"};
  }
  std::byte* base = memory_.get() + c.target->offset;
  if (up) {
    if (bytes != 0) std::memcpy(base + c.offset, c.staging->data(), bytes);
    reseal(*c.target);
    const uint64_t u = ++uploads_;
    if (faulty() && config_.faults.bit_flip == u && c.target->size != 0) {
      // Flipped after the checksum was taken: the next read detects it.
      base[c.offset + (bytes != 0 ? bytes / 2 : 0) % c.target->size] ^= std::byte{0x10};
    }
    return Status();
  }
  LOOM_SDK_RETURN_IF_ERROR(verify(*c.target, what));
  if (bytes != 0) std::memcpy(c.staging->data(), base + c.offset, bytes);
  return Status();
}

Status Device::launch(const Submission& s, Command& c, uint64_t seq, bool* hung) {
  const uint64_t n = ++launches_;
  const std::string what = uri_ + ": " + s.entry + ": kernel launch #" + std::to_string(n) + " (command #" +
                           std::to_string(seq) + ")";
  const Faults& f = config_.faults;
  if (faulty() && f.lost == n) {
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      lost_ = true;
      lost_reason_ = "lost during kernel launch #" + std::to_string(n) + ", injected: fpga.fault.lost=" +
                     std::to_string(n);
      // Everything queued behind it fails the same way.
      for (Submission& q : queue_) {
        if (q.done) q.done->signal({LOOM_STATUS_DEVICE_LOST, lost_message(q.entry.c_str())});
      }
      queue_.clear();
    }
    return {LOOM_STATUS_DEVICE_LOST, what + ": the device was lost (injected: fpga.fault.lost=" +
                                         std::to_string(n) + ")"};
  }
  if (faulty() && f.hang == n) {
    trace(LOOM_TRACE_INSTANT, "kernel #" + std::to_string(n) + " hangs (fpga.fault.hang)", 0);
    *hung = true;
    return Status();
  }
  Program& p = *c.program;
  // An open program runs, and is timed, at its binding's shapes.
  const Bitstream& bs = c.bound ? *c.bound : p.bs;
  const std::shared_ptr<Allocation>& activations = c.bound ? c.activations : p.activations;
  // Device addresses of every tensor; inputs are checked before they are read.
  std::vector<std::byte*> data(bs.tensors.size(), nullptr);
  std::byte* mem = memory_.get();
  LOOM_SDK_RETURN_IF_ERROR(verify(*p.weights, what + ": weights"));
  for (size_t t = 0; t < bs.tensors.size(); ++t) {
    const BsTensor& bt = bs.tensors[t];
    if (bt.storage == Storage::kConst) data[t] = mem + p.weights->offset + bt.offset;
    if (bt.storage == Storage::kScratch) data[t] = mem + activations->offset + bt.offset;
  }
  const size_t ni = bs.inputs.size();
  for (size_t k = 0; k < c.io.size(); ++k) {
    const Binding& b = c.io[k];
    data[k < ni ? bs.inputs[k] : bs.outputs[k - ni]] = mem + b.allocation->offset + b.offset;
    if (k < ni) {
      LOOM_SDK_RETURN_IF_ERROR(verify(*b.allocation, what + ": input " + std::to_string(k)));
    }
  }
  NodeCost cost;
  for (const BsNode& node : bs.nodes) {
    const NodeCost nc = node_cost(bs, node);
    cost.int8_macs += nc.int8_macs;
    cost.f32_ops += nc.f32_ops;
  }
  if (!spend(config_.timing.kernel_ns(cost.int8_macs, cost.f32_ops), "kernel #" + std::to_string(n))) {
    return sdk::Status(LOOM_STATUS_CANCELLED, what + ": the device is shutting down");
  }
  for (const BsNode& node : bs.nodes) run_node(bs, node, data.data());
  for (size_t k = ni; k < c.io.size(); ++k) reseal(*c.io[k].allocation);
  return Status();
}

bool Device::spend(uint64_t ns, const std::string& name) {
  const uint64_t start = std::max(now_ns(), clock_ns_);
  clock_ns_ = start + ns;
  trace(LOOM_TRACE_BEGIN, name, start);
  trace(LOOM_TRACE_END, name, clock_ns_);
  if (!config_.realtime) return true;
  const auto until = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(clock_ns_));
  std::unique_lock<std::mutex> lock(queue_mutex_);
  return !queue_cv_.wait_until(lock, until, [this] { return stop_; });
}

void Device::trace(loom_trace_phase_t phase, const std::string& name, uint64_t ns) {
  sdk::send_trace(host_, phase, uri_.c_str(), name.c_str(), ns);
}

}  // namespace loom::fpga_stub
