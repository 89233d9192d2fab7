// What `spanring drain` needs from the part of an output file that a killed drainer committed
// (the prefix recover() keeps, drain/drainer.h) to append to it: its format, the pids that
// already have their clock anchor / process event there (one per pid per file), and for a
// binary file the next block sequence number.
//
// Cold path, one thread. The prefix was written by a drainer but is read back as untrusted.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

namespace spanring {

struct KeptPrefix {
  std::unordered_set<uint32_t> pids;  // announced in the prefix
  uint64_t next_block_seq = 0;        // binary: the first block to append; text: 0
  // binary: the prefix's format version (binary_format.h); what is appended keeps to it (a
  // version 1 or 2 prefix gets no string or run event). Text: unused.
  uint32_t version = 0;
};

// The format of the first bytes of `path`: "binary" (the binary magic) or "strace".
std::string kept_format(const std::string& path);

// The first `bytes` bytes of a binary trace at `path`. Throws Error (kCorruptFile) when they are
// not a clean run of complete blocks, or the file cannot be read.
KeptPrefix scan_binary_prefix(const std::string& path, uint64_t bytes);

// The first `bytes` bytes of a [STRACE] text file at `path`: the pids of its [CLOCK_ANCHOR]
// lines, as read_strace_text() (format/text_reader.h) parses them. A missing or unreadable file
// yields none (the drainer then writes every anchor again); a read error or a malformed line
// ends the scan with the pids before it.
KeptPrefix scan_text_prefix(const std::string& path, uint64_t bytes);

}  // namespace spanring
