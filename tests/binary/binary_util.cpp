#include "binary_util.h"

#include <spanring/packed_attrs.h>

#include <algorithm>
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

void TraceBuilder::string(uint16_t id, std::string_view bytes) {
  len_ += sink_.string(room(), id, bytes);
}

void TraceBuilder::clock(bool reset, const std::vector<TscClock::Pair>& samples) {
  if (!open_) begin_block();
  const size_t need = Sink::clock_event_bytes(static_cast<uint32_t>(samples.size()));
  if (buf_.size() - len_ < need) {
    end_block();
    begin_block();
  }
  len_ += sink_.clock(buf_.data() + len_, reset, samples.data(),
                      static_cast<uint32_t>(samples.size()));
}

void TraceBuilder::run(uint32_t pid, uint32_t tid, uint64_t first_seq, const std::string& slots,
                       const std::vector<RecordCopy>& decoded, TscClock::Pair anchor) {
  if (!open_) begin_block();
  const size_t need = sink_.run_header_bytes() + slots.size();
  if (buf_.size() - len_ < need) {
    end_block();
    begin_block();
  }
  char* out = buf_.data() + len_;
  const size_t h = sink_.begin_run(out, pid, tid, first_seq, anchor);
  std::memcpy(out + h, slots.data(), slots.size());
  sink_.end_run(out, static_cast<uint32_t>(slots.size() / kSlotBytes),
                static_cast<uint32_t>(decoded.size()));
  len_ += h + slots.size();
  for (const RecordCopy& r : decoded) {
    char line[kMaxLineBytes];
    text.append(line, text_sink_.span(line, SpanEvent::of(pid, tid, r)));
  }
}

std::string compact_slot(uint64_t seq, uint64_t ts, uint32_t dur, uint64_t inv, uint64_t hid,
                         uint8_t depth, uint16_t name_id, uint32_t count, const uint16_t* keys,
                         const uint32_t* values, uint8_t negative, uint16_t text_id) {
  CompactRecord c{};
  c.ts_ns = ts;
  c.inv = inv;
  c.hid = hid;
  c.dur_ns = dur;
  c.seq_lo = static_cast<uint32_t>(seq);
  c.slots = 1;
  c.flags = kRecordCompact;
  c.name = name_id;
  c.depth = depth;
  if (text_id != 0) {
    c.keys[0] = text_id;
    c.attrs = kCompactAttrsText;
  } else {
    for (uint32_t i = 0; i < count; ++i) {
      c.keys[i] = keys[i];
      c.values[i] = values[i];
    }
    c.attrs = static_cast<uint8_t>(count | negative << 4);
  }
  return std::string(reinterpret_cast<const char*>(&c), sizeof c);
}

std::string ordinary_slots(uint64_t seq, uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid,
                           uint32_t depth, std::string_view name, std::string_view attrs,
                           bool packed) {
  RecordHeader h{};
  h.seq = seq;
  h.ts_ns = ts;
  h.dur_ns = dur;
  h.inv = inv;
  h.hid = hid;
  h.depth = depth;
  h.name_len = static_cast<uint16_t>(name.size());
  h.attrs_len = static_cast<uint16_t>(attrs.size());
  const uint32_t total = static_cast<uint32_t>(name.size() + attrs.size());
  h.slots = static_cast<uint16_t>(record_slots(total));
  h.flags = packed ? kRecordPackedAttrs : 0;
  std::string payload = std::string(name) + std::string(attrs);
  std::string out(size_t{h.slots} * kSlotBytes, '\0');
  const size_t first = std::min<size_t>(payload.size(), kInlinePayloadBytes);
  std::memcpy(h.payload, payload.data(), first);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + kSlotBytes, payload.data() + first, payload.size() - first);
  return out;
}

TraceBuilder synthetic_v3_trace(int blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  TraceBuilder b;
  const uint32_t pid = 5100;
  const uint32_t tids[2] = {5100, 5101};
  uint64_t seq[2] = {};
  uint64_t ts = 7'000'000'000;
  // Strings: 1 a name, 2 and 3 keys, 4 an attribute text, 5 a name that needs escapes.
  const std::string_view strings[] = {"", "chip.run", "slot", "delta", "mode=fast lane=2",
                                      "odd name%"};
  // Version 4: clock samples (event 9) as a drainer writes them, and a replica of the
  // reader's clock that states the converted times of records carrying TSC ticks. Ticks run at
  // ~3 per ns; a TSC record's start lies anywhere from before the first sample to past the last.
  TscClock replica{TscClock::Replay{}};
  std::vector<TscClock::Pair> samples;
  uint64_t sample_tsc = 30'000'000'000;
  uint64_t sample_ns = 9'000'000'000;
  auto new_samples = [&](int n) {
    samples.clear();
    for (int i = 0; i < n; ++i) {
      sample_tsc += 29'000'000 + rng() % 2'000'000;
      sample_ns += 10'000'000 - 500 + rng() % 1000;
      samples.push_back(TscClock::Pair{sample_tsc, sample_ns});
      replica.add(samples.back());
    }
  };
  const TscClock::Pair anchor{30'010'000'000, 9'003'000'000};
  for (int blk = 0; blk < blocks; ++blk) {
    b.begin_block();
    if (blk == 0) {
      b.process(pid, pid, ts - 1000, 1'767'225'600'000'000'000, "app");
      b.thread(pid, tids[0], "main");
      b.thread(pid, tids[1], "worker");
      for (uint16_t id = 1; id <= 5; ++id) b.string(id, strings[id]);
      new_samples(3);
      b.clock(true, samples);
    } else if (rng() % 2 == 0) {
      new_samples(1 + static_cast<int>(rng() % 2));
      b.clock(false, samples);
    }
    const int runs = 3 + static_cast<int>(rng() % 4);
    for (int r = 0; r < runs; ++r) {
      const int t = static_cast<int>(rng() % 2);
      const uint64_t first = seq[t];
      std::string slots;
      std::vector<RecordCopy> decoded;
      const int n = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < n; ++i) {
        ts += 100 + rng() % 1000;
        const uint32_t dur = rng() % 5000;
        const uint64_t s = seq[t]++;
        if (rng() % 4 == 0) {  // TSC ticks, converted by the reader
          const uint64_t tick = 29'900'000'000 + rng() % (sample_tsc - 29'800'000'000);
          const uint32_t dticks = rng() % 50'000;
          const TscClock::Interval ns = replica.span_ns(tick, dticks, anchor);
          std::string one;
          uint16_t flags;
          if (rng() % 2 == 0) {
            one = compact_slot(s, tick, dticks, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
          } else {
            one = ordinary_slots(s, tick, dticks, 0, 0, 0, "tsc.span", "k=v");
          }
          std::memcpy(&flags, one.data() + offsetof(RecordHeader, flags), sizeof flags);
          flags |= kRecordTsc;
          std::memcpy(one.data() + offsetof(RecordHeader, flags), &flags, sizeof flags);
          slots += one;
          decoded.push_back(make_record(s, ns.start_ns, ns.dur_ns, 0, 0, 0,
                                        (flags & kRecordCompact) ? "chip.run" : "tsc.span",
                                        (flags & kRecordCompact) ? "" : "k=v"));
          continue;
        }
        switch (rng() % 5) {
          case 0: {  // compact, two integer attributes, the second negative
            const uint16_t keys[2] = {2, 3};
            const uint32_t v = rng() % 1000;
            const uint32_t values[2] = {v, static_cast<uint32_t>(-7)};
            slots += compact_slot(s, ts, dur, 1, 0x9f, 2, 1, 2, keys, values, 0x2);
            decoded.push_back(make_record(s, ts, dur, 1, 0x9f, 2, "chip.run",
                                          "slot=" + std::to_string(v) + " delta=-7"));
            break;
          }
          case 1:  // compact, attribute text, a name with bytes to escape
            slots += compact_slot(s, ts, dur, 0, 0, 0, 5, 0, nullptr, nullptr, 0, 4);
            decoded.push_back(make_record(s, ts, dur, 0, 0, 0, "odd name%", "mode=fast lane=2"));
            break;
          case 2: {  // ordinary, plain text attributes over several slots
            const std::string attrs = "k=" + std::string(40 + rng() % 100, 'v');
            slots += ordinary_slots(s, ts, dur, 3, 0, 1, "node.submit", attrs);
            decoded.push_back(make_record(s, ts, dur, 3, 0, 1, "node.submit", attrs));
            break;
          }
          case 3: {  // ordinary, packed integer attributes
            char packed[64];
            uint32_t len = pack_token(packed, "big", 3, kPackedUnsigned, 5'000'000'000ull);
            len += pack_token(packed + len, "neg", 3, kPackedNegative, 42);
            slots += ordinary_slots(s, ts, dur, 0, 0, 0, "pk", std::string_view(packed, len), true);
            decoded.push_back(make_record(s, ts, dur, 0, 0, 0, "pk", "big=5000000000 neg=-42"));
            break;
          }
          default:  // compact, no attributes
            slots += compact_slot(s, ts, dur, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
            decoded.push_back(make_record(s, ts, dur, 0, 0, 0, "chip.run", ""));
        }
      }
      b.run(pid, tids[t], first, slots, decoded, anchor);
      if (rng() % 3 == 0) {
        const uint64_t k = 1 + rng() % 4;
        b.drops(pid, tids[t], k, seq[t], seq[t] + k - 1, DropReason::kRingFull);
        seq[t] += k;
      }
    }
    b.end_block();
  }
  return b;
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
