#include "binary_util.h"

#include <cstring>
#include <random>

using namespace spanring;

namespace binary_test {

RecordCopy make_record(uint64_t seq, uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid,
                       uint32_t depth, std::string_view name, std::string_view attrs) {
  RecordCopy r{};
  r.header.seq = seq;
  r.header.ts_ns = ts;
  r.header.dur_ns = dur;
  r.header.inv = inv;
  r.header.hid = hid;
  r.header.depth = depth;
  r.header.name_len = static_cast<uint16_t>(name.size());
  r.header.attrs_len = static_cast<uint16_t>(attrs.size());
  r.header.slots = static_cast<uint16_t>(record_slots(static_cast<uint32_t>(name.size() + attrs.size())));
  std::memcpy(r.payload, name.data(), name.size());
  std::memcpy(r.payload + name.size(), attrs.data(), attrs.size());
  return r;
}

TraceBuilder::TraceBuilder(bool file_header, uint64_t first_block)
    : sink_(file_header, first_block), buf_(1u << 20) {}

void TraceBuilder::begin_block() {
  len_ = sink_.begin_buffer(buf_.data());
  open_ = true;
}

void TraceBuilder::end_block() {
  sink_.end_buffer(buf_.data(), len_);
  bytes.append(buf_.data(), len_);
  open_ = false;
}

char* TraceBuilder::room() {
  if (!open_) begin_block();
  if (buf_.size() - len_ < kMaxBinaryEventBytes) {
    end_block();
    begin_block();
  }
  return buf_.data() + len_;
}

void TraceBuilder::process(uint32_t pid, uint32_t tid, uint64_t mono, uint64_t wall,
                           std::string_view cmd) {
  add(ProcessEvent{pid, tid, mono, wall, cmd}, &Sink::process);
}
void TraceBuilder::thread(uint32_t pid, uint32_t tid, std::string_view name) {
  add(ThreadEvent{pid, tid, name}, &Sink::thread);
}
void TraceBuilder::span(uint32_t pid, uint32_t tid, const RecordCopy& rec) {
  add(SpanEvent::of(pid, tid, rec), &Sink::span);
}
void TraceBuilder::drops(uint32_t pid, uint32_t tid, uint64_t n, uint64_t first, uint64_t last,
                         DropReason reason) {
  add(DropsEvent{pid, tid, n, first, last, reason}, &Sink::drops);
}
void TraceBuilder::unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                              std::string_view name, bool cut, uint64_t ts) {
  add(UnfinishedEvent{pid, tid, inv, depth, ts, name, cut, {}}, &Sink::unfinished);
}
void TraceBuilder::undescribed(uint32_t pid, uint32_t tid, uint32_t count) {
  add(UndescribedEvent{pid, tid, count}, &Sink::undescribed);
}

TraceBuilder synthetic_trace(int blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  TraceBuilder b;
  const uint32_t pids[2] = {4200, 4242};
  std::string cmd = std::string("/usr/bin/app\0--flag\0value", 25);
  uint64_t seq[4] = {};
  uint64_t ts = 5'000'000'000;
  for (int blk = 0; blk < blocks; ++blk) {
    b.begin_block();
    if (blk == 0) {
      b.process(pids[0], pids[0], ts - 1000, 1'767'225'600'000'000'000, cmd);
      b.thread(pids[0], pids[0], "main");
      b.thread(pids[0], pids[0] + 1, "worker-1");
    }
    if (blk == 1) {
      b.process(pids[1], pids[1], ts, 1'767'225'600'000'001'000, std::string(5000, 'c'));
      b.thread(pids[1], pids[1], "chip\xc3\xa9");  // UTF-8 in a thread name
    }
    const int n = 20 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const int t = static_cast<int>(rng() % (blk == 0 ? 2 : 3));
      const uint32_t pid = t < 2 ? pids[0] : pids[1];
      const uint32_t tid = t == 0 ? pids[0] : t == 1 ? pids[0] + 1 : pids[1];
      ts += 1000 + rng() % 5000;
      const uint64_t dur = rng() % 100000;
      switch (rng() % 6) {
        case 0:
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 1, 0x9f3c2a1b5d7e6f01, 0, "chip.run",
                                       "run_id=0 task_slot=" + std::to_string(i)));
          break;
        case 1:
          b.span(pid, tid, make_record(seq[t]++, 20000 + i, dur, 1, 0, 3, "chip.run.dev",
                                       "clk=dev"));
          break;
        case 2: {
          // Cut name and attributes, bytes that must be escaped.
          std::string name(65, 'n');
          name[3] = ' ';
          name[10] = '%';
          std::string attrs = "\n" + std::string(186, 'x') + "\ny" + std::string(5, 'z');
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 0, 0, 0, name, attrs.substr(0, 193)));
          break;
        }
        case 3:
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 2, 0, 0, "node.graph_build", ""));
          break;
        case 4: {
          const uint64_t k = 1 + rng() % 5;
          b.drops(pid, tid, k, seq[t], seq[t] + k - 1, DropReason::kRingFull);
          seq[t] += k;
          break;
        }
        default:
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 3, 0xabc, 1, "node.submit",
                                       "run_id=1 task_slot=" + std::to_string(i % 4) +
                                           " role=facade"));
      }
    }
    if (blk == blocks - 1) {
      b.drops(0, 0, 7, 0, 0, DropReason::kNoRing);
      b.drops(0, 0, 2, 0, 0, DropReason::kVfork);
      b.drops(pids[1], pids[1], 1, seq[2], seq[2], DropReason::kInvalid);
      b.unfinished(pids[1], pids[1], 9, 0, "chip.run", false, ts);
      b.unfinished(pids[1], pids[1], 9, 1, std::string(32, 'u'), true, ts + 5);
      b.unfinished(pids[1], pids[1], 9, 2, "", false, ts + 6);
      b.undescribed(pids[1], pids[1], 3);
    }
    b.end_block();
  }
  return b;
}

void TextRenderer::process(const ProcessEvent& e) {
  cmdlines.emplace_back(e.cmdline);
  render(e, &Sink::process);
}
void TextRenderer::thread(const ThreadEvent& e) {
  thread_names.emplace_back(e.name);
  render(e, &Sink::thread);
}
void TextRenderer::span(const SpanEvent& e) { render(e, &Sink::span); }
void TextRenderer::drops(const DropsEvent& e) { render(e, &Sink::drops); }
void TextRenderer::unfinished(const UnfinishedEvent& e) { render(e, &Sink::unfinished); }
void TextRenderer::undescribed(const UndescribedEvent& e) { render(e, &Sink::undescribed); }

ReadResult read_bytes(const std::string& bytes, TextRenderer& out, uint64_t* last_block) {
  TraceInput in = TraceInput::memory(bytes, "test");
  return read_binary_trace(in, out, last_block);
}

std::vector<uint64_t> block_ends(const std::string& bytes) {
  std::vector<uint64_t> ends;
  uint64_t at = kFileHeaderBytes;
  if (bytes.size() < at) return ends;
  ends.push_back(at);
  while (bytes.size() - at >= kBlockHeaderBytes) {
    BlockHeader h;
    std::memcpy(&h, bytes.data() + at, sizeof h);
    if (bytes.size() - at - kBlockHeaderBytes < h.payload_bytes) break;
    at += kBlockHeaderBytes + h.payload_bytes;
    ends.push_back(at);
  }
  return ends;
}

void fix_crcs(std::string& bytes) {
  uint64_t at = kFileHeaderBytes;
  while (at < bytes.size() && bytes.size() - at >= kBlockHeaderBytes) {
    BlockHeader h;
    std::memcpy(&h, bytes.data() + at, sizeof h);
    const uint64_t left = bytes.size() - at - kBlockHeaderBytes;
    const uint64_t n = h.payload_bytes <= left ? h.payload_bytes : left;
    h.payload_crc = crc32c(bytes.data() + at + kBlockHeaderBytes, n);
    h.header_crc = crc32c(&h, offsetof(BlockHeader, header_crc));
    std::memcpy(bytes.data() + at, &h, sizeof h);
    if (h.payload_bytes > left) break;
    at += kBlockHeaderBytes + h.payload_bytes;
  }
}

}  // namespace binary_test
