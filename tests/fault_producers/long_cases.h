// The over-long and odd inputs of long_emitter.cpp and test_mp_fault_long_input.cpp, in one
// place so that the test knows exactly which raw bytes the emitter passed. The test computes what the
// output must be from the [STRACE] spec (fault::spec_encode), never from src/encode.cpp.
//
// Each case is emitted through every producer API it applies to, in this order:
//   span  spanring::Span with the name, then one attr() call per token;
//   emit  spanring::emit(name, ts, dur, the tokens joined with single spaces);
//   c     spanring_emit with the same name and joined attributes.
// `raw_attrs` (when set) is passed as is through emit and c, and the span API is skipped (it
// cannot produce text without `=`). A name holding a NUL ends there for every API (they take a
// NUL-terminated name); an attribute value holding a NUL is kept whole by Span::attr, and the
// input then ends at the NUL for the drainer, as it does for the NUL-terminated APIs.
// The tiny-ring records (tiny_record) are built from their sequence number alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace long_cases {

struct Token {
  enum Kind { kText, kI64, kU64 } kind = kText;
  std::string key;
  std::string text;  // kText
  int64_t i = 0;     // kI64
  uint64_t u = 0;    // kU64
  // The raw text Span::attr appends for this token: key=value.
  std::string raw() const {
    switch (kind) {
      case kI64: return key + "=" + std::to_string(i);
      case kU64: return key + "=" + std::to_string(u);
      case kText: break;
    }
    return key + "=" + text;
  }
};

struct Case {
  std::string id;
  std::string name;                      // raw; may hold NUL
  bool null_name = false;                // the C API passes NULL (span/emit skipped)
  std::vector<Token> tokens;
  std::optional<std::string> raw_attrs;  // emit/c only
  bool null_attrs = false;               // the C API passes attributes = NULL
};

inline Token text(std::string key, std::string value) {
  Token t;
  t.key = std::move(key);
  t.text = std::move(value);
  return t;
}

// The attributes as one raw string: raw_attrs, or the tokens joined with single spaces (what
// Span::attr builds, and what emit/c are given).
inline std::string joined_attrs(const Case& c) {
  if (c.raw_attrs) return *c.raw_attrs;
  std::string s;
  for (const Token& t : c.tokens) {
    if (!s.empty()) s += ' ';
    s += t.raw();
  }
  return s;
}

// Which APIs emit the case, in order.
inline std::vector<std::string> apis_of(const Case& c) {
  if (c.null_name) return {"c"};
  if (c.raw_attrs || c.null_attrs) return {"emit", "c"};
  return {"span", "emit", "c"};
}

inline std::string bytes(int from, int to) {  // bytes from..to inclusive
  std::string s;
  for (int b = from; b <= to; ++b) s += static_cast<char>(b);
  return s;
}

inline std::vector<Case> cases() {
  std::vector<Case> v;
  const auto add = [&v](std::string id, std::string name, std::vector<Token> tokens = {}) {
    Case c;
    c.id = std::move(id);
    c.name = std::move(name);
    c.tokens = std::move(tokens);
    v.push_back(std::move(c));
  };
  const auto add_raw = [&v](std::string id, std::string name, std::string raw) {
    Case c;
    c.id = std::move(id);
    c.name = std::move(name);
    c.raw_attrs = std::move(raw);
    v.push_back(std::move(c));
  };

  add("plain", "long.plain", {text("a", "1")});
  // Names around the 64-byte cap.
  add("name_1mib", "long." + std::string(1 << 20, 'n'));
  add("name_64", std::string(64, 'a'));
  add("name_65", std::string(65, 'a'));
  add("name_62_escape", std::string(62, 'a') + "\n");   // the escape does not fit: cut
  add("name_61_escape", std::string(61, 'a') + "\n");   // exactly 64, input ends: whole
  add("name_61_escape_more", std::string(61, 'a') + "\nb");  // at the cap, went on
  add("name_nul", std::string("long.nul\0hidden", 15));
  add("name_space_eq", "long.a b=c[d]%e");
  add("name_all_bytes", bytes(1, 255));
  // Every byte value in a name, 16 at a time (no cut: 1 + 48 + 1 <= 64).
  for (int from = 1; from <= 255; from += 16) {
    add("name_bytes_" + std::to_string(from), "w" + bytes(from, std::min(from + 15, 255)) + "z");
  }
  // Attributes.
  {
    std::vector<Token> many;
    for (int i = 0; i < 1000; ++i) {
      Token t;
      t.kind = Token::kI64;
      t.key = "k" + std::to_string(i);
      t.i = i;
      many.push_back(t);
    }
    add("attrs_1000_tokens", "long.attrs.many", many);
  }
  add("attrs_1mib_value", "long.attrs.big", {text("big", std::string(1 << 20, 'v'))});
  {
    std::string huge;  // 1 MiB of k=v tokens
    while (huge.size() < (1u << 20)) huge += "k" + std::to_string(huge.size() % 997) + "=v ";
    huge.pop_back();
    add_raw("attrs_1mib_string", "long.attrs.huge", huge);
  }
  // The spec's worked example ("Truncation"): encodes to %0A + 186 x + ~.
  add_raw("attrs_spec_example", "long.attrs.spec", "\n" + std::string(186, 'x') + "\ny");
  add("attrs_all_bytes", "long.attrs.all", {text("v", bytes(1, 255))});
  // Every byte value in attributes, 60 at a time, wrapped in a and z (no cut: 4 + 180 <= 192).
  for (int from = 1; from <= 255; from += 60) {
    add("attrs_bytes_" + std::to_string(from), "long.attrs.bytes",
        {text("v", "a" + bytes(from, std::min(from + 59, 255)) + "z")});
  }
  add("attrs_192", "long.attrs.192", {text("k", std::string(190, 'x'))});
  add("attrs_193", "long.attrs.193", {text("k", std::string(191, 'x'))});
  add("attrs_escape_at_cap", "long.attrs.cap", {text("k", std::string(187, 'x') + "\n")});
  add("attrs_escape_at_cap_more", "long.attrs.cap", {text("k", std::string(187, 'x') + "\ny")});
  add("attrs_escape_over_cap", "long.attrs.cap", {text("k", std::string(188, 'x') + "\n")});
  {
    Token neg;
    neg.kind = Token::kI64;
    neg.key = "n";
    neg.i = -5;
    Token max;
    max.kind = Token::kU64;
    max.key = "u";
    max.u = UINT64_MAX;
    Token min;
    min.kind = Token::kI64;
    min.key = "m";
    min.i = INT64_MIN;
    Token zero;
    zero.kind = Token::kU64;
    zero.key = "z";
    add("attrs_integers", "long.attrs.int", {neg, max, min, zero});
  }
  add("attrs_value_nul", "long.attrs.nul", {text("k", std::string("ab\0cd", 5)), text("x", "1")});
  {
    Case c;
    c.id = "attrs_null";
    c.name = "long.attrs.null";
    c.null_attrs = true;
    v.push_back(c);
  }
  // Invalid names: the record is dropped with reason=invalid.
  add("name_empty", "");
  add("name_starts_nul", std::string("\0abc", 4));
  {
    Case c;
    c.id = "name_null";
    c.null_name = true;
    v.push_back(c);
  }
  return v;
}

// ---- the tiny ring

// Slots a record with these raw lengths takes (the producer keeps at most 65 + 193 raw bytes;
// segment_layout.h record_slots()).
inline uint32_t slots_for(size_t name_len, size_t attrs_len) {
  const size_t payload = std::min<size_t>(name_len, 65) + std::min<size_t>(attrs_len, 193);
  return payload <= 12 ? 1 : 1 + static_cast<uint32_t>((payload - 12 + 63) / 64);
}

// The slot count of record s: mostly 5-slot records, with smaller ones in between, so that a
// 5-slot record often meets a ring with 1 to 4 free slots.
inline uint32_t tiny_slots(uint64_t s) {
  static constexpr uint32_t kCycle[] = {5, 1, 5, 2, 5, 3, 4, 5, 1, 1, 5, 2, 5, 5, 3};
  return kCycle[s % (sizeof kCycle / sizeof kCycle[0])];
}

struct TinyRecord {
  std::string name;
  std::string attrs;
};

// Record s: attrs start with `s=<s>`; padding (with bytes that need escaping) brings it to the
// slot count tiny_slots(s). The 5-slot records are cut in both fields.
inline TinyRecord tiny_record(uint64_t s) {
  const uint32_t want = tiny_slots(s);
  TinyRecord r;
  r.attrs = "s=" + std::to_string(s);
  if (want == 1) {
    r.name = "t1";
    return r;
  }
  if (want == 5) {
    r.name = "tiny.five." + std::string(60, 'n');  // 70 raw bytes: cut
    r.attrs += " p=";
    while (r.attrs.size() < 250) r.attrs += "q%\x01";
    return r;
  }
  r.name = "tiny.s" + std::to_string(want);
  const size_t payload = 12 + (want - 1) * 64;  // the most this slot count holds
  r.attrs += " p=";
  while (r.name.size() + r.attrs.size() < payload) r.attrs += (r.attrs.size() % 3 == 0 ? '%' : 'q');
  return r;
}

}  // namespace long_cases
