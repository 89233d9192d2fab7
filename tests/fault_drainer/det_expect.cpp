#include "det_expect.h"

#include "det_workload.h"
#include "fault_util.h"
#include "mp_util.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstring>

namespace det {

std::string encode_field(std::string_view raw, bool name) {
  const size_t cap = name ? 64 : 192;
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  size_t last_unit = 0;
  for (const char ch : raw) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == 0) break;  // input ends at the first NUL
    const bool copy = b >= 0x20 && b <= 0x7e && b != '%' && b != '[' && b != ']' &&
                      !(name && (b == ' ' || b == '='));
    const std::string unit = copy ? std::string(1, ch)
                                  : std::string{'%', kHex[b >> 4], kHex[b & 0xf]};
    if (out.size() + unit.size() > cap) {
      if (out.size() == cap) out.resize(out.size() - last_unit);  // never half an escape
      out += '~';
      return out;
    }
    out += unit;
    last_unit = unit.size();
  }
  return out;
}

namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string anchor_line(const spanring_test::AnchorLine& a) {
  return "[mono_ns=" + std::to_string(a.prefix.mono_ns) + "][T0x" + hex(a.prefix.thread) +
         "][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=" + std::to_string(a.pid) +
         " mono_ns=" + std::to_string(a.mono_ns) + " wall_ns=" + std::to_string(a.wall_ns) + "\n";
}

std::string expected_trace(uint64_t pid, uint64_t tid, uint64_t count,
                           const spanring_test::AnchorLine& anchor) {
  std::string out = anchor_line(anchor);
  for (uint64_t i = 0; i < count; ++i) {
    const Record r = record(i);
    if (r.invalid()) {
      out += "[SPANRING_DROPS] v=1 pid=" + std::to_string(pid) + " tid=" + std::to_string(tid) +
             " dropped=1 first_seq=" + std::to_string(i) + " last_seq=" + std::to_string(i) +
             " reason=invalid\n";
      continue;
    }
    const uint64_t ts = static_cast<uint64_t>(r.ts);
    const uint64_t dur = static_cast<uint64_t>(r.dur);
    out += "[mono_ns=" + std::to_string(ts + dur) + "][T0x" + hex(tid) +
           "][TIMING] emit_host_span: [STRACE] v=1 pid=" + std::to_string(pid) +
           " tid=" + std::to_string(tid) + " inv=" + std::to_string(r.inv) + " hid=" + hex(r.hid) +
           " depth=" + std::to_string(r.depth) + " name=" + encode_field(r.name, true) +
           " ts=" + std::to_string(ts) + " dur=" + std::to_string(dur) + " " +
           encode_field(r.null_attrs ? std::string() : r.attrs, false) + "\n";
  }
  return out;
}

std::string write_plain(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE_MESSAGE(fd >= 0, "open ", path, ": ", std::string(std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE_MESSAGE(n > 0, "write ", path, ": ", std::string(std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  REQUIRE(::fsync(fd) == 0);
  REQUIRE(::close(fd) == 0);
  return spanring_test::read_file(path);
}

std::string first_difference(const std::string& got, const std::string& want) {
  if (got == want) return {};
  size_t line = 1;
  size_t start = 0;
  const size_t n = std::min(got.size(), want.size());
  size_t i = 0;
  for (; i < n && got[i] == want[i]; ++i) {
    if (got[i] == '\n') {
      ++line;
      start = i + 1;
    }
  }
  const auto line_at = [start](const std::string& s) {
    if (start >= s.size()) return std::string("<end of text>");
    const size_t end = s.find('\n', start);
    return spanring_test::printable(s.substr(start, end == std::string::npos ? end : end - start + 1), 600);
  };
  return "first difference at byte " + std::to_string(i) + " (line " + std::to_string(line) +
         "; got " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size()) +
         ")\n  got:  " + line_at(got) + "\n  want: " + line_at(want);
}

DetRun load_run(const std::string& json_path) {
  const nlohmann::json j = nlohmann::json::parse(spanring_test::read_file(json_path));
  DetRun d{j.at("pid").get<uint64_t>(), j.at("tid").get<uint64_t>(), j.at("count").get<uint64_t>()};
  REQUIRE_MESSAGE(j.at("enabled").get<int>() == 1, "det_emitter ran untraced");
  return d;
}

std::string expected_for(const DetRun& d, const std::string& output,
                         const spanring_test::TempDir& tmp, const std::string& label) {
  const spanring_test::ParsedText parsed = fault_test::parse_and_check_form(output, {}, label);
  fault_test::check_anchors(parsed, {}, label);
  spanring_test::AnchorLine anchor;
  bool found = false;
  for (const auto& l : parsed.lines) {
    if (l.kind == spanring_test::LineKind::kAnchor && l.anchor.pid == d.pid) {
      anchor = l.anchor;
      found = true;
      break;
    }
  }
  CHECK_MESSAGE(found, label, ": no [CLOCK_ANCHOR] for pid ", d.pid);
  CHECK_MESSAGE(anchor.prefix.thread == d.tid, label, ": the anchor's T0x is not the tid");
  // The plain writer's file is the reference.
  return write_plain(tmp.file(label + ".expected"), expected_trace(d.pid, d.tid, d.count, anchor));
}

}  // namespace det
