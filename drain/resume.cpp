#include "drain/resume.h"

#include "format/binary_reader.h"
#include "format/text_reader.h"

#include <spanring/error.h>

#include <cerrno>
#include <fstream>

namespace spanring {
namespace {

struct PidCollector final : EventVisitor {
  std::unordered_set<uint32_t>* pids;
  explicit PidCollector(std::unordered_set<uint32_t>* p) : pids(p) {}
  void process(const ProcessEvent& e) override { pids->insert(e.pid); }
};

}  // namespace

std::string kept_format(const std::string& path) {
  char head[sizeof kTraceMagic] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(head, sizeof head);
  return is_binary_trace(std::string_view(head, static_cast<size_t>(in.gcount()))) ? "binary"
                                                                                    : "strace";
}

KeptPrefix scan_binary_prefix(const std::string& path, uint64_t bytes) {
  KeptPrefix out;
  TraceInput in = TraceInput::open(path);
  in.set_limit(bytes);
  PidCollector pc(&out.pids);
  uint64_t last = UINT64_MAX;
  const ReadResult r = read_binary_trace(in, pc, &last);
  if (r.status != ReadResult::Status::kComplete || r.good_bytes != bytes)
    throw Error(ErrorCode::kCorruptFile, "cannot resume " + path + ": its first " +
                    std::to_string(bytes) + " bytes (the committed part) are not a complete "
                    "binary trace: " +
                    (r.message.empty() ? "it ends at byte " + std::to_string(r.good_bytes)
                                       : r.message),
                EINVAL, path);
  out.next_block_seq = last == UINT64_MAX ? 0 : last + 1;
  // "spanring binary trace vN": the reader accepted N (kOldestTraceVersion..kTraceVersion).
  const size_t v = r.format.rfind('v');
  out.version = v == std::string::npos ? kTraceVersion
                                       : static_cast<uint32_t>(std::stoul(r.format.substr(v + 1)));
  return out;
}

KeptPrefix scan_text_prefix(const std::string& path, uint64_t bytes) {
  KeptPrefix out;
  if (bytes == 0) return out;
  // The text reader parses the anchor lines (a process event per pid). A file that cannot be
  // opened or read, or a malformed line, ends the scan with the pids found before it: an anchor
  // missed is written again, which a reader takes (a second anchor of a pid is a note).
  PidCollector pc(&out.pids);
  try {
    TraceInput in = TraceInput::open(path);
    in.set_limit(bytes);
    read_strace_text(in, pc);
  } catch (const Error&) {
  }
  return out;
}

}  // namespace spanring
