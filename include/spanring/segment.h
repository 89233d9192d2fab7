// Creating, opening and removing a spanring shared-memory segment (Boost.Interprocess).
//
// Cold path only: every function here may make syscalls and allocate. Errors are thrown as
// spanring::Error, which carries what failed, the errno, and the segment name it concerns.
#pragma once

#include <spanring/error.h>
#include <spanring/segment_layout.h>

#include <cstdint>
#include <string>

namespace spanring {

// Sizes fixed at creation. No allocation in shared memory happens after it.
struct SegmentOptions {
  uint32_t ring_count = 256;      // rings = threads that can trace at once, across all processes
  uint32_t ring_capacity = 4096;  // slots (64 bytes each) per ring; rounded up to a power of two
};

// A mapping of one segment in this process. Movable, not copyable. The destructor unmaps; it
// never removes the named object (see remove()).
class Segment {
 public:
  // Creates the named segment with mode 0600 (whatever the umask), sizes it, writes every page
  // once (a first store to a fresh shared page costs microseconds; no producer should pay it on
  // a record), initialises the header and publishes it.
  // Throws Error: the name exists (EEXIST; never reinitialised or resized), options out of range
  // (EINVAL), or the system refused (errno as reported).
  static Segment create(const std::string& name, const SegmentOptions& options);

  // Opens an existing, initialised segment read-write and checks its header against this build:
  // magic, layout version, slot and header sizes, and that the object is as large as the header
  // says. Throws Error naming both versions on a mismatch (EPROTO), EACCES with uid and mode on a
  // permission failure, ENOENT when the name does not exist.
  static Segment open(const std::string& name);

  // Removes the name (existing mappings stay valid). Returns false when there was nothing to
  // remove or the system refused.
  static bool remove(const std::string& name) noexcept;

  Segment(Segment&&) noexcept;
  Segment& operator=(Segment&&) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  const std::string& name() const noexcept { return name_; }
  std::byte* base() const noexcept { return base_; }
  uint64_t size() const noexcept { return size_; }  // bytes mapped
  SegmentHeader& header() const noexcept { return *reinterpret_cast<SegmentHeader*>(base_); }
  uint32_t ring_count() const noexcept { return header().ring_count; }
  uint32_t ring_capacity() const noexcept { return header().ring_capacity; }
  // Ring i's header and first slot; i < ring_count() (checked by the caller).
  RingHeader& ring(uint32_t i) const noexcept;
  std::byte* ring_slots(uint32_t i) const noexcept;

  // Gives up ownership of the mapping: it stays mapped for the life of the process. The producer
  // library does this so that threads still emitting during exit() never touch unmapped memory.
  void leak() noexcept;

 private:
  Segment(std::string name, void* region, std::byte* base, uint64_t size);
  std::string name_;
  void* region_ = nullptr;  // boost::interprocess::mapped_region*, owned
  std::byte* base_ = nullptr;
  uint64_t size_ = 0;
};

// Checks a header copy against this build and the mapped size. Returns an empty string when it
// is usable, else the reason (naming the found and the expected value).
std::string check_header(const SegmentHeader& h, uint64_t mapped_bytes);

// Process start time in clock ticks since boot (field 22 of /proc/PID/stat), or 0 when the
// process does not exist, has exited (a zombie not yet reaped) or cannot be read.
// Async-signal-safe (open/read/close, no allocation). Together with the pid it names one process even
// after the pid is reused.
uint64_t process_start_time(uint32_t pid) noexcept;

// True while thread `tid` of process `pid` runs, where `start_time` is the process start time
// recorded when the thread took its ring (so a reused pid is not mistaken for the owner). A
// process whose main thread exited while others run is alive; the owner is gone once its own
// thread has exited or the process is gone. Async-signal-safe.
bool thread_alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept;

}  // namespace spanring
