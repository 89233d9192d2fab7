#include "drain/unfinished_segment.h"

#include "src/proc.h"

#include <spanring/segment_layout.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace spanring {
namespace {

// The pid in a name of the form spanring-<pid>-<8 lowercase hex digits>, or 0.
uint32_t pid_of_run_name(const std::string& name) {
  static constexpr char kPrefix[] = "spanring-";
  if (name.compare(0, sizeof kPrefix - 1, kPrefix) != 0) return 0;
  size_t i = sizeof kPrefix - 1;
  uint64_t pid = 0;
  const size_t digits_from = i;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && i - digits_from < 10; ++i)
    pid = pid * 10 + static_cast<uint64_t>(name[i] - '0');
  if (i == digits_from || name[digits_from] == '0' || pid > UINT32_MAX) return 0;
  if (i >= name.size() || name[i] != '-' || name.size() - (i + 1) != 8) return 0;
  for (size_t j = i + 1; j < name.size(); ++j)
    if (!((name[j] >= '0' && name[j] <= '9') || (name[j] >= 'a' && name[j] <= 'f'))) return 0;
  return static_cast<uint32_t>(pid);
}

template <class T>
T field(const unsigned char* hdr, size_t offset) {
  T v;
  std::memcpy(&v, hdr + offset, sizeof v);
  return v;
}

// Whether a header read from an object of `size` bytes with no magic is one that create() was
// writing for creator `pid`: every field zero or what create() writes there.
bool is_partial_header(const unsigned char* hdr, uint64_t size, uint32_t pid) {
  auto zero_or = [](uint64_t v, uint64_t expected) { return v == 0 || v == expected; };
  const uint32_t creator = field<uint32_t>(hdr, offsetof(SegmentHeader, creator_pid));
  const uint64_t start = field<uint64_t>(hdr, offsetof(SegmentHeader, creator_start_time));
  const uint32_t rings = field<uint32_t>(hdr, offsetof(SegmentHeader, ring_count));
  const uint32_t capacity = field<uint32_t>(hdr, offsetof(SegmentHeader, ring_capacity));
  if (field<uint64_t>(hdr, offsetof(SegmentHeader, magic)) != 0) return false;
  if (!zero_or(creator, pid) || (creator == 0 && start != 0)) return false;
  if (!zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, layout_version)), kLayoutVersion) ||
      !zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, header_bytes)), kSegmentHeaderBytes) ||
      !zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, slot_bytes)), kSlotBytes) ||
      !zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, ring_header_bytes)),
               kRingHeaderBytes) ||
      !zero_or(field<uint64_t>(hdr, offsetof(SegmentHeader, segment_bytes)), size) ||
      !zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, string_entries)),
               kStringTableEntries) ||
      !zero_or(field<uint32_t>(hdr, offsetof(SegmentHeader, string_entry_bytes)),
               sizeof(StringEntry)))
    return false;
  if (rings > kMaxRingCount) return false;
  if (capacity != 0 && (capacity < kMinRingCapacity || capacity > kMaxRingCapacity ||
                        (capacity & (capacity - 1)) != 0))
    return false;
  if (field<uint32_t>(hdr, offsetof(SegmentHeader, reserved0)) != 0) return false;
  // Everything after the geometry (the counters, the drainer's fields) is still zero: nothing
  // but create() has written into this object.
  for (size_t i = offsetof(SegmentHeader, no_ring_drops); i < kSegmentHeaderBytes; ++i)
    if (hdr[i] != 0) return false;
  return true;
}

// The wall-clock second at which the system booted (btime of /proc/stat), or 0.
time_t boot_time() {
  std::FILE* f = std::fopen("/proc/stat", "re");
  if (f == nullptr) return 0;
  char line[256];
  long long btime = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "btime %lld", &btime) == 1) break;
  std::fclose(f);
  return static_cast<time_t>(btime);
}

// Whether process `pid` runs and started no later than `created` (the object's ctime): a
// process that started after the object existed cannot have created it (its pid was reused).
// Two seconds of slack cover btime's whole seconds and the tick of the start time.
bool started_before(uint32_t pid, const struct timespec& created) {
  const uint64_t ticks = process_start_time(pid);
  if (ticks == 0) return false;
  const time_t boot = boot_time();
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (boot == 0 || hz <= 0) return true;  // cannot tell: keep the object
  const time_t started = boot + static_cast<time_t>(ticks / static_cast<uint64_t>(hz));
  return started <= created.tv_sec + 2;
}

}  // namespace

std::optional<UnfinishedSegment> unfinished_segment(const std::string& name) {
  const uint32_t pid = pid_of_run_name(name);
  if (pid == 0) return std::nullopt;
  const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  unsigned char hdr[kSegmentHeaderBytes];
  bool ours = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (st.st_size == 0) {
      ours = true;  // step 1: created, not sized yet
    } else if (st.st_size >= static_cast<off_t>(sizeof hdr) &&
               ::pread(fd, hdr, sizeof hdr, 0) == static_cast<ssize_t>(sizeof hdr)) {
      ours = is_partial_header(hdr, static_cast<uint64_t>(st.st_size), pid);
    }
  }
  ::close(fd);
  if (!ours) return std::nullopt;
  UnfinishedSegment u;
  u.creator_pid = pid;
  const uint64_t start =
      st.st_size == 0 ? 0 : field<uint64_t>(hdr, offsetof(SegmentHeader, creator_start_time));
  u.creator_alive = start != 0 ? process_start_time(pid) == start : started_before(pid, st.st_ctim);
  return u;
}

}  // namespace spanring
