// Creating, opening and removing a spanring shared-memory segment (Boost.Interprocess).
//
// Cold path only: every function here may make syscalls and allocate. Errors are thrown as
// spanring::Error, which carries what failed, the errno, and the segment name it concerns.
#pragma once

#include <spanring/error.h>
#include <spanring/segment_layout.h>
#include <spanring/segment_view.h>

#include <cstdint>
#include <optional>
#include <string>

namespace spanring {

// Sizes fixed at creation. No allocation in shared memory happens after it.
struct SegmentOptions {
  uint32_t ring_count = 256;      // rings = threads that can trace at once, across all processes
  // Slots (64 bytes each) per ring; rounded up to a power of two. 65,536 slots (4 MiB): a burst
  // of 20,000 one-slot spans from one thread (~1.2 ms flat out here) fits whole while an idle
  // drainer sleeps (up to 20 ms between polls), and a thread writing 4 M records/s has 16 ms of
  // ring before a drainer that is kept off its CPU drops any (32,768 slots, 8.2 ms, dropped
  // 2,121-16,387 of 40 M in 6 of 8 paced 10-s runs of bench_drain, 65,536 none of 5:
  // docs/performance.md, "Ring size"). A ring's slot pages are committed only when a
  // thread claims it (create() reserves the header, ring table, journal and strings only), so
  // rings no thread ever claimed cost address space, not memory.
  uint32_t ring_capacity = 65536;
};

// A mapping of one segment in this process. Movable, not copyable. The destructor unmaps; it
// never removes the named object (see remove()).
class Segment {
 public:
  // Creates the named segment with mode 0600 (whatever the umask), sizes it, writes every page
  // before the slots once (a first store to a fresh shared page costs microseconds; no producer
  // should pay it on a record), initialises the header and publishes it. The slot pages are left
  // uncommitted: the thread that claims a ring commits that ring's pages at its claim
  // (MADV_POPULATE_WRITE, which fails with an error where a store would raise SIGBUS), so the
  // memory a segment takes is its tables plus one ring per thread that ever traced in it. A
  // kernel without MADV_POPULATE_WRITE (before 5.14) gets every page reserved here, as before.
  // Throws Error: the name exists (EEXIST; never reinitialised or resized), options out of range
  // (EINVAL), /dev/shm's free space cannot hold the tables and one ring (or, without lazy
  // commits, the whole segment) or the pages written here cannot be reserved (ErrorCode::kNoSpace, ENOSPC; checked before anything is created, then those
  // pages are reserved with posix_fallocate, so a full /dev/shm is an error, never a SIGBUS; a
  // ring whose pages cannot be committed later is not claimed and its thread's records count
  // as no_ring drops), or the
  // system refused (errno as reported). Nothing is left behind when it throws.
  static Segment create(const std::string& name, const SegmentOptions& options);

  // How many rings of `ring_capacity` slots (rounded up to a power of two, as create() does)
  // /dev/shm's free space can commit now, or UINT64_MAX when statvfs cannot read it. After
  // create(), fewer than the segment's ring count means the threads past that many get no ring
  // (their records are no_ring drops): the command line warns. Any thread, any time.
  static uint64_t rings_that_fit(uint32_t ring_capacity);

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
  uint64_t size() const noexcept { return size_; }  // bytes mapped
  // The mapping through its geometry, validated once when the segment was created or opened
  // (segment_view.h): every accessor below reads the view's copy, never the shared header.
  const SegmentView& view() const noexcept { return view_; }
  std::byte* base() const noexcept { return view_.base(); }
  SegmentHeader& header() const noexcept { return view_.header(); }
  uint32_t ring_count() const noexcept { return view_.ring_count(); }
  uint32_t ring_capacity() const noexcept { return view_.ring_capacity(); }  // slots
  // Ring i's header and first slot. Throws std::out_of_range for i >= ring_count().
  RingHeader& ring(uint32_t i) const { return view_.ring(i); }
  std::byte* ring_slots(uint32_t i) const { return view_.ring_slots(i); }

  // Gives up ownership of the mapping: it stays mapped for the life of the process. The producer
  // library does this so that threads still emitting during exit() never touch unmapped memory.
  void leak() noexcept;

 private:
  Segment(std::string name, void* region, const SegmentView& view, uint64_t size);
  std::string name_;
  void* region_ = nullptr;  // boost::interprocess::mapped_region*, owned
  SegmentView view_;
  uint64_t size_ = 0;
};

}  // namespace spanring
