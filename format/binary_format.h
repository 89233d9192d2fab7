// The spanring binary trace format, versions 1 to 4 (docs/binary-format.md has the full
// description): its on-disk layout. BinarySink (format/binary_sink.h) writes it as the drainer's
// output, read_binary_trace() (format/binary_reader.h) reads it back; block headers are sealed
// and checked by format/block_frame.h only; CRC32C is format/crc32c.h.
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
// nothing in a file needs to be aligned. Events mirror format/event.h one to one and carry
// the record's raw fields and raw name/attribute bytes, so that conversion to [STRACE] text
// goes through the very same formatting code as the text drainer (byte-identical output).
//
// Why blocks: the drainer writes and commits whole buffers, so a file killed or cut anywhere
// (kill -9, full disk) ends with complete blocks followed by at most one partial block; the
// reader uses every complete block, names the partial one, and each block checks itself
// (length bound, two CRCs) so a flipped byte is reported where it is instead of being read as
// data.
#pragma once

#include <spanring/segment_layout.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace spanring {

static_assert(std::endian::native == std::endian::little,
              "the binary trace format is little-endian and written with memcpy");

// "\x89SPRTRC\n": the high byte catches a 7-bit transfer, the LF a newline conversion, and no
// [STRACE] text file can start with it (text starts with '[').
inline constexpr char kTraceMagic[8] = {'\x89', 'S', 'P', 'R', 'T', 'R', 'C', '\n'};
// Bumped when any struct or rule below changes; a reader refuses a version it does not know.
// Version 2 adds drop reasons 7, max_size (the output reached --max-size), and 8, overwritten
// (pushed out of a flight recorder's window before its snapshot, drain/flight_recorder.h). A
// version 1 file is a version 2 file without them, so readers take both, and a reason past 6 in a
// version 1 file is corrupt.
// Version 3 adds event 7 (a string definition: id -> bytes) and event 8 (a run of one thread's
// records copied as the ring holds them, compact records naming string ids defined by event 7
// earlier in the same file). A version 1 or 2 file is a version 3 file without them.
// Version 4 lets a run's records keep their TSC times (kRecordTsc): the run body grows the
// owner's clock anchor (RunBody4), and event 9 carries the drainer's clock samples, so that the
// reader converts ticks to ns exactly as the drainer would have (format/tsc_clock.h). A version 3
// file is read as before (24-byte run body, no TSC time in a run, no event 9).
inline constexpr uint32_t kTraceVersion = 4;
inline constexpr uint32_t kOldestTraceVersion = 1;
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
  kString = 7,  // version 3
  kRun = 8,     // version 3
  kClock = 9,   // version 4
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
  uint8_t reason;  // DropReason: 1..6 (version 1), 1..7 (version 2)
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

// Event 7 (version 3): string `id` is `len` raw bytes (1..kStringMaxBytes, no NUL), as the
// segment's string table holds it. Written before the first run of a file that names the id; a
// later definition of the same id (a drainer resumed on the file) replaces it.
struct StringBody {  // + len bytes
  uint16_t id;   // 1..kStringTableEntries - 1
  uint16_t len;  // 1..kStringMaxBytes
  uint32_t reserved;  // 0
};
static_assert(std::is_standard_layout_v<StringBody>);
static_assert(sizeof(StringBody) == 8);

// Event 8 (version 3): `slots` 64-byte slots holding `records` consecutive records of ring
// owner (pid, tid) as the ring held them (RecordHeader or CompactRecord, segment_layout.h), the
// first with sequence number first_seq and each next one +1. In a run: no marker record, in
// version 3 no kRecordTsc (the drainer converted TSC times to ns in its copy; version 4:
// RunBody4), an ordinary record's seq is its place in the run, a compact record's seq_lo its
// low 32 bits, and its string ids in range are defined by event 7 earlier in the file.
struct RunBody {  // + slots * kSlotBytes bytes
  uint32_t pid;
  uint32_t tid;
  uint64_t first_seq;
  uint32_t slots;    // 1..kMaxRunSlots
  uint32_t records;  // 1..slots
};
static_assert(std::is_standard_layout_v<RunBody>);
static_assert(sizeof(RunBody) == 24);
// Event 8 from version 4 on: RunBody, then the owner's clock anchor (RingHeader::anchor_tsc and
// anchor_mono_ns: the TSC and CLOCK_MONOTONIC read together when the process attached; 0 and 0:
// none). Its records may carry kRecordTsc: their ts and dur are TSC ticks, converted by the
// reader with this anchor and the clock samples of event 9 read so far in the file.
struct RunBody4 {  // + slots * kSlotBytes bytes
  RunBody run;
  uint64_t anchor_tsc;
  uint64_t anchor_ns;
};
static_assert(std::is_standard_layout_v<RunBody4>);
static_assert(sizeof(RunBody4) == 40);
// The most slots one run event holds (its body_bytes is 16 bits), in either version.
inline constexpr uint32_t kMaxRunSlots = (UINT16_MAX - sizeof(RunBody4)) / kSlotBytes;
static_assert(kMaxRunSlots == 1023);
static_assert((UINT16_MAX - sizeof(RunBody)) / kSlotBytes == kMaxRunSlots);
// Event 9 (version 4): the drainer's clock samples, `count` (tsc, CLOCK_MONOTONIC ns) pairs of
// ClockSample. `reset` 1: the reader's samples are replaced by these (a file's first event 9,
// and after a rotation or a failed write); 0: each is added after the ones read before. Either
// way each pair goes through TscClock::add() in order, so the reader's clock holds exactly the
// drainer's samples when it reaches the next run (the drainer writes them before the first run
// that follows their sampling).
struct ClockBody {  // + count * sizeof(ClockSample) bytes
  uint32_t count;     // 0..kMaxClockSamplesPerEvent
  uint8_t reset;      // 0 or 1
  uint8_t reserved[3];
};
static_assert(std::is_standard_layout_v<ClockBody>);
static_assert(sizeof(ClockBody) == 8);
struct ClockSample {
  uint64_t tsc;
  uint64_t ns;
};
static_assert(sizeof(ClockSample) == 16);
inline constexpr uint32_t kMaxClockSamplesPerEvent =
    (UINT16_MAX - sizeof(ClockBody)) / sizeof(ClockSample);
static_assert(kMaxClockSamplesPerEvent == 4095);
inline constexpr size_t kMaxStringEventBytes =
    sizeof(EventHeader) + sizeof(StringBody) + kStringMaxBytes;

// The largest event: a process with a full command line.
inline constexpr size_t kMaxBinaryEventBytes =
    sizeof(EventHeader) + sizeof(ProcessBody) + kMaxCmdlineBytes;
static_assert(kMaxBinaryEventBytes <= UINT16_MAX);

}  // namespace spanring
