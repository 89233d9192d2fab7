// spanring::Error (include/spanring/error.h).
#include <spanring/error.h>

#include <cerrno>
#include <utility>

namespace spanring {
namespace {

ErrorCode code_of(int err) noexcept {
  switch (err) {
    case EEXIST: return ErrorCode::kExists;
    case ENOENT: return ErrorCode::kNotFound;
    case EACCES:
    case EPERM: return ErrorCode::kAccess;
    case EBUSY: return ErrorCode::kBusy;
    case EINVAL: return ErrorCode::kInvalidArgument;
    case EPROTO: return ErrorCode::kLayoutMismatch;
    case ENOSPC: return ErrorCode::kNoSpace;
    default: return ErrorCode::kSystem;
  }
}

}  // namespace

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kSystem: return "system";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kExists: return "exists";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kAccess: return "access";
    case ErrorCode::kNotASegment: return "not_a_segment";
    case ErrorCode::kLayoutMismatch: return "layout_mismatch";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kNoSpace: return "no_space";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCorruptFile: return "corrupt_file";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& what, int err, std::string path)
    : std::runtime_error(what), code_(code), err_(err), path_(std::move(path)) {}

Error::Error(const std::string& what, int err, std::string path)
    : Error(code_of(err), what, err, std::move(path)) {}

}  // namespace spanring
