// Segment create/open/remove with Boost.Interprocess. Cold path: may throw, allocate, syscall.
#include <spanring/segment.h>

#include "src/proc.h"

#include <spanring/test_point.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

namespace bip = boost::interprocess;

namespace spanring {

namespace {

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v && p < (1u << 31)) p <<= 1;
  return p;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (uapi asm-generic/mman-common.h)
#endif

// Whether this kernel has MADV_POPULATE_WRITE, which commits a shared page or fails with an
// error (EFAULT where a store would raise SIGBUS: /dev/shm full). Without it a claimer could
// only touch its ring's pages, and a store to a page tmpfs cannot supply kills the traced
// program, so the creator reserves every page instead (EINVAL: not known to this kernel).
bool populate_write_supported() {
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  const bool ok = ::madvise(p, 4096, MADV_POPULATE_WRITE) == 0 || errno != EINVAL;
  ::munmap(p, 4096);
  return ok;
}

// /dev/shm's free bytes (for an unprivileged user: f_bavail), or UINT64_MAX where statvfs
// cannot tell (then nothing is refused for want of room: posix_fallocate still is the check).
uint64_t shm_free_bytes() {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return UINT64_MAX;
  return uint64_t{fs.f_bavail} * fs.f_frsize;
}

int boost_errno(const bip::interprocess_exception& e) {
  // Boost keeps the native error of the failing call; fall back to the error class.
  if (e.get_native_error() != 0) return e.get_native_error();
  switch (e.get_error_code()) {
    case bip::already_exists_error: return EEXIST;
    case bip::not_found_error: return ENOENT;
    case bip::security_error: return EACCES;
    case bip::out_of_space_error: return ENOSPC;
    default: return EIO;
  }
}

std::string describe_access(const std::string& name) {
  struct stat st {};
  std::string path = "/dev/shm/" + name;
  char buf[160];
  if (::stat(path.c_str(), &st) == 0) {
    std::snprintf(buf, sizeof buf, " (segment %s is owned by uid %u with mode %04o; you are uid %u)",
                  path.c_str(), unsigned(st.st_uid), unsigned(st.st_mode & 07777),
                  unsigned(::geteuid()));
    return buf;
  }
  return {};
}

}  // namespace


Segment::Segment(std::string name, void* region, const SegmentView& view, uint64_t size)
    : name_(std::move(name)), region_(region), view_(view), size_(size) {}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), region_(std::exchange(o.region_, nullptr)),
      view_(std::exchange(o.view_, SegmentView{})), size_(std::exchange(o.size_, 0)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    delete static_cast<bip::mapped_region*>(region_);
    name_ = std::move(o.name_);
    region_ = std::exchange(o.region_, nullptr);
    view_ = std::exchange(o.view_, SegmentView{});
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Segment::~Segment() { delete static_cast<bip::mapped_region*>(region_); }

void Segment::leak() noexcept {
  // The mapping lives until the process ends. Its mapped_region moves into static storage and
  // the heap object is freed, so nothing on the heap is left behind: a copy of libspanring
  // linked into a plugin and dlclose'd takes its static storage with it, and a heap object
  // rooted only there would be a lost allocation (LeakSanitizer reports it). A process attaches
  // a handful of times at most; past the table's size the region object stays on the heap.
  static constexpr int kKept = 16;
  alignas(bip::mapped_region) static unsigned char kept[kKept][sizeof(bip::mapped_region)];
  static std::atomic<int> used{0};
  auto* region = static_cast<bip::mapped_region*>(region_);
  region_ = nullptr;
  // relaxed: a slot index; each attach's thread writes only the slot it took.
  const int slot = used.fetch_add(1, std::memory_order_relaxed);
  if (region == nullptr || slot >= kKept) return;
  new (kept[slot]) bip::mapped_region(std::move(*region));  // never destroyed: never unmapped
  delete region;  // moved from: its destructor unmaps nothing
}

uint64_t Segment::rings_that_fit(uint32_t ring_capacity) {
  const uint64_t free_bytes = shm_free_bytes();
  if (free_bytes == UINT64_MAX) return UINT64_MAX;
  return free_bytes / (uint64_t{round_up_pow2(ring_capacity)} * kSlotBytes);
}

Segment Segment::create(const std::string& name, const SegmentOptions& options) {
  if (options.ring_count == 0 || options.ring_count > kMaxRingCount)
    throw Error("ring count must be 1.." + std::to_string(kMaxRingCount), EINVAL, name);
  if (options.ring_capacity < kMinRingCapacity || options.ring_capacity > kMaxRingCapacity)
    throw Error("ring capacity must be " + std::to_string(kMinRingCapacity) + ".." +
                    std::to_string(kMaxRingCapacity) + " slots",
                EINVAL, name);
  const uint32_t capacity = round_up_pow2(options.ring_capacity);
  const uint64_t bytes = segment_bytes(options.ring_count, capacity);
  // What is committed now: everything before the slots. A ring's slots are committed by the
  // thread that claims it (claim_ring), unless this kernel cannot do that gracefully.
  const bool lazy = populate_write_supported();
  const uint64_t eager_bytes = lazy ? slots_offset(options.ring_count) : bytes;

  // /dev/shm is memory: a segment larger than its free space would be created (ftruncate
  // only sets a size) and then die of SIGBUS at the first page the kernel cannot supply, while
  // the pages are written below. Refuse it here, naming both sizes. What must fit is what is
  // committed now plus one ring, so that at least one thread can trace: a ring whose pages
  // cannot be committed later is not claimed and its thread's records are no_ring drops, which
  // the claimer survives (and the command line warns when not every ring fits,
  // rings_that_fit()). Without lazy commits the whole segment is reserved now, so it must fit.
  const uint64_t ring_bytes = uint64_t{capacity} * kSlotBytes;
  const uint64_t needed_bytes = lazy ? eager_bytes + ring_bytes : bytes;
  const uint64_t free_bytes = shm_free_bytes();
  if (needed_bytes > free_bytes)
    throw Error(ErrorCode::kNoSpace,
                "segment '" + name + "' needs " + std::to_string(needed_bytes >> 20) +
                    " MiB (" + (lazy ? "its tables and one ring of " + std::to_string(capacity) +
                                           " slots; " + std::to_string(options.ring_count) +
                                           " rings take " + std::to_string(bytes >> 20) + " MiB"
                                     : std::to_string(options.ring_count) + " rings of " +
                                           std::to_string(capacity) + " slots") +
                    "), /dev/shm has " + std::to_string(free_bytes >> 20) +
                    " MiB free; use fewer rings or slots per ring",
                ENOSPC, name);

  bip::permissions perm;
  perm.set_permissions(0600);  // Boost fchmod()s after shm_open, so the umask cannot widen it
  bip::mapped_region* region = nullptr;
  try {
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, perm);
    SPANRING_TEST_POINT("segment_created");
    try {
      shm.truncate(static_cast<bip::offset_t>(bytes));
      SPANRING_TEST_POINT("segment_sized");
      // Reserve every page now (tmpfs supports it): space taken since the check above is an
      // ENOSPC here, never a SIGBUS in the writes below.
      const int err = ::posix_fallocate(shm.get_mapping_handle().handle, 0,
                                        static_cast<off_t>(eager_bytes));
      if (err != 0 && err != EOPNOTSUPP && err != EINVAL)
        throw Error(err == ENOSPC ? ErrorCode::kNoSpace : ErrorCode::kSystem,
                    "cannot reserve " + std::to_string(eager_bytes >> 20) + " MiB for segment '" +
                        name + "': " + std::strerror(err),
                    err, name);
      region = new bip::mapped_region(shm, bip::read_write, 0, bytes);
    } catch (...) {
      bip::shared_memory_object::remove(name.c_str());
      throw;
    }
  } catch (const bip::interprocess_exception& e) {
    const int err = boost_errno(e);
    std::string what = "cannot create shared-memory segment '" + name + "': " + e.what();
    if (err == EEXIST) what += " (a segment of that name exists; it is never reinitialised)";
    throw Error(what, err, name);
  }

  auto* base = static_cast<std::byte*>(region->get_address());
  // Who is creating it, first: writing every page below takes ~200 ms for the default size,
  // and a creator killed meanwhile leaves an object with no magic, which spanring clean
  // recognises by these two fields (drain/unfinished_segment.h) and removes once the creator is
  // dead.
  auto* h = new (base) SegmentHeader{};
  h->creator_pid = static_cast<uint32_t>(::getpid());
  SPANRING_TEST_POINT("segment_creator_pid");
  h->creator_start_time = process_start_time(h->creator_pid);
  SPANRING_TEST_POINT("segment_initialising");
  // Write every eager page once here, in the drainer, so the kernel has allocated them before
  // any producer records; ftruncate'd shm pages are zero, and zero reads as "ring free". Slot
  // pages left to their claimers read as zero too when they are first touched.
  std::memset(base + kSegmentHeaderBytes, 0, eager_bytes - kSegmentHeaderBytes);

  h->layout_version = kLayoutVersion;
  h->header_bytes = kSegmentHeaderBytes;
  h->slot_bytes = kSlotBytes;
  h->ring_header_bytes = kRingHeaderBytes;
  h->ring_count = options.ring_count;
  h->ring_capacity = capacity;
  SPANRING_TEST_POINT("segment_header_half");
  h->rings_offset = rings_offset();
  h->journal_offset = journal_offset(options.ring_count);
  h->strings_offset = strings_offset(options.ring_count);
  h->string_entries = kStringTableEntries;
  h->string_entry_bytes = sizeof(StringEntry);
  h->slots_offset = slots_offset(options.ring_count);
  h->segment_bytes = bytes;
  SPANRING_TEST_POINT("segment_header_written");
  // release: publishes every field above to a producer that acquires `magic`.
  h->magic.store(kSegmentMagic, std::memory_order_release);
  SegmentView view;
  std::string why;
  if (!SegmentView::validate(base, bytes, view, why)) {
    // Only a concurrent writer of a segment just created under a fresh name can get here.
    delete region;
    bip::shared_memory_object::remove(name.c_str());
    throw Error(ErrorCode::kLayoutMismatch, "segment '" + name + "' changed while it was "
                "created: " + why, EPROTO, name);
  }
  return Segment(name, region, view, bytes);
}

Segment Segment::open(const std::string& name) {
  bip::mapped_region* region = nullptr;
  bip::offset_t object_size = 0;
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    if (!shm.get_size(object_size))
      throw Error("cannot read the size of segment '" + name + "'", errno, name);
    if (object_size < static_cast<bip::offset_t>(kSegmentHeaderBytes))
      throw Error(ErrorCode::kNotASegment,
                  "segment '" + name + "' is " + std::to_string(object_size) +
                      " bytes, smaller than a spanring header (" +
                      std::to_string(kSegmentHeaderBytes) + ")",
                  EPROTO, name);
    region = new bip::mapped_region(shm, bip::read_write, 0,
                                    static_cast<std::size_t>(object_size));
  } catch (const bip::interprocess_exception& e) {
    const int err = boost_errno(e);
    std::string what = "cannot open shared-memory segment '" + name + "': " + e.what();
    if (err == EACCES) what += describe_access(name);
    throw Error(what, err, name);
  }
  auto* base = static_cast<std::byte*>(region->get_address());
  SegmentView view;
  std::string why;
  if (!SegmentView::validate(base, static_cast<uint64_t>(object_size), view, why)) {
    // No magic: some other program's object; anything else: a spanring segment this build
    // cannot read.
    const bool ours =
        reinterpret_cast<const SegmentHeader*>(base)->magic.load(std::memory_order_acquire) ==
        kSegmentMagic;
    delete region;
    throw Error(ours ? ErrorCode::kLayoutMismatch : ErrorCode::kNotASegment,
                "segment '" + name + "' refused: " + why, EPROTO, name);
  }
  return Segment(name, region, view, static_cast<uint64_t>(object_size));
}

bool Segment::remove(const std::string& name) noexcept {
  try {
    return bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
    return false;
  }
}

}  // namespace spanring
