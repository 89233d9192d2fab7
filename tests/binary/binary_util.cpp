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
  len_ += sink_.process(room(), pid, tid, mono, wall, cmd);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.process(line, pid, tid, mono, wall, cmd));
}
void TraceBuilder::thread(uint32_t pid, uint32_t tid, std::string_view name) {
  len_ += sink_.thread(room(), pid, tid, name);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.thread(line, pid, tid, name));
}
void TraceBuilder::span(uint32_t pid, uint32_t tid, const RecordCopy& rec) {
  len_ += sink_.span(room(), pid, tid, rec);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.span(line, pid, tid, rec));
}
void TraceBuilder::drops(uint32_t pid, uint32_t tid, uint64_t n, uint64_t first, uint64_t last,
                         DropReason reason) {
  len_ += sink_.drops(room(), pid, tid, n, first, last, reason);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.drops(line, pid, tid, n, first, last, reason));
}
void TraceBuilder::unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                              std::string_view name, bool cut, uint64_t ts) {
  len_ += sink_.unfinished(room(), pid, tid, inv, depth, name, cut, ts);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.unfinished(line, pid, tid, inv, depth, name, cut, ts));
}
void TraceBuilder::undescribed(uint32_t pid, uint32_t tid, uint32_t count) {
  len_ += sink_.undescribed(room(), pid, tid, count);
  char line[kMaxLineBytes];
  text.append(line, text_sink_.undescribed(line, pid, tid, count));
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
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 2, 0, 0, "l3.graph_build", ""));
          break;
        case 4: {
          const uint64_t k = 1 + rng() % 5;
          b.drops(pid, tid, k, seq[t], seq[t] + k - 1, DropReason::kRingFull);
          seq[t] += k;
          break;
        }
        default:
          b.span(pid, tid, make_record(seq[t]++, ts, dur, 3, 0xabc, 1, "l3.submit",
                                       "run_id=1 task_slot=" + std::to_string(i % 4) +
                                           " role=orch"));
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

void TextRenderer::process(uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
                           std::string_view cmdline) {
  cmdlines.emplace_back(cmdline);
  text.append(line_, sink_.process(line_, pid, tid, mono_ns, wall_ns, cmdline));
  ++events;
}
void TextRenderer::thread(uint32_t pid, uint32_t tid, std::string_view name) {
  thread_names.emplace_back(name);
  text.append(line_, sink_.thread(line_, pid, tid, name));
  ++events;
}
void TextRenderer::span(uint32_t pid, uint32_t tid, const RecordCopy& rec) {
  text.append(line_, sink_.span(line_, pid, tid, rec));
  ++events;
}
void TextRenderer::drops(uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
                         uint64_t last_seq, DropReason reason) {
  text.append(line_, sink_.drops(line_, pid, tid, dropped, first_seq, last_seq, reason));
  ++events;
}
void TextRenderer::unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                              std::string_view name, bool name_cut, uint64_t ts_ns) {
  text.append(line_, sink_.unfinished(line_, pid, tid, inv, depth, name, name_cut, ts_ns));
  ++events;
}
void TextRenderer::undescribed(uint32_t pid, uint32_t tid, uint32_t count) {
  text.append(line_, sink_.undescribed(line_, pid, tid, count));
  ++events;
}

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
