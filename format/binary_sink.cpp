#include "format/binary_sink.h"

#include "format/block_frame.h"

#include <cstring>
#include <string_view>

namespace spanring {


namespace {

template <class Body>
size_t put_event(char* out, EventType type, const Body& body, std::string_view a = {},
                 std::string_view b = {}) noexcept {
  const EventHeader eh{static_cast<uint8_t>(type), 0,
                       static_cast<uint16_t>(sizeof(Body) + a.size() + b.size())};
  char* p = out;
  std::memcpy(p, &eh, sizeof eh);
  p += sizeof eh;
  std::memcpy(p, &body, sizeof body);
  p += sizeof body;
  if (!a.empty()) std::memcpy(p, a.data(), a.size());
  p += a.size();
  if (!b.empty()) std::memcpy(p, b.data(), b.size());
  p += b.size();
  return static_cast<size_t>(p - out);
}

}  // namespace

size_t BinarySink::begin_buffer(char* out) noexcept {
  size_t at = 0;
  if (header_pending_) {
    // The first buffer of a new file carries the file header in front of its block.
    FileHeader fh{};
    std::memcpy(fh.magic, kTraceMagic, sizeof fh.magic);
    fh.version = version_;
    fh.header_bytes = kFileHeaderBytes;
    std::memcpy(out, &fh, sizeof fh);
    at = sizeof fh;
    header_pending_ = false;
  }
  // Length and CRCs are filled in by end_buffer; the sequence number is the buffer's place in
  // the file, as the drainer submits buffers in the order it begins them.
  const BlockHeader bh = open_block_header(next_seq_++);
  std::memcpy(out + at, &bh, sizeof bh);
  block_at_ = at;
  return at + sizeof bh;
}

void BinarySink::end_buffer(char* buffer, size_t len) noexcept {
  // The drainer ends the buffer it began last (one buffer is filled at a time).
  // The payload is at most the drainer's 1 MiB buffer, far below kMaxBlockPayloadBytes.
  seal_block(buffer + block_at_, len - block_at_ - kBlockHeaderBytes);
}

size_t BinarySink::process(char* out, const ProcessEvent& e) noexcept {
  const std::string_view cmdline = e.cmdline.substr(0, kMaxCmdlineBytes);
  const ProcessBody b{e.pid, e.tid, e.mono_ns, e.wall_ns, static_cast<uint32_t>(cmdline.size()),
                      0};
  return put_event(out, EventType::kProcess, b, cmdline);
}

size_t BinarySink::thread(char* out, const ThreadEvent& e) noexcept {
  const std::string_view name = e.name.substr(0, kMaxThreadNameBytes);
  const ThreadBody b{e.pid, e.tid, static_cast<uint32_t>(name.size()), 0};
  return put_event(out, EventType::kThread, b, name);
}

size_t BinarySink::span(char* out, const SpanEvent& e) noexcept {
  const RecordCopy& rec = *e.record;
  const RecordHeader& h = rec.header;
  // The drainer validated the copy: name_len <= kNameRawMax, attrs_len <= kAttrsRawMax.
  // The event of every record: header and body are fixed-size copies (plain stores), then
  // name and attributes, which lie together in the copy (RecordCopy::payload), as one copy.
  // Through put_event, whose name and attributes are two copies of variable length, it cost
  // ~90 instructions (callgrind on the demo).
  const size_t var = size_t{h.name_len} + h.attrs_len;
  const EventHeader eh{static_cast<uint8_t>(EventType::kSpan), 0,
                       static_cast<uint16_t>(sizeof(SpanBody) + var)};
  const SpanBody b{e.pid, e.tid, h.seq, h.ts_ns, h.dur_ns, h.inv, h.hid, h.depth, h.name_len,
                   h.attrs_len};
  std::memcpy(out, &eh, sizeof eh);
  std::memcpy(out + sizeof eh, &b, sizeof b);
  std::memcpy(out + sizeof eh + sizeof b, rec.payload, var);
  return sizeof eh + sizeof b + var;
}

size_t BinarySink::drops(char* out, const DropsEvent& e) noexcept {
  const DropsBody b{e.pid, e.tid, e.dropped, e.first_seq, e.last_seq,
                    static_cast<uint8_t>(e.reason), {}};
  return put_event(out, EventType::kDrops, b);
}

size_t BinarySink::unfinished(char* out, const UnfinishedEvent& e) noexcept {
  // The drainer passes at most kOpenNameBytes (what an OpenSpan holds).
  std::string_view name = e.raw_name;
  bool name_cut = e.name_cut;
  if (name.size() > kOpenNameBytes) {
    name = name.substr(0, kOpenNameBytes);
    name_cut = true;
  }
  const UnfinishedBody b{e.pid, e.tid, e.inv, e.ts_ns, e.depth,
                         static_cast<uint16_t>(name.size()),
                         static_cast<uint8_t>(name_cut ? 1 : 0), 0};
  return put_event(out, EventType::kUnfinished, b, name);
}

size_t BinarySink::undescribed(char* out, const UndescribedEvent& e) noexcept {
  // The drainer counts at most the open spans of one thread, far below 2^32.
  const UndescribedBody b{e.pid, e.tid, static_cast<uint32_t>(e.count), 0};
  return put_event(out, EventType::kUndescribed, b);
}

size_t BinarySink::string(char* out, uint32_t id, std::string_view bytes) noexcept {
  const StringBody b{static_cast<uint16_t>(id), static_cast<uint16_t>(bytes.size()), 0};
  return put_event(out, EventType::kString, b, bytes);
}

size_t BinarySink::begin_run(char* out, uint32_t pid, uint32_t tid, uint64_t first_seq,
                             TscClock::Pair anchor) noexcept {
  const RunBody b{pid, tid, first_seq, 0, 0};
  if (version_ < 4) {
    std::memcpy(out + sizeof(EventHeader), &b, sizeof b);
    return sizeof(EventHeader) + sizeof b;
  }
  const RunBody4 b4{b, anchor.tsc, anchor.ns};
  std::memcpy(out + sizeof(EventHeader), &b4, sizeof b4);
  return sizeof(EventHeader) + sizeof b4;
}

size_t BinarySink::clock(char* out, bool reset, const TscClock::Pair* samples,
                         uint32_t n) noexcept {
  // n <= kMaxClockSamplesPerEvent (the drainer's chunks): the body fits body_bytes.
  const ClockBody b{n, static_cast<uint8_t>(reset ? 1 : 0), {}};
  const EventHeader eh{static_cast<uint8_t>(EventType::kClock), 0,
                       static_cast<uint16_t>(sizeof b + size_t{n} * sizeof(ClockSample))};
  char* p = out;
  std::memcpy(p, &eh, sizeof eh);
  p += sizeof eh;
  std::memcpy(p, &b, sizeof b);
  p += sizeof b;
  static_assert(sizeof(TscClock::Pair) == sizeof(ClockSample));
  if (n != 0) std::memcpy(p, samples, size_t{n} * sizeof(ClockSample));
  return sizeof eh + sizeof b + size_t{n} * sizeof(ClockSample);
}

void BinarySink::end_run(char* out, uint32_t slots, uint32_t records) noexcept {
  // slots <= kMaxRunSlots: the body fits body_bytes' 16 bits.
  const size_t body = version_ >= 4 ? sizeof(RunBody4) : sizeof(RunBody);
  const EventHeader eh{static_cast<uint8_t>(EventType::kRun), 0,
                       static_cast<uint16_t>(body + size_t{slots} * kSlotBytes)};
  std::memcpy(out, &eh, sizeof eh);
  std::memcpy(out + sizeof eh + offsetof(RunBody, slots), &slots, sizeof slots);
  std::memcpy(out + sizeof eh + offsetof(RunBody, records), &records, sizeof records);
}

}  // namespace spanring
