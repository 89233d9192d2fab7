// The path spanring replaces, as a baseline: format one span as a [STRACE] line
// (shared/strace-format.md, prefix included) in the caller and write(2) it under a std::mutex.
// Used by bench_record's write_strace arms and by the write(2) build of the l3 demo
// (strace_write_lib.cpp). snprintf, as the host runtimes' loggers format; the name and the
// attributes are encoded with spanring's own encoder (the same bytes the drainer writes).
#pragma once

#include <spanring/encode.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <unistd.h>

namespace bench {

// Room for the longest line: the spec keeps it under 512 bytes.
inline constexpr size_t kStraceLineMax = 512;

// One [STRACE] line at `out` (kStraceLineMax bytes). `end_ns` is the prefix's mono_ns (when the
// line is written), `self` the pthread_self() of the emitting thread (the prefix's T0x...).
inline size_t format_strace_line(char* out, uint32_t pid, uint32_t tid, unsigned long self,
                                 uint64_t inv, uint64_t hid, uint32_t depth, const char* name,
                                 size_t name_len, uint64_t ts, uint64_t dur, const char* attrs,
                                 size_t attrs_len, uint64_t end_ns) noexcept {
  char name_enc[spanring::kNameCap];
  char attrs_enc[spanring::kAttrsCap];
  const size_t nl = spanring::encode_name(name, name_len, name_enc);
  const size_t al = attrs != nullptr ? spanring::encode_attrs(attrs, attrs_len, attrs_enc) : 0;
  const int n = std::snprintf(
      out, kStraceLineMax,
      "[mono_ns=%llu][T0x%lx][TIMING] emit_host_span: [STRACE] v=1 pid=%u tid=%u inv=%llu "
      "hid=%llx depth=%u name=%.*s ts=%llu dur=%llu %.*s\n",
      static_cast<unsigned long long>(end_ns), self, pid, tid,
      static_cast<unsigned long long>(inv), static_cast<unsigned long long>(hid), depth,
      static_cast<int>(nl), name_enc, static_cast<unsigned long long>(ts),
      static_cast<unsigned long long>(dur), static_cast<int>(al), attrs_enc);
  return n < 0 ? 0 : (static_cast<size_t>(n) < kStraceLineMax ? static_cast<size_t>(n)
                                                               : kStraceLineMax - 1);
}

// write(2) of one whole line under the logger's mutex; short writes are completed.
inline void locked_write(std::mutex& mu, int fd, const char* line, size_t len) noexcept {
  std::lock_guard<std::mutex> lock(mu);
  while (len > 0) {
    const ssize_t w = ::write(fd, line, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    line += w;
    len -= static_cast<size_t>(w);
  }
}

}  // namespace bench
