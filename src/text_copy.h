// copy_measured: copies a NUL-terminated string of unknown length into a record's payload while
// measuring it, for the C ABI's text records (record_any in span.cpp): one pass over the bytes
// instead of strnlen followed by a copy.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

// The 16-bytes-at-a-time scan reads up to 15 bytes past a string's NUL (never into another
// page: see copy_measured). Sanitizers report such reads, so their builds take the byte-exact
// path (strnlen and a copy), which gives the same lengths and bytes.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SPANRING_TEXT_EXACT 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPANRING_TEXT_EXACT 1
#endif

namespace spanring {

// Bytes copy_measured may store at dst past the max bytes it keeps.
inline constexpr uint32_t kCopyMeasuredOvershoot = 15;

// Copies the string at `src` (null: none) to `dst` up to its NUL or `max` bytes, whichever
// comes first, and returns how many bytes that is (strnlen(src, max)); the bytes at
// dst[0, returned) are then src's. It may also store up to kCopyMeasuredOvershoot bytes past
// dst + max, and anything at dst[returned, max + 15): the caller's buffer must have that
// room, and whatever follows the returned bytes is the caller's to overwrite. Reads src only
// in pages that hold at least one byte of the string (a 16-byte load never crosses a page
// boundary; near one it goes byte by byte), so it never faults where strnlen would not.
// x86-64: SSE2, 16 bytes per step; elsewhere and in sanitizer builds: strnlen and memcpy.
__attribute__((always_inline)) inline uint32_t copy_measured(char* dst, const char* src,
                                                              uint32_t max) noexcept {
  if (src == nullptr) return 0;
#if defined(__x86_64__) && defined(__SSE2__) && !defined(SPANRING_TEXT_EXACT)
  constexpr uintptr_t kPage = 4096;
  // The common case: all the 16-byte steps up to `max` lie in src's page, so none needs the
  // page test (max is a constant here: the loop unrolls into straight code).
  const uint32_t steps = (max + 15) / 16;
  if (__builtin_expect((reinterpret_cast<uintptr_t>(src) & (kPage - 1)) <= kPage - 16 * steps,
                       1)) {
#pragma GCC unroll 16
    for (uint32_t k = 0; k < steps; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * k));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * k), v);
      const auto nul =
          static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())));
      if (nul != 0) {
        // An empty asm the count depends on: without it GCC computes the count of the first
        // step before its branch, on every string (3 instructions wasted when the NUL is later).
        // It emits nothing.
        uint32_t found = nul;
        __asm__ volatile("" : "+r"(found));
        const uint32_t n = 16 * k + static_cast<uint32_t>(__builtin_ctz(found));
        // Only the step that reaches max needs the bound (known per step once unrolled).
        if (16 * k + 16 <= max) return n;
        return n < max ? n : max;
      }
    }
    return max;
  }
  uint32_t n = 0;
  for (;;) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(src + n);
    if (__builtin_expect((at & (kPage - 1)) <= kPage - 16, 1)) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + n));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n), v);
      const auto nul =
          static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())));
      if (nul != 0) {
        n += static_cast<uint32_t>(__builtin_ctz(nul));
        return n < max ? n : max;
      }
      n += 16;
      if (n >= max) return max;
    } else {
      // Up to the page's end one byte at a time: the next page need not be mapped.
      const uint32_t end = n + static_cast<uint32_t>(kPage - (at & (kPage - 1)));
      for (; n < end; ++n) {
        if (n >= max) return max;
        const char c = src[n];
        if (c == '\0') return n;
        dst[n] = c;
      }
    }
  }
#else
  const auto n = static_cast<uint32_t>(strnlen(src, max));
  std::memcpy(dst, src, n);
  return n;
#endif
}

}  // namespace spanring
