// [STRACE] field encoding and truncation; see include/spanring/encode.h and
// shared/strace-format.md. The drainer runs this once per record, so it works on raw bytes with
// a 256-entry class table instead of per-byte branches on ranges.
#include <spanring/encode.h>

#include <array>

namespace spanring {
namespace {

// 0 = escape as %XX, 1 = copy as is. Built for names; attributes also copy ' ' and '='.
constexpr std::array<uint8_t, 256> make_copy_table(bool attrs) {
  std::array<uint8_t, 256> t{};
  for (int c = 0x20; c <= 0x7e; ++c) t[c] = 1;
  t['%'] = 0;
  t['['] = 0;
  t[']'] = 0;
  if (!attrs) {
    t[' '] = 0;
    t['='] = 0;
  }
  return t;
}
constexpr auto kNameCopy = make_copy_table(false);
constexpr auto kAttrsCopy = make_copy_table(true);
constexpr char kHex[] = "0123456789ABCDEF";

size_t encode(const char* in, size_t len, char* out, size_t cap,
              const std::array<uint8_t, 256>& copy) noexcept {
  size_t n = 0;
  size_t last_unit = 0;  // size of the last unit appended
  for (size_t i = 0; i < len; ++i) {
    const auto b = static_cast<uint8_t>(in[i]);
    if (b == 0) return n;  // input ends at the first NUL: everything fit
    const size_t unit = copy[b] ? 1 : 3;
    if (n + unit > cap) {
      // The input did not fit. At the cap, the whole last unit goes (never half an escape);
      // then `~` marks the cut, so a cut field is at most `cap` bytes and ends in `~`.
      if (n == cap) n -= last_unit;
      out[n++] = '~';
      return n;
    }
    if (unit == 1) {
      out[n] = static_cast<char>(b);
    } else {
      out[n] = '%';
      out[n + 1] = kHex[b >> 4];
      out[n + 2] = kHex[b & 0xf];
    }
    n += unit;
    last_unit = unit;
  }
  return n;
}

}  // namespace

size_t encode_name(const char* in, size_t len, char* out) noexcept {
  return encode(in, len, out, kNameCap, kNameCopy);
}

size_t encode_attrs(const char* in, size_t len, char* out) noexcept {
  return encode(in, len, out, kAttrsCap, kAttrsCopy);
}

bool is_device_attrs(std::string_view attrs) noexcept {
  size_t at = 0;
  while ((at = attrs.find("clk=dev", at)) != std::string_view::npos) {
    const bool starts = at == 0 || attrs[at - 1] == ' ';
    const bool ends = at + 7 == attrs.size() || attrs[at + 7] == ' ';
    if (starts && ends) return true;
    at += 7;
  }
  return false;
}

}  // namespace spanring
