// TextSink and the [STRACE] encoders (format/text_sink.h, format/strace_format.h), in process:
// the exact line of every event, the encoding and cutting of names, both spellings of a span
// giving one line, and every line reading back through the strict text reader
// (format/text_reader.h) as the event it was written from.
#include "binary/binary_util.h"
#include "format/event_spelling.h"
#include "format/text_reader.h"
#include "format/text_sink.h"

#include <spanring/encode.h>
#include <spanring/segment_layout.h>

#include <doctest/doctest.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace spanring;
using binary_test::make_record;

namespace {

template <class Event>
std::string line_of(const Event& e, size_t (Sink::*method)(char*, const Event&) noexcept) {
  TextSink sink;
  char out[kMaxLineBytes] = {};
  return std::string(out, (sink.*method)(out, e));
}

std::string span_line(const SpanEvent& e) { return line_of(e, &Sink::span); }

std::string unfinished_name(std::string_view raw, bool cut) {
  char out[kNameCap];
  return std::string(out, encode_unfinished_name(out, raw, cut));
}

// Every event of a text, with its spelling, as comparable strings.
struct Lines final : EventVisitor {
  std::vector<std::string> got;
  EventSpelling spelling;
  void process(const ProcessEvent& e) override {
    got.push_back("process " + std::to_string(e.pid) + " " + std::to_string(e.mono_ns) + " " +
                  std::to_string(e.wall_ns));
  }
  void span(const SpanEvent& e) override {
    const EventSpelling::Span s = spelling.span(e);
    got.push_back("span " + std::to_string(e.pid) + " " + std::to_string(e.tid) + " " +
                  std::to_string(e.ts_ns) + " " + std::to_string(e.dur_ns) + " " +
                  std::to_string(e.inv) + " " + std::to_string(e.hid) + " " +
                  std::to_string(e.depth) + " " + std::string(s.name) + " [" +
                  std::string(s.attrs) + "] " + (s.device ? "dev" : "host"));
  }
  void drops(const DropsEvent& e) override {
    got.push_back("drops " + std::to_string(e.dropped) + " " + drop_reason_name(e.reason));
  }
  void unfinished(const UnfinishedEvent& e) override {
    got.push_back("unfinished " + std::string(spelling.unfinished_name(e)));
  }
  void undescribed(const UndescribedEvent& e) override {
    got.push_back("undescribed " + std::to_string(e.count));
  }
};

// The attribute copy paths (set_wide_attrs_copy): the 16-byte one, and the 32-byte one (AVX2)
// where the CPU has it. A test case that calls this runs once per path (doctest subcases: the
// code after them runs again for each); the process's default is restored by the next caller
// or at the end of the case (AttrsPath's destructor).
struct AttrsPath {
  bool wide = false;
  ~AttrsPath() { set_wide_attrs_copy(true); }
};
#define EACH_ATTRS_PATH(path)                                          \
  AttrsPath path;                                                      \
  SUBCASE("16-byte attribute copies") { path.wide = false; }           \
  SUBCASE("32-byte attribute copies (AVX2)") { path.wide = true; }     \
  if (set_wide_attrs_copy(path.wide) != path.wide) {                   \
    MESSAGE("no AVX2 on this CPU: the 32-byte path is not tested");    \
    return;                                                            \
  }

}  // namespace

TEST_SUITE("unit") {

TEST_CASE("a span record is one [STRACE] line with the end time in its prefix") {
  const RecordCopy rec = make_record(7, 1000, 234, 3, 0xab, 2, "chip.run", "k=v clk=dev");
  CHECK(span_line(SpanEvent::of(10, 11, rec)) ==
        "[mono_ns=1234][T0xb][TIMING] emit_host_span: [STRACE] v=1 pid=10 tid=11 inv=3 hid=ab "
        "depth=2 name=chip.run ts=1000 dur=234 k=v clk=dev\n");
  // No attributes: the separating space stays, the line ends `dur=<n> `.
  const RecordCopy bare = make_record(0, 5, 0, 0, 0, 0, "x", "");
  CHECK(span_line(SpanEvent::of(1, 1, bare)) ==
        "[mono_ns=5][T0x1][TIMING] emit_host_span: [STRACE] v=1 pid=1 tid=1 inv=0 hid=0 depth=0 "
        "name=x ts=5 dur=0 \n");
}

TEST_CASE("raw names and attributes are encoded; a spelled span is written as spelled") {
  const RecordCopy rec = make_record(0, 1, 1, 0, 0, 0, "a b[=]%", "k=v w\tx");
  const std::string from_raw = span_line(SpanEvent::of(1, 2, rec));
  CHECK(from_raw.find(" name=a%20b%5B%3D%5D%25 ") != std::string::npos);
  CHECK(from_raw.find(" dur=1 k=v w%09x\n") != std::string::npos);

  // The same span as the text reader delivers it (no record, its encoded spelling).
  EventSpelling spelling;
  const SpanEvent raw = SpanEvent::of(1, 2, rec);
  const EventSpelling::Span s = spelling.span(raw);
  SpanEvent spelled = raw;
  spelled.record = nullptr;
  spelled.name = s.name;
  spelled.attrs = s.attrs;
  CHECK(span_line(spelled) == from_raw);
}

TEST_CASE("the longest span line fits max_event_bytes") {
  TextSink sink;
  // Every raw byte escaped (3 encoded bytes), past both caps: the encoder cuts at the cap.
  const RecordCopy rec = make_record(UINT64_MAX, UINT64_MAX / 2, UINT64_MAX / 2, UINT64_MAX,
                                     UINT64_MAX, UINT32_MAX, std::string(kNameRawMax, '['),
                                     std::string(kAttrsRawMax, ']'));
  const std::string l = span_line(SpanEvent::of(UINT32_MAX, UINT32_MAX, rec));
  CHECK(l.size() <= sink.max_event_bytes());
  CHECK(l.back() == '\n');
  CHECK(l.find("name=%5B") != std::string::npos);
}

TEST_CASE("anchor, drops and undescribed lines; threads have no line") {
  CHECK(line_of(ProcessEvent{42, 43, 100, 200, std::string_view("app\0-x", 6)},
                &Sink::process) ==
        "[mono_ns=100][T0x2b][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=42 mono_ns=100 "
        "wall_ns=200\n");
  CHECK(line_of(ThreadEvent{42, 43, "worker"}, &Sink::thread).empty());
  CHECK(line_of(DropsEvent{1, 2, 5, 10, 14, DropReason::kRingFull}, &Sink::drops) ==
        "[SPANRING_DROPS] v=1 pid=1 tid=2 dropped=5 first_seq=10 last_seq=14 reason=ring_full\n");
  const std::pair<DropReason, const char*> reasons[] = {
      {DropReason::kRingFull, "ring_full"}, {DropReason::kInvalid, "invalid"},
      {DropReason::kNoRing, "no_ring"},     {DropReason::kCorrupt, "corrupt"},
      {DropReason::kVfork, "vfork"},        {DropReason::kReentrant, "reentrant"}};
  for (const auto& [reason, name] : reasons) {
    const std::string l = line_of(DropsEvent{0, 0, 1, 0, 0, reason}, &Sink::drops);
    const std::string tail = " reason=" + std::string(name) + "\n";
    CHECK(l.substr(l.size() - tail.size()) == tail);
  }
  CHECK(line_of(UndescribedEvent{1, 2, 3}, &Sink::undescribed) ==
        "[SPANRING_UNFINISHED] v=1 pid=1 tid=2 undescribed=3 reason=owner_died_deeper_than_" +
            std::to_string(kOpenSpanMax) + "\n");
}

TEST_CASE("an unfinished span's name: encoded, cut with ~ at the cap, %3F when none") {
  CHECK(line_of(UnfinishedEvent{1, 2, 9, 0, 77, "chip.run", false, {}}, &Sink::unfinished) ==
        "[SPANRING_UNFINISHED] v=1 pid=1 tid=2 inv=9 depth=0 name=chip.run ts=77 "
        "reason=owner_died\n");
  CHECK(unfinished_name("a b", false) == "a%20b");
  CHECK(unfinished_name("abc", true) == "abc~");     // the ring's copy stopped, the name went on
  CHECK(unfinished_name("", false) == "%3F");
  CHECK(unfinished_name("", true) == "~");
  CHECK(unfinished_name(std::string_view("ab\0cd", 5), false) == "ab");  // NUL ends the name
  // 64 one-byte units fill the cap; the 65th does not fit: the last unit gives way to `~`.
  CHECK(unfinished_name(std::string(70, 'a'), false) == std::string(63, 'a') + "~");
  // 21 three-byte units make 63 bytes; the 22nd does not fit: `~` fills the 64th byte.
  std::string escaped;
  for (int i = 0; i < 21; ++i) escaped += "%5B";
  CHECK(unfinished_name(std::string(30, '['), false) == escaped + "~");
  // A spelled name (from text) is written as it stands.
  CHECK(line_of(UnfinishedEvent{1, 2, 9, 0, 77, {}, false, "x~"}, &Sink::unfinished)
            .find(" name=x~ ") != std::string::npos);
}

TEST_CASE("every line TextSink writes reads back as the event it was written from") {
  const RecordCopy host = make_record(0, 1000, 50, 1, 0x9f, 0, "l3 run", "n=1 s=a%b");
  const RecordCopy dev = make_record(1, 20, 5, 1, 0, 1, "chip.dev", "clk=dev q=2");
  TextSink sink;
  std::string text;
  char out[kMaxLineBytes];
  text.append(out, sink.process(out, ProcessEvent{4200, 4200, 900, 123456, "app"}));
  text.append(out, sink.thread(out, ThreadEvent{4200, 4201, "w"}));
  text.append(out, sink.span(out, SpanEvent::of(4200, 4201, host)));
  text.append(out, sink.span(out, SpanEvent::of(4200, 4201, dev)));
  text.append(out, sink.drops(out, DropsEvent{4200, 4201, 2, 2, 3, DropReason::kVfork}));
  text.append(out, sink.unfinished(out, UnfinishedEvent{4200, 4201, 1, 0, 1500, "", true, {}}));
  text.append(out, sink.undescribed(out, UndescribedEvent{4200, 4201, 4}));

  TraceInput in = TraceInput::memory(text, "text");
  Lines lines;
  const ReadResult r = read_strace_text(in, lines);
  INFO(r.message);
  CHECK(r.status == ReadResult::Status::kComplete);
  CHECK(r.events == 6);  // the thread event has no line
  const std::vector<std::string> want = {
      "process 4200 900 123456",
      "span 4200 4201 1000 50 1 159 0 l3%20run [n=1 s=a%25b] host",
      "span 4200 4201 20 5 1 0 1 chip.dev [clk=dev q=2] dev",
      "drops 2 vfork",
      "unfinished ~",
      "undescribed 4",
  };
  CHECK(lines.got == want);
}

}  // TEST_SUITE("unit")

TEST_CASE("a TextSink keeps the last owner's part of the line: the same line for any owner order") {
  // One sink, owners alternating and repeating, at the widest pid/tid too: each line must be
  // the one the stateless format_span writes.
  TextSink sink;
  const RecordCopy rec = make_record(1, 1000, 20, 7, 0xabc, 2, "owner.part", "k=1 v=2");
  const uint32_t owners[][2] = {{10, 10},         {10, 11},         {10, 11},
                                {4294967295u, 4294967295u}, {1, 4294967295u}, {10, 10},
                                {0, 0},           {123456, 7},      {123456, 7}};
  uint64_t ts = 1000;
  for (const auto& o : owners) {
    SpanEvent e = SpanEvent::of(o[0], o[1], rec);
    e.ts_ns = ts;
    ts = ts * 7 + 13;  // every length of end time
    char cached[kMaxLineBytes];
    char plain[kMaxLineBytes];
    const size_t n = sink.span(cached, e);
    CHECK(std::string(cached, n) == std::string(plain, format_span(plain, e)));
  }
}

TEST_CASE("a byte that needs escaping is found at every position 0..47 of a name and attributes") {
  // TextSink copies a field that needs no escaping 16 bytes at a time (strace_format.cpp,
  // copy_plain): every byte value at every position of the first three vectors, in fields of
  // every length up to 48, must give the line encode_name/encode_attrs (test_encode checks them
  // against the spec) spell. Garbage after the field in the record must not matter either.
  EACH_ATTRS_PATH(path);
  TextSink sink;
  for (size_t len = 1; len <= 48; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (int b = 0; b < 256; ++b) {
        std::string field(len, 'q');
        field[pos] = static_cast<char>(b);
        if (b == 0 && pos == 0) continue;  // an empty name: never a record
        RecordCopy rec = make_record(0, 1, 1, 0, 0, 0, field, field);
        // Bytes after the attributes: one that would need escaping, read with the last vector.
        rec.payload[rec.header.name_len + rec.header.attrs_len] = '%';
        char line[kMaxLineBytes];
        const std::string got(line, sink.span(line, SpanEvent::of(1, 2, rec)));
        char name[kNameCap];
        char attrs[kAttrsCap];
        const std::string want =
            "[mono_ns=2][T0x2][TIMING] emit_host_span: [STRACE] v=1 pid=1 tid=2 inv=0 hid=0 "
            "depth=0 name=" +
            std::string(name, encode_name(field.data(), field.size(), name)) + " ts=1 dur=1 " +
            std::string(attrs, encode_attrs(field.data(), field.size(), attrs)) + "\n";
        if (got != want) {
          FAIL_CHECK("byte ", b, " at ", pos, " of ", len, ": got '", got, "', want '", want, "'");
          return;
        }
      }
    }
  }
}

TEST_CASE("attribute text of 33..192 bytes: a byte to escape is found at every position") {
  // Past 32 bytes, attribute text is checked and copied by the 32-byte path (AVX2), whose last
  // vector ends at the field's end and overlaps the one before it; the 16-byte path takes the
  // same fields. At every position of every length, the bytes at the edges of the copied
  // classes must give encode_attrs' text, and garbage after the field must not matter.
  EACH_ATTRS_PATH(path);
  TextSink sink;
  const unsigned char edges[] = {0x00, 0x1f, 0x20, 0x24, 0x25, 0x26, 0x5a, 0x5b, 0x5c,
                                 0x5d, 0x5e, 0x7e, 0x7f, 0x80, 0xdf, 0xe0, 0xff};
  for (size_t len = 33; len <= kAttrsCap; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (const unsigned char b : edges) {
        std::string attrs(len, 'q');
        attrs[pos] = static_cast<char>(b);
        RecordCopy rec = make_record(0, 1, 1, 0, 0, 0, "n", attrs);
        rec.payload[rec.header.name_len + rec.header.attrs_len] = '%';
        char line[kMaxLineBytes];
        const std::string got(line, sink.span(line, SpanEvent::of(1, 2, rec)));
        char text[kAttrsCap];
        const std::string want =
            "[mono_ns=2][T0x2][TIMING] emit_host_span: [STRACE] v=1 pid=1 tid=2 inv=0 hid=0 "
            "depth=0 name=n ts=1 dur=1 " +
            std::string(text, encode_attrs(attrs.data(), attrs.size(), text)) + "\n";
        if (got != want) {
          FAIL_CHECK("byte ", int{b}, " at ", pos, " of ", len, ": got '", got, "', want '",
                     want, "'");
          return;
        }
      }
    }
  }
}

TEST_CASE("span_record (the text drainer's path) writes span()'s line and keeps the same state") {
  // TextSink::span_record formats a drained record without building its SpanEvent. Lines from
  // it, interleaved with span() on the same sink (both update the owner, time and (inv, hid)
  // caches), must each be the stateless line of SpanEvent::of(pid, tid, rec): owners with
  // pid != tid, changing and repeating, times of every length, names and attributes with and
  // without bytes to escape.
  TextSink sink;
  std::mt19937_64 rng(0x5ba2ec07);
  const char* const names[] = {"chip.run", "a b", "x=y", "%pct", "n\x01", "q[1]",
                               "a.long.name.of.more.than.sixteen.bytes"};
  const char* const attrs[] = {"", "k=1", "k=1 v=22", "s=a]b", "t=\x7f", "u=%41 w=[x]"};
  const uint32_t owners[][2] = {{10, 11}, {10, 12}, {11, 10}, {4294967295u, 1}, {7, 7}};
  uint64_t ts = 2'022'531'972'882;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t r = rng();
    if (r % 11 == 0) ts = rng() >> (rng() % 64);
    else ts += rng() % 200'000'000;
    const uint64_t dur = r % 5 == 0 ? rng() >> (rng() % 64) : rng() % 100'000;
    const uint64_t inv = r % 3 == 0 ? rng() >> (rng() % 64) : (r >> 8) % 3;
    const uint64_t hid = (r >> 12) % 2 * 0x9f3c2a1b5d7e6f01ull;
    const RecordCopy rec =
        make_record(1, ts, dur, inv, hid, static_cast<uint32_t>((r >> 16) % 12),
                    names[(r >> 20) % std::size(names)], attrs[(r >> 24) % std::size(attrs)]);
    const auto& o = owners[(r >> 28) % std::size(owners)];
    const SpanEvent e = SpanEvent::of(o[0], o[1], rec);
    char got[kMaxLineBytes];
    char plain[kMaxLineBytes];
    const size_t n =
        (r >> 32) % 4 == 0 ? sink.span(got, e) : sink.span_record(got, o[0], o[1], rec);
    const std::string want(plain, format_span(plain, e));
    if (std::string(got, n) != want) {
      FAIL_CHECK("line ", i, ": got '", std::string(got, n), "', want '", want, "'");
      return;
    }
  }
}

TEST_CASE("span_plain (the text drainer's line from the ring's slots) writes span_record's line or refuses") {
  // TextSink::span_plain formats a record still in the ring's slots: header copied, payload in
  // place, packed attributes unpacked straight into the line. For random records laid out as a
  // ring holds them (names and attributes with and without bytes to escape, NULs, every length
  // to past the caps, packed lists well formed, cut and malformed), interleaved with span_record
  // on the same sink: where it writes a line, that line must be span_record's for the record
  // read and unpacked as the ring reader does (copy_ordinary_payload, finish_ordinary); where
  // the reader refuses the record (a NUL in the name, a malformed list), it must refuse too; and
  // every record whose fields need no escaping must take it (else the drainer's path is dead).
  EACH_ATTRS_PATH(path);
  TextSink sink;
  TextSink reference;
  std::mt19937_64 rng(0x91a1e5ca);
  const char pieces[] = "abcxyz.019_-:/ =%[]\x01\x7f";  // then NUL, as the string's last byte
  auto field = [&](size_t max) {
    std::string s(rng() % (max + 1), 'a');
    const bool plain = rng() % 2 == 0;
    for (char& c : s)
      c = plain ? "abcxyz.019_-:/"[rng() % 14] : pieces[rng() % sizeof pieces];
    return s;
  };
  uint64_t ts = 2'022'531'972'882;
  size_t taken = 0;
  size_t plain_refused = 0;
  for (int i = 0; i < 50000; ++i) {
    const uint64_t r = rng();
    ts += rng() % 200'000'000;
    std::string name = field(kNameRawMax);
    if (name.empty()) name = "n";
    std::string attrs;
    uint16_t flags = 0;
    if (r % 3 == 0) {  // packed integers: keys plain or not, values of every size
      flags = kRecordPackedAttrs;
      char buf[kAttrsPackedMax + kPackedTokenFixed + kAttrsRawMax + 8];
      uint32_t len = 0;
      for (;;) {
        const std::string key = field(r % 7 == 0 ? 60 : 12);
        const uint64_t v = rng() >> (rng() % 64);
        const bool neg = rng() % 4 == 0 && v != 0 && v <= (uint64_t{1} << 63);
        const uint32_t t = kPackedTokenFixed + static_cast<uint32_t>(key.size()) +
                           packed_value_bytes(v);
        if (len + t > kAttrsPackedMax) break;
        len += pack_token(buf + len, key.data(), static_cast<uint32_t>(key.size()),
                          neg ? kPackedNegative : kPackedUnsigned, v);
        if (rng() % 3 == 0) break;
      }
      if (len == 0) len = pack_token(buf, "k", 1, kPackedUnsigned, 7);
      attrs.assign(buf, len);
      if (r % 13 == 0) attrs[rng() % len] = static_cast<char>(rng());  // maybe malformed
    } else {
      attrs = field(kAttrsRawMax);
    }
    // The ring's slots: the header, its payload from offset 52 on, then garbage past the record
    // (bytes that need escaping and a NUL: the line's vectors read up to 15 of them).
    RecordHeader h{};
    h.seq = 1;
    h.ts_ns = ts;
    h.dur_ns = r % 5 == 0 ? rng() >> (rng() % 64) : rng() % 100'000;
    h.inv = (r >> 8) % 3;
    h.hid = (r >> 12) % 2 * 0x9f3c2a1b5d7e6f01ull;
    h.depth = static_cast<uint32_t>((r >> 16) % 12);
    h.name_len = static_cast<uint16_t>(name.size());
    h.attrs_len = static_cast<uint16_t>(attrs.size());
    h.slots = static_cast<uint16_t>(record_slots(uint32_t{h.name_len} + h.attrs_len));
    h.flags = flags;
    alignas(16) char slots[(kMaxRecordSlots + 1) * kSlotBytes];
    for (size_t k = 0; k < sizeof slots; ++k) slots[k] = "%\0]"[k % 3];
    std::memcpy(slots, &h, offsetof(RecordHeader, payload));
    const std::string payload = name + attrs;
    std::memcpy(slots + offsetof(RecordHeader, payload), payload.data(), payload.size());
    std::memcpy(&h, slots, sizeof h);
    // The record as the ring reader reads it.
    RecordCopy rec;
    std::memcpy(&rec.header, slots, sizeof rec.header);
    copy_ordinary_payload(rec, reinterpret_cast<const std::byte*>(slots) + kSlotBytes);
    std::string why;
    const bool readable = finish_ordinary(rec, RecordWhere{"record ", 0}, why);
    const uint32_t pid = 10 + (r >> 28) % 2;
    char got[kPlainLineRoom];
    const size_t n = sink.span_plain(got, pid, 11, h, slots + offsetof(RecordHeader, payload));
    if (!readable) {
      if (n != 0) {
        FAIL_CHECK("record ", i, ": refused by the reader (", why, "), written: '",
                   std::string(got, n), "'");
        return;
      }
      continue;
    }
    char want[kMaxLineBytes];
    const std::string w(want, reference.span_record(want, pid, 11, rec));
    const std::string_view a(rec.attrs(), rec.header.attrs_len);
    // Copied as is: printable ASCII but % [ ], in names also not space or = (the spec).
    auto copied = [](std::string_view f, bool is_name) {
      for (const char c : f)
        if (c < (is_name ? 0x21 : 0x20) || c > 0x7e || c == '%' || c == '[' || c == ']' ||
            (is_name && c == '='))
          return false;
      return true;
    };
    const bool needs_nothing = name.size() <= kNameCap && rec.header.attrs_len <= kAttrsCap &&
                               copied(name, true) && copied(a, false);
    if (n == 0) {
      if (needs_nothing) ++plain_refused;
      // The refused record's line, from the same sink (its caches may have moved: same bytes).
      const size_t m = sink.span_record(got, pid, 11, rec);
      CHECK(std::string(got, m) == w);
      continue;
    }
    ++taken;
    if (std::string(got, n) != w) {
      FAIL_CHECK("record ", i, ": got '", std::string(got, n), "', want '", w, "'");
      return;
    }
  }
#if defined(__SSE2__) || (defined(__ARM_NEON) && defined(__aarch64__))
  CHECK(plain_refused == 0);
  CHECK(taken > 5000);
#else
  CHECK(taken == 0);  // without SSE2 or NEON every record takes the RecordCopy path
#endif
}

TEST_CASE("span_compact (the text drainer's line of a compact record) writes span_record's line or refuses") {
  // TextSink::span_compact formats a compact record from its slot's copy and its resolved
  // strings, integer attributes formatted straight into the line. For random compact records
  // (names, attribute texts and keys with and without bytes to escape, 0..4 values signed and
  // not, every length up to kStringMaxBytes) it must write the line span_record writes for the
  // record decode_compact makes of the same strings, or 0; and it must take every record whose
  // line needs no escaping and no cut.
  EACH_ATTRS_PATH(path);
  TextSink sink;
  TextSink reference;
  std::mt19937_64 rng(0xc0a1ac7e);
  auto str = [&](size_t min) {
    std::string s(min + rng() % (kStringMaxBytes - min + 1), 'a');
    const bool plain = rng() % 2 == 0;
    for (char& c : s)
      c = plain ? "abcxyz.019_-:/"[rng() % 14] : "abz.0 =%[]\x01\x7f\xe9"[rng() % 13];
    return s;
  };
  auto copied = [](std::string_view f, bool is_name) {
    for (const char c : f)
      if (c < (is_name ? 0x21 : 0x20) || c > 0x7e || c == '%' || c == '[' || c == ']' ||
          (is_name && c == '='))
        return false;
    return true;
  };
  uint64_t ts = 2'022'531'972'882;
  size_t taken = 0;
  size_t plain_refused = 0;
  for (int i = 0; i < 50000; ++i) {
    const uint64_t r = rng();
    ts += rng() % 200'000'000;
    CompactRecord c{};
    c.ts_ns = ts;
    c.dur_ns = static_cast<uint32_t>(rng());
    c.inv = (r >> 8) % 3;
    c.hid = (r >> 12) % 2 * 0x9f3c2a1b5d7e6f01ull;
    c.depth = static_cast<uint8_t>(r >> 16);
    c.slots = 1;
    c.flags = kRecordCompact;
    c.name = 1;
    const uint32_t count = r % 6 == 0 ? 0 : static_cast<uint32_t>((r >> 20) % (kCompactAttrs + 1));
    c.attrs = static_cast<uint8_t>(r % 6 == 0 ? kCompactAttrsText : count);
    for (uint32_t k = 0; k < kCompactAttrs; ++k) {
      c.keys[k] = static_cast<uint16_t>(2 + k);
      c.values[k] = static_cast<uint32_t>(rng() >> (rng() % 64));
      if (rng() % 2 == 0) c.attrs = static_cast<uint8_t>(c.attrs | (1u << (4 + k)));
    }
    if (c.attrs & kCompactAttrsText) c.attrs &= 0x0f;  // no signed bits with a text
    // Strings as a string source keeps them: kStringMaxBytes readable from each data().
    std::string kept[1 + kCompactAttrs];
    std::string_view strings[1 + kCompactAttrs];
    for (uint32_t k = 0; k < 1 + kCompactAttrs; ++k) {
      kept[k] = str(r % 4 == 0 ? 40 : 1);  // long keys: texts past kAttrsCap
      const size_t len = rng() % 3 == 0 ? 1 + rng() % kStringMaxBytes : kept[k].size();
      kept[k].resize(kStringMaxBytes, '%');  // bytes past the string: ignored
      strings[k] = std::string_view(kept[k].data(), len);
    }
    // Its record as the ring reader decodes it.
    RecordCopy rec;
    std::string why;
    auto resolve = [&](uint32_t id, std::string_view& out, std::string&) {
      out = strings[id - 1];
      return true;
    };
    REQUIRE(decode_compact(c, 5, resolve, rec, RecordWhere{"compact ", 0}, why));
    RecordHeader h{};
    h.ts_ns = c.ts_ns;
    h.dur_ns = c.dur_ns;
    h.inv = c.inv;
    h.hid = c.hid;
    h.depth = c.depth;
    const uint32_t pid = 10 + (r >> 28) % 2;
    char got[kPlainLineRoom];
    const size_t n = sink.span_compact(got, pid, 11, h, c, strings);
    char want[kMaxLineBytes];
    const std::string w(want, reference.span_record(want, pid, 11, rec));
    const bool needs_nothing =
        rec.header.attrs_len <= kAttrsCap &&
        copied(std::string_view(rec.name(), rec.header.name_len), true) &&
        copied(std::string_view(rec.attrs(), rec.header.attrs_len), false);
    if (n == 0) {
      if (needs_nothing) ++plain_refused;
      const size_t m = sink.span_record(got, pid, 11, rec);
      CHECK(std::string(got, m) == w);
      continue;
    }
    ++taken;
    if (std::string(got, n) != w) {
      FAIL_CHECK("record ", i, ": got '", std::string(got, n), "', want '", w, "'");
      return;
    }
  }
#if defined(__SSE2__) || (defined(__ARM_NEON) && defined(__aarch64__))
  CHECK(plain_refused == 0);
  CHECK(taken > 2000);
#else
  CHECK(taken == 0);  // without SSE2 or NEON every record takes the RecordCopy path
#endif
}

TEST_CASE("a TextSink's cached times and (inv, hid) give the stateless line in any order") {
  // The sink keeps the leading digits of the last time and the text of the last (inv, hid):
  // lines that share them, lines that do not, and values at every length must all be the lines
  // format_span writes without the caches.
  TextSink sink;
  std::mt19937_64 rng(0x7e57ca5e);
  const uint64_t edges[] = {0, 9, 10, 99'999'999, 100'000'000, 100'000'001, 199'999'999,
                            9'999'999'999'999'999ull, 10'000'000'000'000'000ull, UINT64_MAX};
  uint64_t ts = 2'022'531'972'882;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t r = rng();
    if (r % 7 == 0) ts = edges[rng() % std::size(edges)];
    else if (r % 7 == 1) ts = rng() >> (rng() % 64);
    else ts += rng() % 200'000'000;  // mostly the same leading digits, sometimes not
    const uint64_t dur = r % 5 == 0 ? rng() >> (rng() % 64) : rng() % 100'000;
    const uint64_t inv = r % 3 == 0 ? rng() >> (rng() % 64) : (r >> 8) % 3;
    const uint64_t hid = r % 4 == 0 ? rng() >> (rng() % 64) : ((r >> 12) % 2) * 0x9f3c2a1b5d7e6f01ull;
    const RecordCopy rec = make_record(1, ts, dur, inv, hid, static_cast<uint32_t>(r % 12),
                                       "chip.run", "k=1");
    SpanEvent e = SpanEvent::of(7, 8, rec);
    char cached[kMaxLineBytes];
    char plain[kMaxLineBytes];
    const std::string got(cached, sink.span(cached, e));
    const std::string want(plain, format_span(plain, e));
    if (got != want) {
      FAIL_CHECK("line ", i, ": got '", got, "', want '", want, "'");
      return;
    }
  }
}
