#include "format/strace_format.h"

#include "format/decimal.h"

#include <spanring/encode.h>

#include <cstring>
#include <string_view>

namespace spanring {
namespace {

struct Out {
  char* p;
  void str(std::string_view s) noexcept {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  // Lowercase digits, no leading zeros, as the spec's fields are written: std::to_chars'
  // output, in a fifth of its instructions (format/decimal.h says why and how).
  void dec(uint64_t v) noexcept { p = write_decimal(p, v); }
  void hex(uint64_t v) noexcept { p = write_hex(p, v); }
  void prefix(uint64_t mono, uint32_t tid, std::string_view what) noexcept {
    str("[mono_ns=");
    dec(mono);
    str("][T0x");
    hex(tid);
    str("][TIMING] ");
    str(what);
  }
};

}  // namespace

namespace {

// The line after the owner's part (the invocation's value onwards).
size_t span_rest(Out o, const char* out, const SpanEvent& e) noexcept {
  o.dec(e.inv);
  o.str(" hid=");
  o.hex(e.hid);
  o.str(" depth=");
  o.dec(e.depth);
  o.str(" name=");
  if (e.record != nullptr) o.p += encode_name(e.record->name(), e.record->header.name_len, o.p);
  else o.str(e.name);
  o.str(" ts=");
  o.dec(e.ts_ns);
  o.str(" dur=");
  o.dec(e.dur_ns);
  // The separating space is written even with no attributes: the line then ends `dur=<n> `.
  o.str(" ");
  if (e.record != nullptr) o.p += encode_attrs(e.record->attrs(), e.record->header.attrs_len, o.p);
  else o.str(e.attrs);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

}  // namespace

size_t format_span(char* out, const SpanEvent& e) noexcept {
  Out o{out};
  o.prefix(e.ts_ns + e.dur_ns, e.tid, "emit_host_span: [STRACE] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" inv=");
  return span_rest(o, out, e);
}

const char* SpanLineOwner::bytes(uint32_t pid, uint32_t tid) noexcept {
  if (!set_ || pid != pid_ || tid != tid_) {
    Out o{bytes_};
    o.str("][T0x");
    o.hex(tid);
    o.str("][TIMING] emit_host_span: [STRACE] v=1 pid=");
    o.dec(pid);
    o.str(" tid=");
    o.dec(tid);
    o.str(" inv=");
    len_ = static_cast<size_t>(o.p - bytes_);
    pid_ = pid;
    tid_ = tid;
    set_ = true;
  }
  return bytes_;
}

size_t format_span(char* out, const SpanEvent& e, SpanLineOwner& owner) noexcept {
  Out o{out};
  o.str("[mono_ns=");
  o.dec(e.ts_ns + e.dur_ns);
  const char* fragment = owner.bytes(e.pid, e.tid);
  std::memcpy(o.p, fragment, SpanLineOwner::kCopyBytes);  // the rest is overwritten next
  o.p += owner.size();
  return span_rest(o, out, e);
}

size_t format_anchor(char* out, const ProcessEvent& e) noexcept {
  Out o{out};
  o.prefix(e.mono_ns, e.tid, "clock_anchor: [CLOCK_ANCHOR] v=1 pid=");
  o.dec(e.pid);
  o.str(" mono_ns=");
  o.dec(e.mono_ns);
  o.str(" wall_ns=");
  o.dec(e.wall_ns);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_drops(char* out, const DropsEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_DROPS] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" dropped=");
  o.dec(e.dropped);
  o.str(" first_seq=");
  o.dec(e.first_seq);
  o.str(" last_seq=");
  o.dec(e.last_seq);
  o.str(" reason=");
  o.str(drop_reason_name(e.reason));
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t encode_unfinished_name(char* out, std::string_view raw, bool cut) noexcept {
  // The ring kept only the name's first bytes. Encode them unit by unit under the cap; if they
  // did not all fit, or the name went on past them, mark the cut exactly as the [STRACE] spec
  // does: at the cap, drop the whole last unit, then `~`.
  size_t n = 0;
  size_t last_unit = 0;
  for (size_t i = 0; i < raw.size() && raw[i] != '\0'; ++i) {
    char unit[3];
    const size_t u = encode_name(&raw[i], 1, unit);
    if (n + u > kNameCap) {
      cut = true;
      break;
    }
    std::memcpy(out + n, unit, u);
    n += u;
    last_unit = u;
  }
  if (cut) {
    if (n == kNameCap) n -= last_unit;
    out[n++] = '~';
  }
  if (n > 0) return n;
  std::memcpy(out, "%3F", 3);  // no name was recorded: `?`, encoded
  return 3;
}

size_t format_unfinished(char* out, const UnfinishedEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" inv=");
  o.dec(e.inv);
  o.str(" depth=");
  o.dec(e.depth);
  o.str(" name=");
  if (!e.spelled_name.empty()) o.str(e.spelled_name);
  else o.p += encode_unfinished_name(o.p, e.raw_name, e.name_cut);
  o.str(" ts=");
  o.dec(e.ts_ns);
  o.str(" reason=owner_died\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_undescribed(char* out, const UndescribedEvent& e) noexcept {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(e.pid);
  o.str(" tid=");
  o.dec(e.tid);
  o.str(" undescribed=");
  o.dec(e.count);
  o.str(" reason=owner_died_deeper_than_");
  o.dec(kOpenSpanMax);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

bool is_device_span(const RecordCopy& rec) noexcept {
  return is_device_attrs(std::string_view(rec.attrs(), rec.header.attrs_len));
}

}  // namespace spanring
