#include "format/block_frame.h"

#include "format/crc32c.h"

#include <cstring>

namespace spanring {

uint32_t block_header_crc(const BlockHeader& h) noexcept {
  return crc32c(&h, offsetof(BlockHeader, header_crc));
}

uint32_t block_payload_crc(const void* payload, size_t bytes) noexcept {
  return crc32c(payload, bytes);
}

BlockCheck check_block_header(const BlockHeader& h) noexcept {
  if (h.magic != kBlockMagic) return BlockCheck::kBadMagic;
  if (block_header_crc(h) != h.header_crc) return BlockCheck::kBadHeaderCrc;
  if (h.payload_bytes > kMaxBlockPayloadBytes) return BlockCheck::kTooLong;
  return BlockCheck::kGood;
}

BlockHeader open_block_header(uint64_t seq) noexcept { return {kBlockMagic, 0, seq, 0, 0}; }

void seal_block(char* block, size_t payload_bytes) noexcept {
  BlockHeader h;
  std::memcpy(&h, block, sizeof h);
  h.payload_bytes = static_cast<uint32_t>(payload_bytes);
  h.payload_crc = block_payload_crc(block + kBlockHeaderBytes, payload_bytes);
  h.header_crc = block_header_crc(h);
  std::memcpy(block, &h, sizeof h);
}

void renumber_block(BlockHeader& h, uint64_t seq) noexcept {
  h.seq = seq;
  h.header_crc = block_header_crc(h);
}

}  // namespace spanring
