// spanring::Error: the one error type of spanring's cold path (segment create/open, the
// drainer's output, trace files). Callers tell causes apart by code(), never by message text;
// what() is for people.
//
// The hot path (Span, emit, the C ABI) never throws: it returns a status and counts drops.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace spanring {

// What went wrong, one code per cause a caller may act on differently.
enum class ErrorCode : uint8_t {
  kSystem = 0,        // a system call failed: err() says which errno
  kInvalidArgument,   // an option or size out of range (err() EINVAL)
  kExists,            // the segment name exists; it is never reinitialised (EEXIST)
  kNotFound,          // no segment or file of that name (ENOENT)
  kAccess,            // permission denied; what() names owner and mode (EACCES)
  kNotASegment,       // the object is not a spanring segment: no magic, or smaller than a header
  kLayoutMismatch,    // a spanring segment of another layout version or geometry (EPROTO)
  kBusy,              // another live drainer holds the segment (EBUSY)
  kNoSpace,           // no room: a segment larger than /dev/shm's free space (ENOSPC)
  kUnsupported,       // the system lacks a facility (io_uring refused, say)
  kCorruptFile,       // a trace file's committed part is not what it must be
};

// A short stable name of the code ("not_a_segment", ...), for logs and tests.
const char* error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  // `what` says what failed in words a user can act on; `err` is the errno (0 when none);
  // `path` names the segment or file concerned.
  Error(ErrorCode code, const std::string& what, int err, std::string path);
  // The code derived from `err` (EEXIST kExists, ENOENT kNotFound, EACCES/EPERM kAccess,
  // EBUSY kBusy, EINVAL kInvalidArgument, EPROTO kLayoutMismatch, ENOSPC kNoSpace, else
  // kSystem).
  Error(const std::string& what, int err, std::string path);

  ErrorCode code() const noexcept { return code_; }
  int err() const noexcept { return err_; }
  const std::string& path() const noexcept { return path_; }

 private:
  ErrorCode code_;
  int err_;
  std::string path_;
};

}  // namespace spanring
