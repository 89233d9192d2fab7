// The binary trace format (format/binary_format.h): what BinarySink writes reads back as the same
// events, rendered byte-identically by TextSink; a file cut anywhere reads up to its last
// complete block and says where it was cut; corrupt files are refused with the byte offset.
#include "binary_util.h"
#include "drain/resume.h"
#include "format/block_frame.h"
#include "tools/convert.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>
#include <string>
#include <unistd.h>

using namespace spanring;
using namespace binary_test;

namespace {

// Overwrites a block header field and recomputes the header CRC (so that the check behind the
// CRC is the one that fires).
void set_payload_bytes(std::string& bytes, uint64_t block_at, uint32_t value, bool fix_crc) {
  BlockHeader h;
  std::memcpy(&h, bytes.data() + block_at, sizeof h);
  h.payload_bytes = value;
  if (fix_crc) h.header_crc = crc32c(&h, offsetof(BlockHeader, header_crc));
  std::memcpy(bytes.data() + block_at, &h, sizeof h);
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_SUITE("binary") {

TEST_CASE("a sealed block checks good, and each framing rule fails on its own field") {
  char block[kBlockHeaderBytes + 5];
  const BlockHeader open = open_block_header(7);
  std::memcpy(block, &open, sizeof open);
  std::memcpy(block + kBlockHeaderBytes, "hello", 5);
  seal_block(block, 5);
  BlockHeader h;
  std::memcpy(&h, block, sizeof h);
  CHECK(check_block_header(h) == BlockCheck::kGood);
  CHECK(h.magic == kBlockMagic);
  CHECK(h.seq == 7);
  CHECK(h.payload_bytes == 5);
  CHECK(h.payload_crc == crc32c("hello", 5));
  CHECK(h.header_crc == crc32c(&h, offsetof(BlockHeader, header_crc)));
  CHECK(block_payload_crc(block + kBlockHeaderBytes, 5) == h.payload_crc);

  BlockHeader moved = h;
  renumber_block(moved, 9);  // a block copied into another file: new seq, same payload CRC
  CHECK(check_block_header(moved) == BlockCheck::kGood);
  CHECK(moved.seq == 9);
  CHECK(moved.payload_crc == h.payload_crc);

  BlockHeader bad = h;
  bad.magic ^= 1;
  CHECK(check_block_header(bad) == BlockCheck::kBadMagic);
  bad = h;
  bad.seq ^= 1;  // any byte of the first 20 without a new header CRC
  CHECK(check_block_header(bad) == BlockCheck::kBadHeaderCrc);
  bad = h;
  bad.payload_bytes = kMaxBlockPayloadBytes + 1;
  bad.header_crc = block_header_crc(bad);
  CHECK(check_block_header(bad) == BlockCheck::kTooLong);
  bad.payload_bytes = kMaxBlockPayloadBytes;
  bad.header_crc = block_header_crc(bad);
  CHECK(check_block_header(bad) == BlockCheck::kGood);
}

TEST_CASE("crc32c is CRC-32C (Castagnoli) and chains over pieces") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);  // the standard check value
  CHECK(crc32c("", 0) == 0u);
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 7 + 3);
  for (size_t cut : {0, 1, 7, 8, 9, 63, 500, 999, 1000}) {
    const uint32_t a = crc32c(data.data(), cut);
    CHECK(crc32c(data.data() + cut, data.size() - cut, a) == crc32c(data.data(), data.size()));
  }
  // Unaligned starts give the same value as an aligned copy.
  std::string copy = " " + data;
  CHECK(crc32c(copy.data() + 1, data.size()) == crc32c(data.data(), data.size()));
}

TEST_CASE("crc32c of large buffers, instruction and Boost paths, equals a bit-by-bit CRC-32C") {
  auto reference = [](const std::string& d) {
    uint32_t c = ~0u;
    for (unsigned char b : d) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
  };
  std::string data;
  uint32_t x = 12345;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1103515245u + 12345u;
    data += static_cast<char>(x >> 24);
  }
  for (size_t n : {size_t{12287}, size_t{12288}, size_t{12289}, size_t{24576 + 13},
                   size_t{100000}}) {
    CAPTURE(n);
    const std::string d = data.substr(0, n);
    CHECK(crc32c(d.data(), d.size()) == reference(d));
    CHECK(crc32c(d.data() + 5, d.size() - 5, crc32c(d.data(), 5)) == reference(d));
    CHECK(crc32c_portable(d.data(), d.size()) == reference(d));
    CHECK(crc32c_portable(d.data() + 5, d.size() - 5, crc32c_portable(d.data(), 5)) ==
          reference(d));
  }
}

TEST_CASE("crc32c matches the RFC 3720 (iSCSI) CRC32C test vectors") {
  // RFC 3720, B.4: the CRC of each 32-byte pattern, given there as the bytes stored in the
  // iSCSI header (little-endian), here as the value.
  unsigned char buf[32];
  std::memset(buf, 0x00, sizeof buf);
  CHECK(crc32c(buf, 32) == 0x8A9136AAu);
  std::memset(buf, 0xFF, sizeof buf);
  CHECK(crc32c(buf, 32) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(i);
  CHECK(crc32c(buf, 32) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(31 - i);
  CHECK(crc32c(buf, 32) == 0x113FDB5Cu);
  // An iSCSI read command PDU (48 bytes).
  const unsigned char pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                 0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(crc32c(pdu, 48) == 0xD9963A56u);
  for (auto* f : {&crc32c_portable, &crc32c_one_stream}) {
    std::memset(buf, 0x00, sizeof buf);
    CHECK(f(buf, 32, 0) == 0x8A9136AAu);
    CHECK(f(pdu, 48, 0) == 0xD9963A56u);
  }
}

TEST_CASE("crc32c (three streams) equals the one-stream sum at every length 0..4096, any start") {
  std::vector<unsigned char> data(4096 + 16 + 3 * 8192 * 2);
  uint32_t x = 987654321;
  for (auto& b : data) {
    x = x * 1103515245u + 12345u;
    b = static_cast<unsigned char>(x >> 24);
  }
  for (size_t start = 0; start < 8; ++start) {
    CAPTURE(start);
    for (size_t n = 0; n <= 4096; ++n) {
      const unsigned char* p = data.data() + start;
      if (crc32c(p, n) != crc32c_one_stream(p, n)) {
        CAPTURE(n);
        CHECK(crc32c(p, n) == crc32c_one_stream(p, n));
        break;
      }
      // Continued from a non-zero CRC too (the first stream starts from the running register).
      if (crc32c(p, n, 0xDEADBEEFu) != crc32c_one_stream(p, n, 0xDEADBEEFu)) {
        CAPTURE(n);
        CHECK(crc32c(p, n, 0xDEADBEEFu) == crc32c_one_stream(p, n, 0xDEADBEEFu));
        break;
      }
    }
  }
  // Around the long turns (3 x 8 KiB) and their mix with short turns and the tail.
  for (size_t n : {size_t{24575}, size_t{24576}, size_t{24577}, size_t{24576 + 767},
                   size_t{24576 + 768}, size_t{24576 + 769}, size_t{49151}, size_t{49152},
                   size_t{49152 + 768 * 3 + 7}}) {
    for (size_t start : {size_t{0}, size_t{1}, size_t{7}, size_t{13}}) {
      CAPTURE(n);
      CAPTURE(start);
      CHECK(crc32c(data.data() + start, n) == crc32c_one_stream(data.data() + start, n));
      CHECK(crc32c(data.data() + start, n) == crc32c_portable(data.data() + start, n));
    }
  }
}

TEST_CASE("every event BinarySink writes reads back and renders exactly as TextSink wrote it") {
  const TraceBuilder b = synthetic_trace(6);
  TextRenderer r;
  uint64_t last = 0;
  const ReadResult res = read_bytes(b.bytes, r, &last);
  INFO(res.message);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.format == "spanring binary trace v4");
  CHECK(res.units == 6);
  CHECK(last == 5);
  CHECK(res.good_bytes == b.bytes.size());
  CHECK(res.notes.empty());
  CHECK(r.events == res.events);
  CHECK(r.text == b.text);  // byte-identical to the text drainer's formatting of the same calls
  // Metadata the text format has no room for comes back too.
  REQUIRE(r.cmdlines.size() == 2);
  CHECK(r.cmdlines[0] == std::string("/usr/bin/app\0--flag\0value", 25));
  CHECK(r.cmdlines[1].size() == kMaxCmdlineBytes);  // cut at 4 KiB
  REQUIRE(r.thread_names.size() == 3);
  CHECK(r.thread_names[1] == "worker-1");
  CHECK(r.thread_names[2] == "chip\xc3\xa9");
}

TEST_CASE("the largest event fits max_event_bytes and a full process event reads back") {
  BinarySink sink;
  std::vector<char> buf(1 << 16);
  const std::string cmdline(100000, 'x');
  const size_t n = sink.process(buf.data(), ProcessEvent{1, 1, 2, 3, cmdline});
  CHECK(n == kMaxBinaryEventBytes);
  CHECK(n <= sink.max_event_bytes());
  const RecordCopy big = make_record(0, 1, 2, 3, 4, 5, std::string(kNameRawMax, 'n'),
                                     std::string(kAttrsRawMax, 'a'));
  CHECK(sink.span(buf.data(), SpanEvent::of(1, 1, big)) <= sink.max_event_bytes());
}

TEST_CASE("an empty trace is a header and empty blocks, and reads as complete with no events") {
  TraceBuilder b;
  b.begin_block();
  b.end_block();
  CHECK(b.bytes.size() == kFileHeaderBytes + kBlockHeaderBytes);
  TextRenderer r;
  const ReadResult res = read_bytes(b.bytes, r);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.units == 1);
  CHECK(r.events == 0);
  // Only the file header: no block at all, still a (complete, empty) trace.
  const ReadResult hdr = read_bytes(b.bytes.substr(0, kFileHeaderBytes), r);
  CHECK(hdr.status == ReadResult::Status::kComplete);
  CHECK(hdr.units == 0);
}

TEST_CASE("a resumed sink appends blocks without a file header and continues the numbering") {
  TraceBuilder first = synthetic_trace(3);
  TraceBuilder more(false, 3);
  more.begin_block();
  more.process(4300, 4300, 10, 20, "x");
  more.span(4300, 4300, make_record(0, 11, 1, 0, 0, 0, "late", ""));
  more.end_block();
  const std::string file = first.bytes + more.bytes;
  TextRenderer r;
  uint64_t last = 0;
  const ReadResult res = read_bytes(file, r, &last);
  INFO(res.message);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.notes.empty());  // no gap in the block numbers
  CHECK(last == 3);
  CHECK(r.text == first.text + more.text);

  // What `spanring drain` reads from a kept prefix: its pids and the next block number.
  char path[] = "/tmp/spanring-binary-prefix-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size()));
  ::close(fd);
  const KeptPrefix p = scan_binary_prefix(path, first.bytes.size());
  CHECK(p.next_block_seq == 3);
  CHECK(p.pids == std::unordered_set<uint32_t>{4200, 4242});
  const KeptPrefix all = scan_binary_prefix(path, file.size());
  CHECK(all.next_block_seq == 4);
  CHECK(all.pids.count(4300) == 1);
  // A prefix that ends inside a block is no committed prefix.
  CHECK_THROWS_WITH_AS(scan_binary_prefix(path, first.bytes.size() - 1),
                       doctest::Contains("not a complete binary trace"), Error);
  ::unlink(path);
}

TEST_CASE("a file cut at every 997th byte reads up to its last complete block and says where") {
  const TraceBuilder b = synthetic_trace(40);
  const std::vector<uint64_t> ends = block_ends(b.bytes);
  REQUIRE(ends.size() == 41);
  REQUIRE(ends.back() == b.bytes.size());
  // The text of the first k blocks, for every k.
  std::vector<std::string> text_upto(ends.size());
  for (size_t k = 0; k < ends.size(); ++k) {
    TextRenderer r;
    const ReadResult res = read_bytes(b.bytes.substr(0, ends[k]), r);
    REQUIRE(res.status == ReadResult::Status::kComplete);
    text_upto[k] = r.text;
  }
  size_t cuts = 0;
  for (uint64_t cut = 0; cut < b.bytes.size(); cut += 997) {
    CAPTURE(cut);
    TextRenderer r;
    const ReadResult res = read_bytes(b.bytes.substr(0, cut), r);
    if (cut == 0) {
      CHECK(res.status == ReadResult::Status::kNotATrace);  // an empty file has no magic
      continue;
    }
    // The last block end at or before the cut.
    size_t k = 0;
    while (k + 1 < ends.size() && ends[k + 1] <= cut) ++k;
    if (cut < kFileHeaderBytes) {
      CHECK(res.status == ReadResult::Status::kCut);
      CHECK(contains(res.message, "inside its 32-byte file header"));
      CHECK(r.text.empty());
      continue;
    }
    if (ends[k] == cut) {
      CHECK(res.status == ReadResult::Status::kComplete);
    } else {
      CHECK(res.status == ReadResult::Status::kCut);
      CHECK(contains(res.message, "the file is cut at byte " + std::to_string(cut)));
      // Inside a block header ("the block starting at byte X") or its payload ("block N that
      // starts at byte X"): either way the incomplete block's start is named.
      CHECK((contains(res.message, "starts at byte " + std::to_string(ends[k])) ||
             contains(res.message, "starting at byte " + std::to_string(ends[k]))));
      CHECK(contains(res.message, "the " + std::to_string(k) + " complete block"));
      CHECK(res.error_offset == cut);
    }
    CHECK(res.good_bytes == ends[k]);
    CHECK(res.units == k);
    CHECK(r.text == text_upto[k]);
    ++cuts;
  }
  CHECK(cuts > 20);
}

TEST_CASE("corrupt files are refused with what is wrong and the byte offset") {
  const TraceBuilder b = synthetic_trace(4);
  const std::vector<uint64_t> ends = block_ends(b.bytes);
  REQUIRE(ends.size() == 5);
  const uint64_t block2 = ends[2];  // the third block starts here

  SUBCASE("a flipped byte in a block's payload: payload checksum, nothing of that block") {
    std::string f = b.bytes;
    f[block2 + kBlockHeaderBytes + 40] ^= 0x10;
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "block 2 at byte " + std::to_string(block2)));
    CHECK(contains(res.message, "payload checksum mismatch"));
    CHECK(res.error_offset == block2 + kBlockHeaderBytes);
    // Blocks 0 and 1 were delivered, block 2 not at all.
    TextRenderer two;
    read_bytes(b.bytes.substr(0, block2), two);
    CHECK(r.text == two.text);
  }
  SUBCASE("a flipped byte in a block header: header checksum") {
    std::string f = b.bytes;
    f[block2 + 9] ^= 0x01;  // inside seq
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "byte " + std::to_string(block2) +
                                    ": block header checksum mismatch"));
  }
  SUBCASE("bad file magic: not a binary trace") {
    std::string f = b.bytes;
    f[1] = 'X';
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kNotATrace);
    CHECK(contains(res.message, "does not start with the spanring binary magic"));
  }
  SUBCASE("bad block magic") {
    std::string f = b.bytes;
    f[block2] = 'X';
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "byte " + std::to_string(block2) + ": bad block magic"));
  }
  SUBCASE("an unknown version") {
    std::string f = b.bytes;
    f[8] = 5;
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "byte 8: unsupported format version 5 (this spanring reads "
                                "versions 1..4)"));
    CHECK(r.events == 0);
  }
  SUBCASE("a huge length with a valid header checksum: over the limit") {
    std::string f = b.bytes;
    set_payload_bytes(f, block2, 0xfffffff0u, true);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "claims a length of 4294967280 bytes, more than the limit"));
    CHECK(res.error_offset == block2 + 4);
  }
  SUBCASE("a huge length without a matching header checksum: header checksum") {
    std::string f = b.bytes;
    set_payload_bytes(f, block2, 0xfffffff0u, false);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "block header checksum mismatch"));
  }
  SUBCASE("a length within the limit but past the end of the file: cut, not corrupt") {
    std::string f = b.bytes.substr(0, ends[3]);
    set_payload_bytes(f, block2, (1u << 20), true);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCut);
    CHECK(res.good_bytes == block2);
  }
  SUBCASE("a malformed event behind valid checksums: malformed event at its byte") {
    std::string f = b.bytes;
    const uint64_t ev = block2 + kBlockHeaderBytes;  // the block's first event
    f[ev] = 99;                                      // its type
    fix_crcs(f);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "byte " + std::to_string(ev) + " (block 2 at byte " +
                                    std::to_string(block2) + "): malformed event: unknown event "
                                    "type 99"));
  }
  SUBCASE("an event length running past its block") {
    std::string f = b.bytes;
    const uint64_t ev = block2 + kBlockHeaderBytes;
    f[ev + 2] = static_cast<char>(0xff);
    f[ev + 3] = static_cast<char>(0x7f);
    fix_crcs(f);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "runs past the end of its block"));
  }
  SUBCASE("blocks out of order") {
    const std::string f = b.bytes.substr(0, ends[3]) + b.bytes.substr(ends[1], ends[2] - ends[1]);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "block sequence number 1 after 2"));
  }
  SUBCASE("a missing block (a failed write) is a note, not an error") {
    const std::string f = b.bytes.substr(0, ends[1]) + b.bytes.substr(ends[2]);
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kComplete);
    REQUIRE(res.notes.size() == 1);
    CHECK(contains(res.notes[0], "blocks 1..1 are missing before byte " + std::to_string(ends[1])));
  }
}

}  // TEST_SUITE("binary")

TEST_CASE("drop reasons max_size and overwritten read from a version-2 file and are refused in "
          "version 1") {
  TraceBuilder b;
  b.begin_block();
  b.drops(7, 8, 10, 0, 9, DropReason::kOverwritten);
  b.span(7, 8, make_record(10, 1000, 5, 0, 0, 0, "x", ""));
  b.end_block();
  CHECK(contains(b.text, "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=10 first_seq=0 last_seq=9 "
                         "reason=overwritten\n"));
  SUBCASE("version 1: a malformed event") {
    std::string f = b.bytes;
    f[8] = 1;  // the file header's version (no checksum covers it)
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "drop reason 8 (version 1 has 1..6)"));
    CHECK(r.events == 0);
  }
  SUBCASE("version 2: read and rendered as [STRACE] text") {
    std::string f = b.bytes;
    f[8] = 2;
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kComplete);
    CHECK(res.format == "spanring binary trace v2");
    CHECK(r.text == b.text);
  }
}

// ---- version 3: string definitions (event 7) and runs of ring records (event 8)

TEST_CASE("version 3: runs of compact, ordinary and packed records read back as the records they hold") {
  const TraceBuilder b = synthetic_v3_trace(4, 11);
  TextRenderer r;
  const ReadResult res = read_bytes(b.bytes, r);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.format == "spanring binary trace v4");
  CHECK(res.notes.empty());
  REQUIRE(!b.text.empty());
  CHECK(r.text == b.text);  // the text of each record as stated by hand in synthetic_v3_trace
  CHECK(contains(r.text, "name=odd%20name%25 ts="));
  CHECK(contains(r.text, " big=5000000000 neg=-42\n"));
  CHECK(contains(r.text, " delta=-7\n"));
}

TEST_CASE("version 3: a record naming an undefined string id, or not decoding, is one counted corrupt drop") {
  TraceBuilder b;
  b.begin_block();
  b.string(1, "defined");
  const uint16_t keys[1] = {1};
  const uint32_t values[1] = {5};
  std::string slots = compact_slot(0, 100, 1, 0, 0, 0, 1, 1, keys, values, 0);
  slots += compact_slot(1, 200, 1, 0, 0, 0, 9, 0, nullptr, nullptr, 0);     // id 9: undefined
  slots += ordinary_slots(2, 300, 1, 0, 0, 0, std::string("n\0l", 3), "");  // NUL in a name
  char bad_packed[2] = {static_cast<char>(0x7f), 0};                           // unknown kind
  slots += ordinary_slots(3, 400, 1, 0, 0, 0, "p", std::string_view(bad_packed, 2), true);
  slots += compact_slot(4, 500, 1, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
  b.run(7, 8, 0, slots, std::vector<RecordCopy>(5));  // 5 records (b.text is not used)
  b.end_block();
  TextRenderer r;
  const ReadResult res = read_bytes(b.bytes, r);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(r.text ==
        "[mono_ns=101][T0x8][TIMING] emit_host_span: [STRACE] v=1 pid=7 tid=8 inv=0 hid=0 "
        "depth=0 name=defined ts=100 dur=1 defined=5\n"
        "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=1 last_seq=1 reason=corrupt\n"
        "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=2 last_seq=2 reason=corrupt\n"
        "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=3 last_seq=3 reason=corrupt\n"
        "[mono_ns=501][T0x8][TIMING] emit_host_span: [STRACE] v=1 pid=7 tid=8 inv=0 hid=0 "
        "depth=0 name=defined ts=500 dur=1 \n");
  REQUIRE(res.notes.size() == 1);
  CHECK(contains(res.notes[0], "3 records of runs could not be decoded"));
  CHECK(contains(res.notes[0], "string id 9 is not defined"));
}

TEST_CASE("version 3: a run whose framing is wrong is a malformed event, and events 7 and 8 need version 3") {
  auto one_run = [](const std::string& slots, uint32_t records, uint64_t first_seq = 0,
                    uint32_t version = kTraceVersion) {
    TraceBuilder b;
    b.set_version(version);
    b.begin_block();
    b.string(1, "s");
    b.run(7, 8, first_seq, slots, {});
    b.end_block();
    // end_run was told 0 records: write the count asked for into the run body.
    const size_t run_at = kFileHeaderBytes + kBlockHeaderBytes + sizeof(EventHeader) +
                          sizeof(StringBody) + 1 + sizeof(EventHeader);
    std::string f = b.bytes;
    std::memcpy(f.data() + run_at + offsetof(RunBody, records), &records, sizeof records);
    fix_crcs(f);
    return f;
  };
  const std::string good = compact_slot(0, 1, 1, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
  {
    TextRenderer r;
    CHECK(read_bytes(one_run(good, 1), r).status == ReadResult::Status::kComplete);
    CHECK(r.events == 1);
  }
  struct Case {
    const char* what;
    std::string file;
    const char* says;
  };
  std::string tsc = good;
  const uint16_t tsc_flags = kRecordCompact | kRecordTsc;
  std::memcpy(tsc.data() + offsetof(CompactRecord, flags), &tsc_flags, 2);
  const Case cases[] = {
      {"no records", one_run(good, 0), "claims 0 records"},
      {"more records than slots", one_run(good, 2), "claims 2 records"},
      {"fewer records than the slots hold", one_run(good + good, 1), "holds 1 records in 1 slots"},
      {"a compact record's sequence", one_run(good, 1, 5), "has sequence low bits 0, expected 5"},
      {"a TSC time left in a version 3 run", one_run(tsc, 1, 0, 3), "bad flags 20"},
      {"an ordinary record past the run",
       one_run(ordinary_slots(0, 1, 1, 0, 0, 0, "n", std::string(30, 'a')).substr(0, 64), 1),
       "claims 2 slots (1 published)"},
      {"an ordinary record's sequence", one_run(ordinary_slots(3, 1, 1, 0, 0, 0, "n", ""), 1),
       "has sequence 3 (its place says 0)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    TextRenderer r;
    const ReadResult res = read_bytes(c.file, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK_MESSAGE(contains(res.message, c.says), res.message);
    CHECK(r.events == 0);  // nothing of the bad block
  }
  std::string v2 = one_run(good, 1);
  v2[8] = 2;
  TextRenderer r;
  const ReadResult res = read_bytes(v2, r);
  CHECK(res.status == ReadResult::Status::kCorrupt);
  CHECK(contains(res.message, "string event in a version 2 file"));
}

// ---- version 4: the drainer's clock samples (event 9) and runs that keep TSC times

namespace {

// Writes the whole clock `c` as a drainer does after a reset: chunks of at most
// kMaxClockSamplesPerEvent, the first with reset.
void whole_clock(TraceBuilder& b, const TscClock& c) {
  const std::vector<TscClock::Pair>& all = c.samples();
  size_t done = 0;
  do {
    const size_t k = std::min<size_t>(all.size() - done, kMaxClockSamplesPerEvent);
    b.clock(done == 0, std::vector<TscClock::Pair>(all.begin() + static_cast<ptrdiff_t>(done),
                                                   all.begin() + static_cast<ptrdiff_t>(done + k)));
    done += k;
  } while (done < all.size());
}

}  // namespace

TEST_CASE("version 4: TSC times of runs convert as the drainer's clock would, at every sample boundary, through resets and the clock's thinning") {
  // The drainer's clock gains samples one at a time (as maybe_sample adds them) and the file
  // carries each as event 9; every run's TSC records must read back as span_ns() of the
  // drainer's clock at that point: ticks before the first sample, on a sample and one off it,
  // between two, past the last, around the owner's anchor. 9,000 samples: the clock thins
  // itself twice (kMaxSamples), and the reader must thin alike.
  std::mt19937_64 rng(23);
  TscClock drainer({{1'000'000'000, 5'000'000'000}, {1'030'000'000, 5'010'000'000}});
  TraceBuilder b;
  b.begin_block();
  b.string(1, "t");
  whole_clock(b, drainer);
  uint64_t seq = 0;
  uint64_t tsc_records = 0;
  for (int round = 0; round < 9000; ++round) {
    const TscClock::Pair last = drainer.samples().back();
    const TscClock::Pair p{last.tsc + 29'000'000 + rng() % 2'000'000,
                           last.ns + 10'000'000 - 300 + rng() % 600};
    REQUIRE(drainer.add(p));
    b.clock(false, {p});
    // A sample that does not rise: the drainer's add() ignores it, so a file never holds it.
    CHECK(!drainer.add(TscClock::Pair{p.tsc, p.ns + 5}));
    if (round == 6000) whole_clock(b, drainer);  // a reset mid-file (a failed write's)
    const std::vector<TscClock::Pair>& all = drainer.samples();
    const TscClock::Pair some = all[rng() % all.size()];
    const TscClock::Pair anchors[] = {{0, 0},
                                      {some.tsc + 7, some.ns + 2},
                                      {p.tsc + 1'000, p.ns + 400},
                                      {all.front().tsc - 50, all.front().ns - 10}};
    const TscClock::Pair anchor = anchors[rng() % 4];
    const uint64_t ticks[] = {all.front().tsc - 1'000'000, some.tsc, some.tsc - 1, some.tsc + 1,
                              p.tsc, p.tsc - 1, p.tsc + 1 + rng() % 50'000'000,
                              anchor.tsc, anchor.tsc - 1, anchor.tsc + 1,
                              some.tsc + rng() % 30'000'000};
    std::string slots;
    std::vector<RecordCopy> decoded;
    const uint64_t first = seq;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const uint64_t t = ticks[rng() % (sizeof ticks / sizeof ticks[0])];
      const auto dur = static_cast<uint32_t>(rng() % 3 == 0 ? 0 : rng() % 90'000'000);
      std::string one = compact_slot(seq, t, dur, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
      const uint16_t flags = kRecordCompact | kRecordTsc;
      std::memcpy(one.data() + offsetof(CompactRecord, flags), &flags, sizeof flags);
      slots += one;
      const TscClock::Interval ns = drainer.span_ns(t, dur, anchor);
      decoded.push_back(make_record(seq, ns.start_ns, ns.dur_ns, 0, 0, 0, "t", ""));
      ++seq;
      ++tsc_records;
    }
    b.run(7, 8, first, slots, decoded, anchor);
  }
  b.end_block();
  CHECK(drainer.samples().size() < TscClock::kMaxSamples);  // it thinned
  TextRenderer r;
  const ReadResult res = read_bytes(b.bytes, r);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.notes.empty());
  CHECK(tsc_records > 20'000);
  CHECK(r.text == b.text);
}

TEST_CASE("version 4: a TSC record before any clock event is one counted corrupt drop; event 9 is checked") {
  TraceBuilder b;
  b.begin_block();
  b.string(1, "t");
  std::string tsc = compact_slot(0, 1'000, 10, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
  const uint16_t flags = kRecordCompact | kRecordTsc;
  std::memcpy(tsc.data() + offsetof(CompactRecord, flags), &flags, sizeof flags);
  b.run(7, 8, 0, tsc + compact_slot(1, 2'000, 10, 0, 0, 0, 1, 0, nullptr, nullptr, 0),
        std::vector<RecordCopy>(2), TscClock::Pair{500, 100});
  // An empty clock (a drainer without a TSC): a tick at or past the anchor reads as the
  // anchor's ns, as the drainer's to_ns gives it.
  b.clock(true, {});
  std::string tsc2 = tsc;
  const uint32_t lo = 2;
  std::memcpy(tsc2.data() + offsetof(CompactRecord, seq_lo), &lo, sizeof lo);
  b.run(7, 8, 2, tsc2, std::vector<RecordCopy>(1), TscClock::Pair{500, 100});
  b.end_block();
  TextRenderer r;
  const ReadResult res = read_bytes(b.bytes, r);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(r.text ==
        "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=0 last_seq=0 reason=corrupt\n"
        "[mono_ns=2010][T0x8][TIMING] emit_host_span: [STRACE] v=1 pid=7 tid=8 inv=0 hid=0 "
        "depth=0 name=t ts=2000 dur=10 \n"
        "[mono_ns=100][T0x8][TIMING] emit_host_span: [STRACE] v=1 pid=7 tid=8 inv=0 hid=0 "
        "depth=0 name=t ts=100 dur=0 \n");
  REQUIRE(res.notes.size() == 1);
  CHECK(contains(res.notes[0], "no clock event precedes it"));

  // Records that frame (slot count, flags, sequence) but fail the decoder's checks, which the
  // version 4 drainer leaves to the reader: lengths that do not give the slot count, a compact
  // attribute count past 4. Each is one counted corrupt drop; the run goes on around them.
  {
    TraceBuilder d;
    d.begin_block();
    d.string(1, "t");
    d.clock(true, {});
    std::string slots = compact_slot(0, 100, 1, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
    std::string bad_len = ordinary_slots(1, 200, 1, 0, 0, 0, "nm", "");
    const uint16_t name_len = 0;  // no name, and lengths that no longer give the slot count
    std::memcpy(bad_len.data() + offsetof(RecordHeader, name_len), &name_len, sizeof name_len);
    slots += bad_len;
    std::string bad_count = compact_slot(2, 300, 1, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
    bad_count[offsetof(CompactRecord, attrs)] = 5;
    slots += bad_count;
    slots += ordinary_slots(3, 400, 1, 0, 0, 0, "nm", std::string(100, 'a'));
    d.run(7, 8, 0, slots, std::vector<RecordCopy>(4));
    d.end_block();
    TextRenderer dr;
    const ReadResult dres = read_bytes(d.bytes, dr);
    CHECK(dres.status == ReadResult::Status::kComplete);
    CHECK(contains(dr.text, "name=t ts=100 dur=1 \n"
                            "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=1 last_seq=1 "
                            "reason=corrupt\n"
                            "[SPANRING_DROPS] v=1 pid=7 tid=8 dropped=1 first_seq=2 last_seq=2 "
                            "reason=corrupt\n"));
    CHECK(contains(dr.text, "name=nm ts=400 dur=1 aaaa"));
    REQUIRE(dres.notes.size() == 1);
    CHECK(contains(dres.notes[0], "2 records of runs could not be decoded"));
  }

  // Event 9's own checks: count against the body, reset 0/1, the reserved bytes, and version 4.
  auto with_clock = [](uint32_t count, uint8_t reset, size_t extra, uint32_t version) {
    TraceBuilder c;
    c.set_version(version);
    c.begin_block();
    c.clock(reset != 0, std::vector<TscClock::Pair>(count, TscClock::Pair{1, 1}));
    c.end_block();
    std::string f = c.bytes;
    const size_t ev = kFileHeaderBytes + kBlockHeaderBytes;
    if (reset > 1) f[ev + sizeof(EventHeader) + offsetof(ClockBody, reset)] = static_cast<char>(reset);
    if (extra != 0) {
      uint32_t bad = count + static_cast<uint32_t>(extra);
      std::memcpy(f.data() + ev + sizeof(EventHeader), &bad, sizeof bad);
    }
    fix_crcs(f);
    return f;
  };
  struct Case {
    const char* what;
    std::string file;
    const char* says;
  };
  const Case cases[] = {
      {"a count the body does not hold", with_clock(2, 0, 1, kTraceVersion), "clock event of 40 bytes, expected 8 + 48"},
      {"reset 2", with_clock(1, 2, 0, kTraceVersion), "reset 2"},
      {"a clock event in a version 3 file", with_clock(1, 1, 0, 3), "clock event in a version 3 file"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    TextRenderer rr;
    const ReadResult cr = read_bytes(c.file, rr);
    CHECK(cr.status == ReadResult::Status::kCorrupt);
    CHECK_MESSAGE(contains(cr.message, c.says), cr.message);
  }
}

TEST_CASE("version 3: every 7th byte flipped and every 13th cut, with and without repaired checksums: refused or read, damage counted, never a crash") {
  const TraceBuilder b = synthetic_v3_trace(3, 5);
  TextRenderer whole;
  REQUIRE(read_bytes(b.bytes, whole).status == ReadResult::Status::kComplete);
  uint64_t refused = 0, read_whole = 0, damaged = 0;
  for (size_t at = 0; at < b.bytes.size(); at += 7) {
    for (bool repair : {false, true}) {
      std::string f = b.bytes;
      f[at] = static_cast<char>(f[at] ^ 0x5a);
      if (repair) fix_crcs(f);
      TextRenderer r;
      const ReadResult res = read_bytes(f, r);
      CAPTURE(at);
      CAPTURE(repair);
      if (res.status == ReadResult::Status::kComplete) {
        ++read_whole;
        if (!res.notes.empty()) ++damaged;
      } else {
        ++refused;
        CHECK(!res.message.empty());
        CHECK(res.good_bytes <= f.size());
      }
      if (!repair && at >= kFileHeaderBytes)  // a checksum covers every block byte
        CHECK(res.status != ReadResult::Status::kComplete);
    }
  }
  for (size_t cut = 0; cut < b.bytes.size(); cut += 13) {
    TextRenderer r;
    const ReadResult res = read_bytes(b.bytes.substr(0, cut), r);
    CHECK(res.status != ReadResult::Status::kCorrupt);
    CHECK(whole.text.compare(0, r.text.size(), r.text) == 0);  // a prefix of the whole
  }
  MESSAGE("v3 flips: ", refused, " refused, ", read_whole, " read (", damaged,
          " with damage counted)");
  CHECK(refused > 0);
  CHECK(damaged > 0);  // a repaired flip in a string id or a packed token reads as a counted drop
}

// ---- convert's direct line: a run's records formatted from the run's bytes (text_lines)

namespace {

// A visitor like convert's: every event through one TextSink into one TraceOutput, with text
// lines for the records of runs; counts the records that reach span() instead.
class LinesWriter final : public EventVisitor {
 public:
  explicit LinesWriter(TraceOutput& out) : out_(out), lines_{sink_, out_} {}
  uint64_t span_calls = 0;
  void process(const ProcessEvent& e) override {
    out_.commit(sink_.process(out_.room(kMaxLineBytes), e));
  }
  void span(const SpanEvent& e) override {
    ++span_calls;
    out_.commit(sink_.span(out_.room(kMaxLineBytes), e));
  }
  void drops(const DropsEvent& e) override { out_.commit(sink_.drops(out_.room(kMaxLineBytes), e)); }
  void unfinished(const UnfinishedEvent& e) override {
    out_.commit(sink_.unfinished(out_.room(kMaxLineBytes), e));
  }
  void undescribed(const UndescribedEvent& e) override {
    out_.commit(sink_.undescribed(out_.room(kMaxLineBytes), e));
  }
  TextLines* text_lines() override { return &lines_; }

 private:
  TraceOutput& out_;
  TextSink sink_;
  TextLines lines_;
};

struct Lines {
  std::string text;
  uint64_t span_calls = 0;
  ReadResult res;
};
Lines read_lines(const std::string& bytes) {
  Lines l;
  TraceOutput out = TraceOutput::memory(&l.text);
  LinesWriter w(out);
  TraceInput in = TraceInput::memory(bytes);
  l.res = read_binary_trace(in, w);
  l.span_calls = w.span_calls;
  out.finish();
  return l;
}
// `bytes` read by convert's direct line (read_lines) and by the SpanEvent path (TextRenderer):
// both complete, with the same notes and the same text. Returns the direct line's read.
Lines read_lines_as_rendered(const std::string& bytes) {
  TextRenderer r;  // the SpanEvent path: no text lines
  const ReadResult rr = read_bytes(bytes, r);
  CHECK(rr.status == ReadResult::Status::kComplete);
  Lines l = read_lines(bytes);
  CHECK(l.res.status == ReadResult::Status::kComplete);
  CHECK(l.res.notes == rr.notes);
  CHECK(l.text == r.text);
  return l;
}
size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("convert's direct line: run records (compact, ordinary, packed, TSC) as the SpanEvent path writes them; refused ones through span()") {
  for (uint32_t seed : {11u, 12u, 13u, 14u}) {
    CAPTURE(seed);
    const TraceBuilder b = synthetic_v3_trace(8, seed);
    const Lines l = read_lines_as_rendered(b.bytes);
    CHECK(l.text == b.text);  // the records' text as synthetic_v3_trace states it by hand
    // The direct line took most records; the name that needs escapes went through span().
    const size_t spans = count_of(l.text, "emit_host_span:");
    CHECK(l.span_calls > 0);
    CHECK(l.span_calls * 4 < spans);
    // convert --to strace itself.
    std::string converted;
    TraceOutput out = TraceOutput::memory(&converted);
    TraceInput in = TraceInput::memory(b.bytes);
    CHECK(convert_trace(in, out, ConvertTo::kStrace).status == ReadResult::Status::kComplete);
    out.finish();
    CHECK(converted == b.text);
  }
}

TEST_CASE("convert's direct line: damaged records are the same counted drops with the same messages") {
  TraceBuilder b;
  b.begin_block();
  b.string(1, "defined");
  const uint16_t keys[1] = {1};
  const uint32_t values[1] = {5};
  // Before any clock event: a TSC record cannot be placed in time.
  std::string tsc = compact_slot(0, 1'000, 10, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
  const uint16_t cflags = kRecordCompact | kRecordTsc;
  std::memcpy(tsc.data() + offsetof(CompactRecord, flags), &cflags, sizeof cflags);
  std::string otsc = ordinary_slots(1, 1'000, 10, 0, 0, 0, "o", "k=v");
  const uint16_t oflags = kRecordTsc;
  std::memcpy(otsc.data() + offsetof(RecordHeader, flags), &oflags, sizeof oflags);
  b.run(7, 8, 0, tsc + otsc, std::vector<RecordCopy>(2), TscClock::Pair{500, 100});
  b.clock(true, {{1'000'000, 2'000'000}, {4'000'000, 3'000'000}});
  std::string slots = compact_slot(2, 100, 1, 0, 0, 0, 1, 1, keys, values, 0);
  slots += compact_slot(3, 200, 1, 0, 0, 0, 9, 0, nullptr, nullptr, 0);     // id 9: undefined
  slots += ordinary_slots(4, 300, 1, 0, 0, 0, std::string("n\0l", 3), "");  // NUL in a name
  char bad_packed[2] = {static_cast<char>(0x7f), 0};                           // unknown kind
  slots += ordinary_slots(5, 400, 1, 0, 0, 0, "p", std::string_view(bad_packed, 2), true);
  slots += ordinary_slots(6, 450, 1, 0, 0, 0, "plain", "a=1 b=two");
  std::string late = otsc;  // a TSC record once the clock is there: converted
  const uint64_t seq7 = 7;
  std::memcpy(late.data() + offsetof(RecordHeader, seq), &seq7, sizeof seq7);
  slots += late;
  slots += compact_slot(8, 500, 1, 0, 0, 0, 1, 0, nullptr, nullptr, 0);
  b.run(7, 8, 2, slots, std::vector<RecordCopy>(7), TscClock::Pair{1'000'000, 2'000'000});
  b.end_block();
  const Lines l = read_lines_as_rendered(b.bytes);
  CHECK(count_of(l.text, "reason=corrupt") == 5);
  CHECK(contains(l.text, "first_seq=0 last_seq=0 reason=corrupt"));
  CHECK(contains(l.text, "first_seq=1 last_seq=1 reason=corrupt"));
  CHECK(contains(l.text, "name=plain ts=450 dur=1 a=1 b=two\n"));
  CHECK(count_of(l.text, "name=o ts=") == 1);  // the TSC record after the clock event
  REQUIRE(l.res.notes.size() == 1);
  CHECK(contains(l.res.notes[0], "5 records of runs could not be decoded"));
  CHECK(contains(l.res.notes[0], "no clock event precedes it"));
  CHECK(l.span_calls == 0);  // every record that is not damage took the direct line
}

TEST_CASE("convert's direct line: runs of lines longer than its output window, with records that leave the line in it, read as the SpanEvent path writes them") {
  // Runs of 250 ordinary records of 4 slots (~270-byte lines, ~67 KB a run: deliver_direct's
  // 32 KiB window is left and taken again, and over ~2 MB of lines runs start at every
  // distance from the output buffer's end), some of which leave the line: a NUL in the name (a
  // counted drop) and a byte to escape (span()), both written through the output between the
  // window's lines.
  TraceBuilder b;
  b.begin_block();
  const std::string attrs = "k=" + std::string(148, 'v');
  uint64_t escaped = 0, dropped = 0;
  constexpr uint64_t kRuns = 30, kPerRun = 250;
  for (uint64_t run = 0; run < kRuns; ++run) {
    std::string slots;
    for (uint64_t i = 0; i < kPerRun; ++i) {
      const uint64_t seq = run * kPerRun + i;
      std::string name = "span" + std::to_string(seq);
      if (i % 37 == 5 + run % 3) {
        name = std::string("n\0l", 3);
        ++dropped;
      } else if (i % 41 == 7) {
        name = "tab\tname";
        ++escaped;
      }
      slots += ordinary_slots(seq, 1'000 + seq, 10 + i, seq / 8, 0xabc, 1, name, attrs);
    }
    REQUIRE(slots.size() <= size_t{kMaxRunSlots} * kSlotBytes);
    b.run(7, 8, run * kPerRun, slots, std::vector<RecordCopy>(kPerRun));
  }
  b.end_block();
  const Lines l = read_lines_as_rendered(b.bytes);
  CHECK(l.text.size() > (3u << 19));  // 1.5 MiB: more than the output buffer
  CHECK(count_of(l.text, "reason=corrupt") == dropped);
  CHECK(l.span_calls == escaped);
  CHECK(count_of(l.text, "name=span7499 ") == 1);
}
