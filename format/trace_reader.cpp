#include "format/trace_reader.h"

#include "format/binary_format.h"
#include "format/strace_format.h"

#include <spanring/encode.h>

namespace spanring {
namespace {

// Binary events to TraceVisitor events: names and attributes encoded exactly as the text
// drainer would have written them (the same encode_* and format_* functions).
class Normalizer final : public BinaryVisitor {
 public:
  explicit Normalizer(TraceVisitor& v) : v_(v) {}
  void process(uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
               std::string_view cmdline) override {
    v_.process(pid, tid, mono_ns, wall_ns, cmdline);
  }
  void thread(uint32_t pid, uint32_t tid, std::string_view name) override {
    v_.thread(pid, tid, name);
  }
  void span(uint32_t pid, uint32_t tid, const RecordCopy& rec) override {
    const RecordHeader& h = rec.header;
    SpanEvent s;
    s.pid = pid;
    s.tid = tid;
    s.ts_ns = h.ts_ns;
    s.dur_ns = h.dur_ns;
    s.inv = h.inv;
    s.hid = h.hid;
    s.depth = h.depth;
    s.name = std::string_view(name_, encode_name(rec.name(), h.name_len, name_));
    s.attrs = std::string_view(attrs_, encode_attrs(rec.attrs(), h.attrs_len, attrs_));
    s.device = has_attr_token(s.attrs, "clk=dev");
    v_.span(s);
  }
  void drops(uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq, uint64_t last_seq,
             DropReason reason) override {
    v_.drops(pid, tid, dropped, first_seq, last_seq, reason);
  }
  void unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                  std::string_view name, bool name_cut, uint64_t ts_ns) override {
    // The name as the [SPANRING_UNFINISHED] line spells it (encoded, `~` when cut, `%3F` when
    // none was recorded): taken from that very line rather than spelled a second time here.
    char line[kMaxLineBytes];
    const std::string_view l(line, format_unfinished(line, pid, tid, inv, depth, name, name_cut,
                                                     ts_ns));
    const size_t from = l.find(" name=") + 6;
    const size_t to = l.find(" ts=", from);
    v_.unfinished(pid, tid, inv, depth, l.substr(from, to - from), ts_ns);
  }
  void undescribed(uint32_t pid, uint32_t tid, uint32_t count) override {
    v_.undescribed(pid, tid, count);
  }

 private:
  TraceVisitor& v_;
  char name_[kNameCap];
  char attrs_[kAttrsCap];
};

}  // namespace

bool has_attr_token(std::string_view attrs, std::string_view token) noexcept {
  size_t at = 0;
  while ((at = attrs.find(token, at)) != std::string_view::npos) {
    const bool starts = at == 0 || attrs[at - 1] == ' ';
    const bool ends = at + token.size() == attrs.size() || attrs[at + token.size()] == ' ';
    if (starts && ends) return true;
    at += token.size();
  }
  return false;
}

bool find_attr(std::string_view attrs, std::string_view key, std::string_view* value) noexcept {
  while (!attrs.empty()) {
    const size_t sp = attrs.find(' ');
    const std::string_view tok = attrs.substr(0, sp);
    if (tok.size() > key.size() && tok.substr(0, key.size()) == key && tok[key.size()] == '=') {
      *value = tok.substr(key.size() + 1);
      return true;
    }
    if (sp == std::string_view::npos) break;
    attrs.remove_prefix(sp + 1);
  }
  return false;
}

ReadResult read_trace(TraceInput& in, TraceVisitor& visitor) {
  const std::string_view head = in.peek(sizeof kTraceMagic);
  if (is_binary_trace(head)) {
    Normalizer n(visitor);
    return read_binary_trace(in, n);
  }
  // A binary file cut inside its magic (peek returns fewer bytes only at the end of the
  // input): say so rather than call it "not a trace".
  if (!head.empty() && head.size() < sizeof kTraceMagic &&
      head == std::string_view(kTraceMagic, head.size())) {
    Normalizer n(visitor);
    return read_binary_trace(in, n);
  }
  return read_strace_text(in, visitor);
}

}  // namespace spanring
