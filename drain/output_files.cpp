// OutputFiles (drain/output_files.h).
#include "drain/output_files.h"

#include "drain/diagnostics.h"

#include <sys/stat.h>

#include <spanring/error.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>

namespace spanring {

UringWriter::Direct OutputFiles::direct_mode() {
  // O_DIRECT unless SPANRING_OUTPUT_DIRECT=0 (the page cache, as before: for a filesystem
  // whose O_DIRECT is slow or odd, and to measure one against the other).
  const char* v = std::getenv("SPANRING_OUTPUT_DIRECT");
  return v != nullptr && std::strcmp(v, "0") == 0 ? UringWriter::Direct::kOff
                                                   : UringWriter::Direct::kTry;
}

std::string below_min_bytes(uint64_t bytes) {
  return std::to_string(bytes) + " is below the smallest file spanring writes, " +
         std::to_string(OutputLimits::kMinBytes) + " bytes (64K)";
}

namespace {

[[noreturn]] void throw_below_min_bytes(const char* what, uint64_t bytes) {
  throw Error(ErrorCode::kInvalidArgument, std::string(what) + " " + below_min_bytes(bytes),
              EINVAL, "");
}

}  // namespace

OutputLimits rotate_limits(uint64_t size_bytes, const std::string& count_text) {
  // 0 is refused here, not only by check_limits: there it means "no --rotate", and a SIZE of 0
  // written out (a variable that came out empty) would silently leave the disk unbounded.
  if (size_bytes < OutputLimits::kMinBytes) throw_below_min_bytes("--rotate SIZE", size_bytes);
  OutputLimits l;
  l.rotate_size = size_bytes;
  l.rotate_count = OutputLimits::kDefaultRotateCount;
  if (!count_text.empty()) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(count_text.c_str(), &end, 10);
    if (errno != 0 || end == count_text.c_str() || *end != '\0' || count_text[0] == '-' ||
        n < 1 || n > OutputLimits::kMaxRotateCount)
      throw Error(ErrorCode::kInvalidArgument,
                  "--rotate SIZE:COUNT: COUNT must be a number of files in 1.." +
                      std::to_string(OutputLimits::kMaxRotateCount) + ", not \"" + count_text +
                      "\"",
                  EINVAL, "");
    l.rotate_count = static_cast<uint32_t>(n);
  }
  check_limits(l);
  return l;
}

void check_limits(const OutputLimits& l) {
  if (l.max_size != 0 && l.rotate_size != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "--max-size and --rotate do not go together: --rotate SIZE:COUNT already bounds "
                "the disk used (SIZE x COUNT bytes)",
                EINVAL, "");
  auto too_small = [](const char* what, uint64_t v) {
    if (v != 0 && v < OutputLimits::kMinBytes) throw_below_min_bytes(what, v);
  };
  too_small("--max-size", l.max_size);
  too_small("--rotate SIZE", l.rotate_size);
}

OutputFiles::OutputFiles(std::string path, uint64_t keep_bytes, UringWriter::Fallback fallback,
                         const OutputLimits& limits)
    : path_(std::move(path)), fallback_(fallback), limits_(limits) {
  check_limits(limits_);
  // Rotation renames the path itself (FILE -> FILE.1): a symbolic link would be replaced by the
  // file behind it and the link lost, as /dev/stdout would be for `-o -`. Refused before
  // anything is opened.
  struct stat st {};
  if (limits_.rotating() && ::lstat(path_.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw Error(ErrorCode::kInvalidArgument,
                "--rotate needs a regular file (it renames FILE to FILE.1 when it fills): " +
                    path_ + " is a symbolic link (as stdout is, for -o -)",
                EINVAL, path_);
  writer_ = std::make_unique<UringWriter>(path_, 8, keep_bytes, fallback_, direct_mode());
  if (limits_.rotating() && !writer_->seekable())
    throw Error(ErrorCode::kInvalidArgument,
                "--rotate needs a regular file: " + path_ + " is a pipe or a device", EINVAL,
                path_);
  kept_bytes_ = keep_bytes;
  file_bytes_ = keep_bytes;
  pool_ = std::make_unique<BufferedWriter>(*writer_, kBufferBytes, kMaxBuffers,
                                           [this](const Buffer& b) {
                                             if (events_ != nullptr)
                                               events_->durable(b.failed, b.file_end);
                                           });
}

OutputFiles::~OutputFiles() = default;

void OutputFiles::attach(DestinationEvents& events, size_t max_event_bytes) {
  events_ = &events;
  // Room for a file header and a block header, and two records' worth of events (a record
  // brings at most four: drops, process, thread, span): a buffer with less is not worth its
  // block header.
  min_room_ = 64 + 2 * (4 * max_event_bytes);
  file_limit_ = limits_.file_limit();
  // The closing max_size line: a block (and, in an empty file, a file header) around one
  // drops event.
  if (limits_.max_size != 0) line_room_ = 64 + max_event_bytes;
}

Buffer* OutputFiles::take() {
  Buffer* b = pool_->take();
  if (!full_ && file_limit_ != 0) {
    const uint64_t usable = file_limit_ - line_room_;
    if (file_bytes_ + min_room_ > usable) {
      if (limits_.rotating())
        rotate();
      else
        reach_max_size();
    }
  }
  if (full_) {
    b->capacity = 0;
    return b;
  }
  if (file_limit_ != 0)
    b->capacity = static_cast<size_t>(
        std::min<uint64_t>(b->capacity, file_limit_ - line_room_ - file_bytes_));
  return b;
}

Buffer* OutputFiles::take_closing() {
  Buffer* b = pool_->take();
  if (file_limit_ != 0)
    b->capacity = file_limit_ > file_bytes_
                      ? static_cast<size_t>(std::min<uint64_t>(b->capacity,
                                                               file_limit_ - file_bytes_))
                      : 0;
  return b;
}

void OutputFiles::submit(Buffer* b, const Commit&) {
  file_bytes_ += b->len;
  pool_->submit(b);
}

bool OutputFiles::collect(int64_t timeout_us) {
  if (pool_->in_flight() == 0) return false;
  pool_->collect(timeout_us);
  return true;
}

bool OutputFiles::finish() {
  // A sync marker comes back after every earlier buffer, then the file is fsync'ed.
  pool_->sync();
  return !had_error();
}

void OutputFiles::rotate() {
  // Every buffer of this file is written and committed first: a drainer killed from here on
  // finds the segment's commit at the end of this complete file, or in the next one, never in
  // between.
  pool_->wait_all();
  try {
    next_file();
  } catch (const Error& e) {
    report("spanring: cannot start the next file of %s: %s; nothing more is "
                 "written, the records from now on are counted (reason max_size)\n",
                 path_.c_str(), e.what());
    full_ = true;
    return;
  }
  pool_->set_writer(*writer_);
  file_bytes_ = 0;
  events_->new_file(writer_->dev(), writer_->ino());
}

void OutputFiles::reach_max_size() {
  full_ = true;
  report("spanring: %s reached --max-size (%llu bytes) at byte %llu: nothing more "
               "is written; the records from now on are counted (reason max_size) and the "
               "file's last line says how many\n",
               path_.c_str(), static_cast<unsigned long long>(file_limit_),
               static_cast<unsigned long long>(file_bytes_));
}

std::string OutputFiles::rotated_path(const std::string& path, uint32_t n) {
  return n == 0 ? path : path + "." + std::to_string(n);
}

void OutputFiles::next_file() {
  const uint32_t count = limits_.rotate_count;
  auto fail = [&](const std::string& what, const std::string& which) {
    const int err = errno;
    throw Error(what + " " + which + ": " + std::strerror(err), err, which);
  };
  // The oldest kept file goes; a missing one (fewer rotations so far, or a gap a killed
  // rotation left) is no error.
  const std::string oldest = rotated_path(path_, count - 1);
  if (::unlink(oldest.c_str()) != 0 && errno != ENOENT) fail("cannot delete", oldest);
  for (uint32_t n = count - 1; n >= 1; --n) {
    const std::string from = rotated_path(path_, n - 1);
    if (std::rename(from.c_str(), rotated_path(path_, n).c_str()) != 0 && errno != ENOENT)
      fail("cannot rename", from);
  }
  // FILE is gone now (renamed, or deleted when COUNT is 1) before a new FILE exists: the
  // segment's commit still names the old file, which a restart never cuts (output_files.h).
  auto next = std::make_unique<UringWriter>(path_, 8, 0, fallback_, direct_mode());
  // Every buffer of the old file is back (the Drainer waited): closing it loses nothing.
  failed_before_ = failed_before_ || writer_->had_error();
  writer_ = std::move(next);
  ++rotations_;
}

}  // namespace spanring
