// CRC32C (Castagnoli), the iSCSI/ext4 polynomial, as the binary trace format uses it to check
// its block headers and payloads (format/binary_format.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spanring {

// CRC32C of `n` bytes at `data`: the SSE4.2 crc32 instruction when the CPU has it (three
// interleaved chains from 768 bytes on), Boost.CRC otherwise. `crc` chains calls (0 to start;
// pass the previous result to continue). Pure; any thread.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0) noexcept;

// The same sum by Boost.CRC alone (the fallback; tests compare the two).
uint32_t crc32c_portable(const void* data, size_t n, uint32_t crc = 0) noexcept;

// The same sum by one dependency chain of crc32 instructions over the whole buffer (Boost.CRC
// without SSE4.2): a second reference for the tests, and the baseline crc32c() is measured
// against. Pure; any thread.
uint32_t crc32c_one_stream(const void* data, size_t n, uint32_t crc = 0) noexcept;

}  // namespace spanring
