#include "format/strace_format.h"

#include <spanring/encode.h>

#include <charconv>
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
  // std::to_chars: lowercase digits, no leading zeros, as the spec's fields are written.
  void dec(uint64_t v) noexcept { p = std::to_chars(p, p + 20, v).ptr; }
  void hex(uint64_t v) noexcept { p = std::to_chars(p, p + 16, v, 16).ptr; }
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

size_t format_span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) {
  const RecordHeader& h = rec.header;
  Out o{out};
  o.prefix(h.ts_ns + h.dur_ns, tid, "emit_host_span: [STRACE] v=1 pid=");
  o.dec(pid);
  o.str(" tid=");
  o.dec(tid);
  o.str(" inv=");
  o.dec(h.inv);
  o.str(" hid=");
  o.hex(h.hid);
  o.str(" depth=");
  o.dec(h.depth);
  o.str(" name=");
  o.p += encode_name(rec.name(), h.name_len, o.p);
  o.str(" ts=");
  o.dec(h.ts_ns);
  o.str(" dur=");
  o.dec(h.dur_ns);
  // The separating space is written even with no attributes: the line then ends `dur=<n> `.
  o.str(" ");
  o.p += encode_attrs(rec.attrs(), h.attrs_len, o.p);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_anchor(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns) {
  Out o{out};
  o.prefix(mono_ns, tid, "clock_anchor: [CLOCK_ANCHOR] v=1 pid=");
  o.dec(pid);
  o.str(" mono_ns=");
  o.dec(mono_ns);
  o.str(" wall_ns=");
  o.dec(wall_ns);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
                    uint64_t last_seq, const char* reason) {
  Out o{out};
  o.str("[SPANRING_DROPS] v=1 pid=");
  o.dec(pid);
  o.str(" tid=");
  o.dec(tid);
  o.str(" dropped=");
  o.dec(dropped);
  o.str(" first_seq=");
  o.dec(first_seq);
  o.str(" last_seq=");
  o.dec(last_seq);
  o.str(" reason=");
  o.str(reason);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

const char* drop_reason_name(DropReason r) noexcept {
  switch (r) {
    case DropReason::kRingFull: return "ring_full";
    case DropReason::kInvalid: return "invalid";
    case DropReason::kNoRing: return "no_ring";
    case DropReason::kCorrupt: return "corrupt";
    case DropReason::kVfork: return "vfork";
    case DropReason::kReentrant: return "reentrant";
  }
  return "unknown";
}

size_t format_unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                         std::string_view name, bool name_cut, uint64_t ts_ns) {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(pid);
  o.str(" tid=");
  o.dec(tid);
  o.str(" inv=");
  o.dec(inv);
  o.str(" depth=");
  o.dec(depth);
  o.str(" name=");
  // The ring kept only the name's first bytes. Encode them unit by unit under the cap; if they
  // did not all fit, or the name went on past them, mark the cut exactly as the [STRACE] spec
  // does: at the cap, drop the whole last unit, then `~`.
  size_t n = 0;
  size_t last_unit = 0;
  bool cut = name_cut;
  for (size_t i = 0; i < name.size() && name[i] != '\0'; ++i) {
    char unit[3];
    const size_t u = encode_name(&name[i], 1, unit);
    if (n + u > kNameCap) {
      cut = true;
      break;
    }
    std::memcpy(o.p + n, unit, u);
    n += u;
    last_unit = u;
  }
  if (cut) {
    if (n == kNameCap) n -= last_unit;
    o.p[n++] = '~';
  }
  o.p += n;
  if (n == 0) o.str("%3F");  // no name was recorded: `?`, encoded
  o.str(" ts=");
  o.dec(ts_ns);
  o.str(" reason=owner_died\n");
  return static_cast<size_t>(o.p - out);
}

size_t format_undescribed(char* out, uint32_t pid, uint32_t tid, uint32_t count) {
  Out o{out};
  o.str("[SPANRING_UNFINISHED] v=1 pid=");
  o.dec(pid);
  o.str(" tid=");
  o.dec(tid);
  o.str(" undescribed=");
  o.dec(count);
  o.str(" reason=owner_died_deeper_than_");
  o.dec(kOpenSpanMax);
  o.str("\n");
  return static_cast<size_t>(o.p - out);
}

bool is_device_span(const RecordCopy& rec) noexcept {
  return is_device_attrs(std::string_view(rec.attrs(), rec.header.attrs_len));
}

}  // namespace spanring
