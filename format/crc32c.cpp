#include "format/crc32c.h"

#include <boost/crc.hpp>

#include <cstring>

namespace spanring {

// Boost.CRC computes it; where the CPU has SSE4.2, its crc32 instruction does the same sum ~20x
// faster (0.13 vs 2.7 ms per MiB measured on the CI machine). The tests check one against the
// other and against the standard check value.

namespace {

using BoostCrc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

#if defined(__x86_64__)
// crc: the running (pre-inverted) register; returns it.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const unsigned char* p,
                                                        size_t n) noexcept {
  uint64_t c = crc;
  // Four words per turn: the loop's own instructions (pointer, count, branch) then cost a
  // quarter as much per byte; one word per turn was ~50 instructions per demo record.
  while (n >= 32) {
    uint64_t v[4];
    std::memcpy(v, p, 32);
    c = __builtin_ia32_crc32di(c, v[0]);
    c = __builtin_ia32_crc32di(c, v[1]);
    c = __builtin_ia32_crc32di(c, v[2]);
    c = __builtin_ia32_crc32di(c, v[3]);
    p += 32;
    n -= 32;
  }
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
bool have_sse42() noexcept {
  static const bool yes = [] {
    __builtin_cpu_init();  // may run before the library's own constructors have
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return yes;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) noexcept {
#if defined(__x86_64__)
  if (have_sse42()) return ~crc32c_sse42(~crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_portable(data, n, crc);
}

uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc) noexcept {
  // Boost keeps its register bit-reversed: continuing from a finished CRC starts from the
  // reversal of its inverse.
  uint32_t reg = ~crc, rev = 0;
  for (int b = 0; b < 32; ++b) rev |= ((reg >> b) & 1u) << (31 - b);
  BoostCrc32c c(rev);
  c.process_bytes(data, n);
  return c.checksum();
}

}  // namespace spanring
