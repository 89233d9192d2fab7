// The binary trace format (format/binary_format.h): what BinarySink writes reads back as the same
// events, rendered byte-identically by TextSink; a file cut anywhere reads up to its last
// complete block and says where it was cut; corrupt files are refused with the byte offset.
#include "binary_util.h"
#include "drain/resume.h"
#include "format/block_frame.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

TEST_CASE("every event BinarySink writes reads back and renders exactly as TextSink wrote it") {
  const TraceBuilder b = synthetic_trace(6);
  TextRenderer r;
  uint64_t last = 0;
  const ReadResult res = read_bytes(b.bytes, r, &last);
  INFO(res.message);
  CHECK(res.status == ReadResult::Status::kComplete);
  CHECK(res.format == "spanring binary trace v2");
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
    f[8] = 3;
    TextRenderer r;
    const ReadResult res = read_bytes(f, r);
    CHECK(res.status == ReadResult::Status::kCorrupt);
    CHECK(contains(res.message, "byte 8: unsupported format version 3 (this spanring reads "
                                "versions 1..2)"));
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
