// spanring::encode_name / encode_attrs (include/spanring/encode.h) against the golden table
// shared by every [STRACE] implementation (tests/golden/strace-fields.tsv, a copy of
// shared/golden/strace-fields.tsv), the spec's own examples, and a reference encoder written
// here from the text of shared/strace-format.md on random inputs.
#include "strace_parser.h"

#include <spanring/encode.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr size_t kNameCap = 64;
constexpr size_t kAttrsCap = 192;
// Bytes after the cap that must stay untouched: an encoder writing past its documented buffer
// size would corrupt its caller's stack.
constexpr size_t kGuard = 64;
constexpr char kGuardByte = '\x5a';

enum class Field { kName, kAttrs };

// Runs the library encoder into a guarded buffer; fails the test on a write past the cap.
std::string encode(Field field, const std::string& in) {
  const size_t cap = field == Field::kName ? kNameCap : kAttrsCap;
  std::vector<char> out(cap + kGuard, kGuardByte);
  const size_t n = field == Field::kName ? spanring::encode_name(in.data(), in.size(), out.data())
                                         : spanring::encode_attrs(in.data(), in.size(), out.data());
  REQUIRE_MESSAGE(n <= cap, "encoder returned ", n, " bytes, more than the cap ", cap);
  size_t first_overrun = cap;
  while (first_overrun < out.size() && out[first_overrun] == kGuardByte) ++first_overrun;
  REQUIRE_MESSAGE(first_overrun == out.size(), "encoder wrote byte ", first_overrun, " past its ",
                  cap, "-byte output");
  return std::string(out.data(), n);
}

// The spec, read literally: copy printable ASCII except % [ ] (and, in names, space and =);
// escape every other byte as %XX uppercase; stop at NUL; append whole units while they fit
// under the cap; on overflow drop the last unit if exactly at the cap, then append '~'.
std::string reference_encode(Field field, const std::string& in) {
  const bool name = field == Field::kName;
  const size_t cap = name ? kNameCap : kAttrsCap;
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  size_t last_unit = 0;
  for (const char ch : in) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == 0) break;
    const bool copy = b >= 0x20 && b <= 0x7e && b != '%' && b != '[' && b != ']' &&
                      !(name && (b == ' ' || b == '='));
    const std::string unit =
        copy ? std::string(1, static_cast<char>(b)) : std::string{'%', kHex[b >> 4], kHex[b & 15]};
    if (out.size() + unit.size() > cap) {
      if (out.size() == cap) out.resize(out.size() - last_unit);
      out += '~';
      return out;
    }
    out += unit;
    last_unit = unit.size();
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  REQUIRE_MESSAGE(hex.size() % 2 == 0, "odd-length hex in the golden file: ", hex);
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

struct GoldenRow {
  size_t line_no;
  Field field;
  std::string input;
  std::string expected;
};

std::string golden_path() {
  if (const char* p = std::getenv("SPANRING_GOLDEN_TSV"); p != nullptr && *p != '\0') return p;
#ifdef SPANRING_GOLDEN_TSV_DEFAULT
  return SPANRING_GOLDEN_TSV_DEFAULT;  // set by tests/meson.build, so the binary runs by hand
#else
  return {};
#endif
}

std::vector<GoldenRow> load_golden() {
  const std::string path = golden_path();
  REQUIRE_MESSAGE(!path.empty(), "SPANRING_GOLDEN_TSV is not set (tests/meson.build sets it)");
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open the golden file ", path);
  std::vector<GoldenRow> rows;
  std::string line;
  size_t line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    // Exactly three tab-separated fields; the expected field is taken byte for byte (it may be
    // empty, and is never trimmed).
    const size_t t1 = line.find('\t');
    const size_t t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    REQUIRE_MESSAGE((t2 != std::string::npos && line.find('\t', t2 + 1) == std::string::npos), path,
                    ":", line_no, ": not three tab-separated fields");
    const std::string kind = line.substr(0, t1);
    REQUIRE_MESSAGE((kind == "name" || kind == "attrs"), path, ":", line_no, ": kind '", kind, "'");
    rows.push_back({line_no, kind == "name" ? Field::kName : Field::kAttrs,
                    from_hex(line.substr(t1 + 1, t2 - t1 - 1)), line.substr(t2 + 1)});
  }
  return rows;
}

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("every row of the golden table encodes to exactly its expected field") {
  const std::vector<GoldenRow> rows = load_golden();
  // A missing or truncated copy must not pass: the table has well over 100 rows.
  REQUIRE_MESSAGE(rows.size() > 100, "only ", rows.size(), " golden rows read from ",
                  golden_path());
  size_t names = 0;
  size_t attrs = 0;
  for (const GoldenRow& row : rows) {
    CAPTURE(row.line_no);
    const std::string got = encode(row.field, row.input);
    CHECK_MESSAGE(got == row.expected, "golden line ", row.line_no, " (",
                  std::string(row.field == Field::kName ? "name" : "attrs"), " of input '",
                  spanring_test::printable(row.input), "'): got '", spanring_test::printable(got),
                  "', expected '", spanring_test::printable(row.expected), "'");
    (row.field == Field::kName ? names : attrs) += 1;
  }
  CHECK(names > 0);
  CHECK(attrs > 0);
}

TEST_CASE("the spec's attrs truncation example gives %0A, 186 x and ~ (190 bytes)") {
  const std::string in = "\n" + std::string(186, 'x') + "\ny";
  const std::string got = encode(Field::kAttrs, in);
  CHECK(got == "%0A" + std::string(186, 'x') + "~");
  CHECK(got.size() == 190);
}

TEST_CASE("an empty name encodes to zero bytes") {
  CHECK(encode(Field::kName, "").empty());
  CHECK(encode(Field::kAttrs, "").empty());
}

TEST_CASE("input stops at the first NUL byte") {
  CHECK(encode(Field::kName, std::string("ab\0cd", 5)) == "ab");
  CHECK(encode(Field::kAttrs, std::string("k=v\0x=y", 7)) == "k=v");
  CHECK(encode(Field::kName, std::string("\0abc", 4)).empty());
  // A NUL right after a full-cap output means the input ended: no cut, no '~'.
  CHECK(encode(Field::kName, std::string(64, 'n') + std::string("\0z", 2)) == std::string(64, 'n'));
}

TEST_CASE("the spec's escape examples hold for names and attrs") {
  CHECK(encode(Field::kName, "a\nb\tc%d[e]f g=h\xc3\xa9") == "a%0Ab%09c%25d%5Be%5Df%20g%3Dh%C3%A9");
  CHECK(encode(Field::kAttrs, "a\nb\tc%d[e]f g=h\xc3\xa9") == "a%0Ab%09c%25d%5Be%5Df g=h%C3%A9");
  CHECK(encode(Field::kName, ":.~\"/") == ":.~\"/");
  CHECK(encode(Field::kAttrs, "k=:.~\"/") == "k=:.~\"/");
}

TEST_CASE("names are cut at 64 encoded bytes with whole escapes and a final ~") {
  CHECK(encode(Field::kName, std::string(64, 'x')) == std::string(64, 'x'));
  CHECK(encode(Field::kName, std::string(65, 'x')) == std::string(63, 'x') + "~");
  // 62 x then an escape: 62 + 3 > 64, so the escape does not fit; output is under the cap.
  CHECK(encode(Field::kName, std::string(62, 'x') + "\n") == std::string(62, 'x') + "~");
  // 61 x + %0A is exactly 64 and the input ends there: no cut.
  CHECK(encode(Field::kName, std::string(61, 'x') + "\n") == std::string(61, 'x') + "%0A");
  // ...but with one more byte the output is at the cap: the whole %0A goes, then ~.
  CHECK(encode(Field::kName, std::string(61, 'x') + "\ny") == std::string(61, 'x') + "~");
}

TEST_CASE("random inputs encode exactly as the spec's reference encoder does") {
  // A fixed seed: the test is deterministic; the mix favours bytes that need escaping, NULs and
  // lengths around both caps.
  std::mt19937_64 rng(0x5ba7215eedULL);
  const char kInteresting[] = {' ',    '=',    '%',    '[', ']', '~', '\n', '\t',
                               '\x7f', '\x80', '\xff', 'a', 'z', '0', ':',  '.'};
  for (int i = 0; i < 20000; ++i) {
    const size_t len = rng() % 260;
    std::string in(len, '\0');
    for (char& c : in) {
      const uint64_t r = rng() % 100;
      if (r < 50) {
        c = static_cast<char>('a' + rng() % 26);
      } else if (r < 85) {
        c = kInteresting[rng() % sizeof kInteresting];
      } else if (r < 86) {
        c = '\0';
      } else {
        c = static_cast<char>(rng() % 256);
      }
    }
    for (Field field : {Field::kName, Field::kAttrs}) {
      const std::string got = encode(field, in);
      const std::string want = reference_encode(field, in);
      if (got != want) {
        FAIL_CHECK(std::string(field == Field::kName ? "name" : "attrs"), " of '",
                   spanring_test::printable(in, 300), "': got '", spanring_test::printable(got),
                   "', the spec says '", spanring_test::printable(want), "'");
        return;  // one counterexample is enough
      }
      // Whatever it encodes is a valid field for the strict parser (except the empty name,
      // which the caller must not emit).
      if (!(field == Field::kName && got.empty())) {
        const std::string err = field == Field::kName ? spanring_test::check_name_field(got)
                                                      : spanring_test::check_attrs_field(got);
        // Raw attrs may hold double or edge spaces, which the line grammar rejects; only the
        // charset matters here.
        if (!err.empty() && err.find("space") == std::string::npos) {
          FAIL_CHECK("encoded field '", spanring_test::printable(got), "' is invalid: ", err);
          return;
        }
      }
    }
  }
}

TEST_CASE("one byte of every value at every position of a plain field encodes as the spec says") {
  // The encoder checks 16 bytes at a time before copying a plain field whole: a single byte
  // that needs escaping (or ends the input) must be seen wherever it sits in or after a block.
  for (size_t len : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{41}, size_t{64},
                     size_t{65}, size_t{192}, size_t{193}}) {
    for (int b = 0; b < 256; ++b) {
      for (size_t pos = 0; pos < len; pos += (len > 48 ? 7 : 1)) {
        std::string in(len, 'q');
        in[pos] = static_cast<char>(b);
        for (Field field : {Field::kName, Field::kAttrs}) {
          const std::string got = encode(field, in);
          const std::string want = reference_encode(field, in);
          if (got != want) {
            FAIL_CHECK("byte ", b, " at ", pos, " of ", len, " (",
                       field == Field::kName ? "name" : "attrs", "): got '",
                       spanring_test::printable(got), "', the spec says '",
                       spanring_test::printable(want), "'");
            return;
          }
        }
      }
    }
  }
}

}  // TEST_SUITE("unit")
