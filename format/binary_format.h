// The spanring binary trace format, version 1 (docs/binary-format.md has the full
// description): BinarySink writes it as the drainer's output, read_binary_trace() reads it back.
//
//   offset 0   FileHeader (32 bytes): magic "\x89SPRTRC\n", version, header size
//   32         block 0: BlockHeader (24 bytes) + payload = events   <- one drainer buffer
//   ...        block 1, block 2, ...                                   (one io_uring write each)
//
//   BlockHeader: magic "SBLK" | payload_bytes | seq (block number, +1 per block) |
//                payload_crc (CRC32C of the payload) | header_crc (CRC32C of the 20 bytes before)
//   event:       type (u8) | flags (u8, 0) | body_bytes (u16) | body (a fixed struct below, then
//                its variable bytes: command line, thread name, raw span name + attributes)
//
// Every integer is little-endian (static_assert below); structs are copied with memcpy, so
// nothing in a file needs to be aligned. Events mirror the Sink methods one to one and carry
// the record's raw fields and raw name/attribute bytes, so that conversion to [STRACE] text
// goes through the very same formatting code as the text drainer (byte-identical output).
//
// Why blocks: the drainer writes and commits whole buffers, so a file killed or cut anywhere
// (kill -9, full disk) ends with complete blocks followed by at most one partial block; the
// reader uses every complete block, names the partial one, and each block checks itself
// (length bound, two CRCs) so a flipped byte is reported where it is instead of being read as
// data.
#pragma once

#include "format/convert_io.h"
#include "drain/ring_reader.h"
#include "format/sink.h"

#include <spanring/segment_layout.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>

namespace spanring {

static_assert(std::endian::native == std::endian::little,
              "the binary trace format is little-endian and written with memcpy");

// "\x89SPRTRC\n": the high byte catches a 7-bit transfer, the LF a newline conversion, and no
// [STRACE] text file can start with it (text starts with '[').
inline constexpr char kTraceMagic[8] = {'\x89', 'S', 'P', 'R', 'T', 'R', 'C', '\n'};
// Bumped when any struct or rule below changes; a reader refuses a version it does not know.
inline constexpr uint32_t kTraceVersion = 1;
// "SBLK" as a little-endian u32.
inline constexpr uint32_t kBlockMagic = 0x4b4c4253;
// The largest block a reader accepts, header included: the drainer writes 1 MiB buffers; the
// bound leaves room for larger buffers later while capping what a hostile length can make a
// reader allocate.
inline constexpr uint32_t kMaxBlockBytes = 64u << 20;
// The longest command line kept per process (the drainer reads at most 4 KiB from /proc).
inline constexpr uint32_t kMaxCmdlineBytes = 4096;
// The longest thread name (the kernel's TASK_COMM_LEN, as stored in RingHeader::thread_name).
inline constexpr uint32_t kMaxThreadNameBytes = sizeof(RingHeader::thread_name);

struct FileHeader {
  char magic[8];          // kTraceMagic
  uint32_t version;       // kTraceVersion
  uint32_t header_bytes;  // sizeof(FileHeader); a later version may grow it, readers skip it
  uint64_t reserved[2];   // 0
};
static_assert(std::is_standard_layout_v<FileHeader>);
static_assert(sizeof(FileHeader) == 32);
inline constexpr uint32_t kFileHeaderBytes = sizeof(FileHeader);
// A reader skips up to this much of a larger header written by a later minor revision.
inline constexpr uint32_t kMaxFileHeaderBytes = 4096;

struct BlockHeader {
  uint32_t magic;          // kBlockMagic
  uint32_t payload_bytes;  // bytes of events after this header
  uint64_t seq;            // block sequence number: 0 for a file's first block, +1 per block
  uint32_t payload_crc;    // CRC32C of the payload
  uint32_t header_crc;     // CRC32C of the 20 bytes above: the length is trusted only after it
};
static_assert(std::is_standard_layout_v<BlockHeader>);
static_assert(sizeof(BlockHeader) == 24);
static_assert(offsetof(BlockHeader, header_crc) == 20);
inline constexpr uint32_t kBlockHeaderBytes = sizeof(BlockHeader);

enum class EventType : uint8_t {
  kProcess = 1,
  kThread = 2,
  kSpan = 3,
  kDrops = 4,
  kUnfinished = 5,
  kUndescribed = 6,
};

struct EventHeader {
  uint8_t type;         // EventType
  uint8_t flags;        // 0
  uint16_t body_bytes;  // bytes after this header: the fixed struct plus its variable bytes
};
static_assert(sizeof(EventHeader) == 4);

// Fixed parts of the event bodies, each followed by the variable bytes it counts.
struct ProcessBody {  // + cmdline_len bytes of command line (NUL-separated arguments)
  uint32_t pid;
  uint32_t tid;         // the thread whose first record announced the process
  uint64_t mono_ns;     // clock anchor: CLOCK_MONOTONIC ns ...
  uint64_t wall_ns;     // ... and CLOCK_REALTIME ns read together
  uint32_t cmdline_len; // 0..kMaxCmdlineBytes
  uint32_t reserved;
};
static_assert(sizeof(ProcessBody) == 32);
struct ThreadBody {  // + name_len bytes of thread name
  uint32_t pid;
  uint32_t tid;
  uint32_t name_len;  // 0..kMaxThreadNameBytes
  uint32_t reserved;
};
static_assert(sizeof(ThreadBody) == 16);
struct SpanBody {  // + name_len raw name bytes, then attrs_len raw attribute bytes
  uint32_t pid;
  uint32_t tid;
  uint64_t seq;        // RecordHeader fields, as the drainer read them
  uint64_t ts_ns;
  uint64_t dur_ns;
  uint64_t inv;
  uint64_t hid;
  uint32_t depth;
  uint16_t name_len;   // 1..kNameRawMax
  uint16_t attrs_len;  // 0..kAttrsRawMax
};
static_assert(sizeof(SpanBody) == 56);
struct DropsBody {
  uint32_t pid;
  uint32_t tid;
  uint64_t dropped;
  uint64_t first_seq;
  uint64_t last_seq;
  uint8_t reason;  // DropReason
  uint8_t reserved[7];
};
static_assert(sizeof(DropsBody) == 40);
struct UnfinishedBody {  // + name_len raw name bytes
  uint32_t pid;
  uint32_t tid;
  uint64_t inv;
  uint64_t ts_ns;
  uint32_t depth;
  uint16_t name_len;  // 0..kOpenNameBytes
  uint8_t name_cut;   // 1: the name went on
  uint8_t reserved;
};
static_assert(sizeof(UnfinishedBody) == 32);
struct UndescribedBody {
  uint32_t pid;
  uint32_t tid;
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(UndescribedBody) == 16);

// The largest event: a process with a full command line.
inline constexpr size_t kMaxBinaryEventBytes =
    sizeof(EventHeader) + sizeof(ProcessBody) + kMaxCmdlineBytes;
static_assert(kMaxBinaryEventBytes <= UINT16_MAX);

// CRC32C (Castagnoli), the iSCSI/ext4 polynomial: the SSE4.2 crc32 instruction when the CPU has
// it, Boost.CRC otherwise. `crc` chains calls (0 to start). Pure; any thread.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0) noexcept;
// The same sum by Boost.CRC alone (the fallback; tests compare the two).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0) noexcept;

// The binary format as a Sink. Every drainer buffer becomes one block: begin_buffer writes the
// (file header and) block header, end_buffer fills in the length and both CRCs.
class BinarySink final : public Sink {
 public:
  // `file_header`: write the file header before the first block (false when appending to a
  // kept prefix that has one). `first_block_seq`: the first block's sequence number (a kept
  // prefix's next one).
  explicit BinarySink(bool file_header = true, uint64_t first_block_seq = 0) noexcept
      : header_pending_(file_header), next_seq_(first_block_seq) {}

  size_t max_event_bytes() const noexcept override { return kMaxBinaryEventBytes; }
  size_t begin_buffer(char* out) noexcept override;
  void end_buffer(char* buffer, size_t len) noexcept override;
  size_t process(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
                 std::string_view cmdline) noexcept override;
  size_t thread(char* out, uint32_t pid, uint32_t tid, std::string_view name) noexcept override;
  size_t span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept override;
  size_t drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
               uint64_t last_seq, DropReason reason) noexcept override;
  size_t unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                    std::string_view name, bool name_cut, uint64_t ts_ns) noexcept override;
  size_t undescribed(char* out, uint32_t pid, uint32_t tid, uint32_t count) noexcept override;

 private:
  bool header_pending_;
  uint64_t next_seq_;
  size_t block_at_ = 0;  // where the current buffer's block header is (after a file header)
};

// What read_binary_trace() delivers: the Sink's events, back. Called only for blocks whose
// checksums and every event matched, in file order.
class BinaryVisitor {
 public:
  virtual ~BinaryVisitor() = default;
  virtual void process(uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
                       std::string_view cmdline) = 0;
  virtual void thread(uint32_t pid, uint32_t tid, std::string_view name) = 0;
  // `rec`: header fields and payload as the drainer read them (slots and flags recomputed).
  virtual void span(uint32_t pid, uint32_t tid, const RecordCopy& rec) = 0;
  virtual void drops(uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
                     uint64_t last_seq, DropReason reason) = 0;
  virtual void unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                          std::string_view name, bool name_cut, uint64_t ts_ns) = 0;
  virtual void undescribed(uint32_t pid, uint32_t tid, uint32_t count) = 0;
};

// Reads a binary trace from the current position of `in` (its start) to its end. Never throws
// for the content (only TraceInput's own read errors propagate); every problem is in the result:
// kNotATrace (no magic), kCut (the input ends inside the file header or a block: every
// complete block before it was delivered), kCorrupt (bad magic, version, checksum, length or
// event: names the byte offset; earlier blocks were delivered, nothing of the bad block was).
// `last_block_seq`, when not null, receives the last complete block's sequence number (or
// UINT64_MAX when there was none).
ReadResult read_binary_trace(TraceInput& in, BinaryVisitor& visitor,
                             uint64_t* last_block_seq = nullptr);

// True when `first_bytes` (the start of a file) begins with the binary magic.
bool is_binary_trace(std::string_view first_bytes) noexcept;

// What `spanring drain` needs from the committed prefix of a binary file it resumes: the pids
// that already have their process event, and the next block sequence number. Throws Error
// when the first `bytes` bytes of `path` are not a clean run of complete blocks.
struct BinaryPrefix {
  std::unordered_set<uint32_t> pids;
  uint64_t next_block_seq = 0;
};
BinaryPrefix scan_binary_prefix(const std::string& path, uint64_t bytes);

}  // namespace spanring
