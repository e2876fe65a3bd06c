// One simulated accelerator: a memory arena the host cannot address, and a
// command processor thread that consumes an in-order queue of submissions
// (DMA host->device, DMA device->host, kernel launch), applying the timing
// model and the injected faults. Everything here is thread-safe unless noted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bitstream.hpp"
#include "config.hpp"
#include "host_cost.hpp"

namespace loom::fpga_stub {

class Device;
class HandleTable;

// The checksum the device keeps over each allocation (FNV-1a, 64 bits):
// taken after every write and checked before every read.
uint64_t checksum_of(const std::byte* p, uint64_t n);

// A completion flag with the error of the work that was to set it. Shared by
// the host's fence handle and the submissions that signal it, so either may
// go first.
class FenceState {
 public:
  void signal(Status error);
  // DEADLINE_EXCEEDED naming `what` when not signaled within timeout_ns
  // (UINT64_MAX: forever).
  Status wait(uint64_t timeout_ns, const std::string& what);
  Status query(bool* out_signaled);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool signaled_ = false;
  Status error_;
};

// A range of device memory with a checksum of its contents, kept by the
// command processor after every write and checked before every read, so a
// flipped bit is detected. Returned to the arena when the last owner (a
// handle or an in-flight command) lets go.
struct Allocation {
  Allocation(Device* device, uint64_t offset, uint64_t size) : device(device), offset(offset), size(size) {}
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  Device* device;  // outlives the allocation
  uint64_t offset;
  uint64_t size;
  uint64_t checksum = 0;  // touched by the command processor only
};

// A bitstream loaded on a device: weights resident, activations reserved
// (for an open bitstream: per launch, Command::activations).
struct Program {
  Bitstream bs;
  std::shared_ptr<Allocation> weights;
  std::shared_ptr<Allocation> activations;
};

// One tensor of a kernel launch: where its bytes lie on the device.
struct Binding {
  std::shared_ptr<Allocation> allocation;
  uint64_t offset = 0;
};

struct Command {
  enum class Kind { kDmaToDevice, kDmaToHost, kKernel };
  Kind kind = Kind::kKernel;
  // DMA: the range, and the bytes in flight (host->device: the source,
  // copied at submit; device->host: filled by the processor).
  std::shared_ptr<Allocation> target;
  uint64_t offset = 0;
  std::shared_ptr<std::vector<std::byte>> staging;
  // Kernel launch: the program and one binding per program input, then output.
  std::shared_ptr<Program> program;
  // An open program's launch: the bitstream at this execution's binding
  // (bind_shapes) and the activations reserved for it; NULL for a static one.
  std::shared_ptr<const Bitstream> bound;
  std::shared_ptr<Allocation> activations;
  std::vector<Binding> io;
};

// Work queued by one ABI call. `done` is signaled with the first error, or OK
// once every command ran; a hung command never signals it.
struct Submission {
  std::string entry;  // the ABI entry that queued it, for messages
  std::vector<std::shared_ptr<FenceState>> waits;
  std::vector<Command> commands;
  std::shared_ptr<FenceState> done;
};

class Device {
 public:
  // `handles` is the plugin's table, which outlives the device.
  Device(size_t index, const Config& config, const loom_host_services_t* host, HandleTable* handles);
  // Stops the command processor; queued work is dropped, its fences stay
  // unsignaled.
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& uri() const { return uri_; }
  void info(loom_device_info_t* out) const;
  uint64_t memory_bytes() const { return config_.memory_bytes; }
  bool faulty() const { return index_ == config_.faults.device; }
  const Config& config() const { return config_; }
  HandleTable* handles() const { return handles_; }
  // What its executions cost on the host (executable_estimate).
  HostCost& host_cost() { return host_cost_; }

  // DEVICE_LOST once the device is lost, naming `entry`.
  Status check_alive(const char* entry);
  // Reserves `size` bytes (RESOURCE_EXHAUSTED when the arena has no room or
  // the allocation fault fires).
  Status allocate(uint64_t size, const char* entry, std::shared_ptr<Allocation>* out);
  // Queues `s` and returns at once.
  Status submit(Submission s);
  // Queues `s` and waits for it up to the sync timeout.
  Status run_sync(Submission s);

  // Called by ~Allocation.
  void release(uint64_t offset, uint64_t size);

 private:
  void worker();
  Status run_command(const Submission& s, Command& c, bool* hung);
  Status dma(const Submission& s, Command& c, uint64_t seq);
  Status launch(const Submission& s, Command& c, uint64_t seq, bool* hung);
  Status verify(const Allocation& a, const std::string& what);
  void reseal(Allocation& a);
  // Advances the device clock by `ns`, traces [start, end) as `name` and,
  // with fpga.realtime, sleeps until the end. False when stopped meanwhile.
  bool spend(uint64_t ns, const std::string& name);
  void trace(loom_trace_phase_t phase, const std::string& name, uint64_t ns);
  std::string lost_message(const char* entry) const;

  const size_t index_;
  const Config config_;
  HostCost host_cost_;
  const loom_host_services_t* host_;
  HandleTable* const handles_;
  const std::string uri_;
  const std::string name_;
  std::unique_ptr<std::byte[]> memory_;

  std::mutex arena_mutex_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  uint64_t allocations_ = 0;           // counted for fpga.fault.alloc

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Submission> queue_;
  bool stop_ = false;
  bool lost_ = false;
  std::string lost_reason_;

  // Owned by the worker thread.
  uint64_t commands_ = 0, dmas_ = 0, uploads_ = 0, launches_ = 0;
  uint64_t clock_ns_ = 0;  // the device timeline (steady clock ns)

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace loom::fpga_stub
