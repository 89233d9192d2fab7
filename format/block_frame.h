// The framing of a binary trace's blocks (format/binary_format.h): how a block header is sealed
// when a block is written or renumbered, and how one read back is checked. Every writer (the
// drainer's BinarySink, the flight recorder's snapshots) and every reader (read_binary_trace,
// the exporter's follower and its file identity) frames blocks through these functions only,
// so the rules below are written once:
//   - header_crc covers the 20 bytes before it; a header is trusted only once its magic and
//     header_crc match;
//   - only then is payload_bytes looked at, and it must leave the block within kMaxBlockBytes;
//   - payload_crc covers the payload; it is checked once the payload has been read.
//
// Pure functions of their arguments: any thread, no allocation, no errors beyond the returned
// status.
#pragma once

#include "format/binary_format.h"

#include <cstddef>
#include <cstdint>

namespace spanring {

// What check_block_header() found, in the order it checks.
enum class BlockCheck : uint8_t {
  kGood,
  kBadMagic,      // magic is not kBlockMagic ("SBLK")
  kBadHeaderCrc,  // header_crc does not match the header's first 20 bytes
  kTooLong,       // payload_bytes would take the block past kMaxBlockBytes
};

// The largest payload_bytes a reader accepts.
inline constexpr uint32_t kMaxBlockPayloadBytes = kMaxBlockBytes - kBlockHeaderBytes;

// CRC32C of the header's first 20 bytes (every field but header_crc).
uint32_t block_header_crc(const BlockHeader& h) noexcept;
// CRC32C of a block's payload of `bytes` bytes.
uint32_t block_payload_crc(const void* payload, size_t bytes) noexcept;
// Checks a header read from untrusted bytes: magic, then header CRC, then the length bound.
// The payload CRC is checked by the caller once it has the payload (block_payload_crc).
BlockCheck check_block_header(const BlockHeader& h) noexcept;

// The header a writer puts at a block's start before its events: magic and sequence number;
// length and CRCs are 0 until seal_block().
BlockHeader open_block_header(uint64_t seq) noexcept;
// Completes the header at `block` (unaligned: copied in and out with memcpy) for the
// `payload_bytes` bytes of events after it: length, payload CRC, header CRC. payload_bytes
// must be at most kMaxBlockPayloadBytes (the drainer's buffers are far smaller).
void seal_block(char* block, size_t payload_bytes) noexcept;
// Gives a sealed header a new sequence number (a block copied into another file) and its
// header CRC again; the payload and its CRC are unchanged.
void renumber_block(BlockHeader& h, uint64_t seq) noexcept;

}  // namespace spanring
