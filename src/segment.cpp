// Segment create/open/remove with Boost.Interprocess. Cold path: may throw, allocate, syscall.
#include <spanring/segment.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace bip = boost::interprocess;

namespace spanring {

namespace {

bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v && p < (1u << 31)) p <<= 1;
  return p;
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

std::string check_header(const SegmentHeader& h, uint64_t mapped_bytes) {
  char buf[256];
  const uint64_t magic = h.magic.load(std::memory_order_acquire);
  if (magic != kSegmentMagic) {
    std::snprintf(buf, sizeof buf, "not a spanring segment (magic %016llx, expected %016llx)",
                  static_cast<unsigned long long>(magic),
                  static_cast<unsigned long long>(kSegmentMagic));
    return buf;
  }
  if (h.layout_version != kLayoutVersion) {
    std::snprintf(buf, sizeof buf,
                  "segment layout version %u, this build reads version %u only",
                  h.layout_version, kLayoutVersion);
    return buf;
  }
  if (h.header_bytes != kSegmentHeaderBytes || h.slot_bytes != kSlotBytes ||
      h.ring_header_bytes != kRingHeaderBytes) {
    std::snprintf(buf, sizeof buf,
                  "segment record layout differs (header %u/%u, slot %u/%u, ring header %u/%u "
                  "bytes: found/expected)",
                  h.header_bytes, kSegmentHeaderBytes, h.slot_bytes, kSlotBytes,
                  h.ring_header_bytes, kRingHeaderBytes);
    return buf;
  }
  if (h.ring_count == 0 || h.ring_count > kMaxRingCount || !is_pow2(h.ring_capacity) ||
      h.ring_capacity < kMinRingCapacity || h.ring_capacity > kMaxRingCapacity) {
    std::snprintf(buf, sizeof buf, "segment has an invalid ring table (%u rings of %u slots)",
                  h.ring_count, h.ring_capacity);
    return buf;
  }
  const uint64_t want = segment_bytes(h.ring_count, h.ring_capacity);
  if (h.rings_offset != rings_offset() || h.journal_offset != journal_offset(h.ring_count) ||
      h.slots_offset != slots_offset(h.ring_count) || h.segment_bytes != want ||
      mapped_bytes < want) {
    std::snprintf(buf, sizeof buf,
                  "segment size mismatch: header says %llu bytes, layout needs %llu, "
                  "object has %llu",
                  static_cast<unsigned long long>(h.segment_bytes),
                  static_cast<unsigned long long>(want),
                  static_cast<unsigned long long>(mapped_bytes));
    return buf;
  }
  return {};
}

namespace {

// Field 22 (starttime) of a /proc .../stat file, or 0 when it cannot be read, or when
// `reject_exited` and field 3 (state) says the task has exited (Z or X).
uint64_t stat_start_time(const char* path, bool reject_exited) noexcept {
  // open/read/close rather than stdio: the producer calls this from its fork handler and it
  // must stay async-signal-safe (no malloc).
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // Field 2 (comm) may hold spaces and ')': fields resume after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  if (reject_exited && p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X')) return 0;
  // After ')' come fields 3.. each preceded by one space; starttime is field 22.
  for (int field = 2; field < 22 && *p != '\0'; ++p)
    if (*p == ' ') ++field;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<uint64_t>(*p - '0');
  return v;
}

}  // namespace

uint64_t process_start_time(uint32_t pid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  // The leader shows Z once the main thread has exited, even while other threads run: a
  // process is gone only when no thread of it is left.
  uint64_t start = stat_start_time(path, true);
  if (start != 0) return start;
  start = stat_start_time(path, false);
  if (start == 0) return 0;
  std::snprintf(path, sizeof path, "/proc/%u/status", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[2048];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* t = std::strstr(buf, "\nThreads:");
  if (t == nullptr) return 0;
  t += 10;
  while (*t == ' ' || *t == '\t') ++t;
  return *t >= '2' || (*t == '1' && t[1] >= '0' && t[1] <= '9') ? start : 0;
}

bool thread_alive(uint32_t pid, uint32_t tid, uint64_t start_time) noexcept {
  char path[96];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  // The pid names the same process (not a reused pid) ...
  if (start_time == 0 || stat_start_time(path, false) != start_time) return false;
  // ... and the owner thread itself has not exited.
  std::snprintf(path, sizeof path, "/proc/%u/task/%u/stat", pid, tid);
  return stat_start_time(path, true) != 0;
}

Segment::Segment(std::string name, void* region, std::byte* base, uint64_t size)
    : name_(std::move(name)), region_(region), base_(base), size_(size) {}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), region_(std::exchange(o.region_, nullptr)),
      base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    delete static_cast<bip::mapped_region*>(region_);
    name_ = std::move(o.name_);
    region_ = std::exchange(o.region_, nullptr);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Segment::~Segment() { delete static_cast<bip::mapped_region*>(region_); }

void Segment::leak() noexcept {
  // Kept reachable from static storage: the mapping lives until the process ends, and leak
  // checkers (LeakSanitizer) see a root rather than a lost allocation. A process attaches a
  // handful of times at most; past the table's size the pointer is simply dropped.
  static std::atomic<void*> kept[16];
  for (auto& slot : kept) {
    void* expected = nullptr;
    if (slot.compare_exchange_strong(expected, region_, std::memory_order_relaxed)) break;
  }
  region_ = nullptr;
}

RingHeader& Segment::ring(uint32_t i) const noexcept {
  return reinterpret_cast<RingHeader*>(base_ + header().rings_offset)[i];
}

std::byte* Segment::ring_slots(uint32_t i) const noexcept {
  const SegmentHeader& h = header();
  return base_ + h.slots_offset + uint64_t{i} * h.ring_capacity * kSlotBytes;
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

  bip::permissions perm;
  perm.set_permissions(0600);  // Boost fchmod()s after shm_open, so the umask cannot widen it
  bip::mapped_region* region = nullptr;
  try {
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, perm);
    try {
      shm.truncate(static_cast<bip::offset_t>(bytes));
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
  // Write every page once here, in the drainer, so the kernel has allocated them all before any
  // producer records; ftruncate'd shm pages are zero, and zero reads as "ring free".
  std::memset(base, 0, bytes);

  auto* h = new (base) SegmentHeader{};
  h->layout_version = kLayoutVersion;
  h->header_bytes = kSegmentHeaderBytes;
  h->slot_bytes = kSlotBytes;
  h->ring_header_bytes = kRingHeaderBytes;
  h->ring_count = options.ring_count;
  h->ring_capacity = capacity;
  h->rings_offset = rings_offset();
  h->journal_offset = journal_offset(options.ring_count);
  h->slots_offset = slots_offset(options.ring_count);
  h->segment_bytes = bytes;
  h->creator_pid = static_cast<uint32_t>(::getpid());
  h->creator_start_time = process_start_time(h->creator_pid);
  // release: publishes every field above to a producer that acquires `magic`.
  h->magic.store(kSegmentMagic, std::memory_order_release);
  return Segment(name, region, base, bytes);
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
  Segment seg(name, region, base, static_cast<uint64_t>(object_size));
  const std::string why = check_header(seg.header(), seg.size());
  if (!why.empty()) {
    // No magic: some other program's object; anything else: a spanring segment this build
    // cannot read.
    const bool ours = seg.header().magic.load(std::memory_order_acquire) == kSegmentMagic;
    throw Error(ours ? ErrorCode::kLayoutMismatch : ErrorCode::kNotASegment,
                "segment '" + name + "' refused: " + why, EPROTO, name);
  }
  return seg;
}

bool Segment::remove(const std::string& name) noexcept {
  try {
    return bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
    return false;
  }
}

}  // namespace spanring
