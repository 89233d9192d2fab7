#include "format/convert_io.h"

#include <spanring/segment.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spanring {

// ---- TraceInput ----------------------------------------------------------------------------

TraceInput TraceInput::open(const std::string& path) {
  TraceInput in;
  if (path == "-") {
    in.fd_ = STDIN_FILENO;
    in.name_ = "stdin";
  } else {
    in.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in.fd_ < 0)
      throw Error("cannot open " + path + ": " + std::strerror(errno), errno, path);
    in.owns_fd_ = true;
    in.name_ = path;
  }
  struct stat st {};
  if (::fstat(in.fd_, &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(path + " is a directory, not a trace", EISDIR, path);
    if (S_ISREG(st.st_mode)) in.size_ = static_cast<uint64_t>(st.st_size);
  }
  return in;
}

TraceInput TraceInput::memory(std::string bytes, std::string name) {
  TraceInput in;
  in.size_ = bytes.size();
  in.memory_ = std::move(bytes);
  in.name_ = std::move(name);
  return in;
}

TraceInput::TraceInput(TraceInput&& o) noexcept
    : fd_(o.fd_), owns_fd_(o.owns_fd_), memory_(std::move(o.memory_)),
      memory_at_(o.memory_at_), peeked_(std::move(o.peeked_)), offset_(o.offset_),
      limit_(o.limit_), size_(o.size_), name_(std::move(o.name_)),
      progress_(std::move(o.progress_)) {
  o.fd_ = -1;
  o.owns_fd_ = false;
}

TraceInput::~TraceInput() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

size_t TraceInput::raw_read(char* out, size_t n) {
  if (fd_ < 0) {
    const size_t k = std::min(n, memory_.size() - memory_at_);
    std::memcpy(out, memory_.data() + memory_at_, k);
    memory_at_ += k;
    return k;
  }
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, out + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      throw Error("reading " + name_ + " failed at byte " +
                      std::to_string(offset_ + peeked_.size() + got) + ": " + std::strerror(err),
                  err, name_);
    }
  }
  return got;
}

size_t TraceInput::read(char* out, size_t n) {
  if (limit_ - offset_ < n) n = static_cast<size_t>(limit_ - offset_);
  size_t got = 0;
  if (!peeked_.empty()) {
    got = std::min(n, peeked_.size());
    std::memcpy(out, peeked_.data(), got);
    peeked_.erase(0, got);
  }
  if (got < n) got += raw_read(out + got, n - got);
  offset_ += got;
  if (progress_) progress_(offset_);
  return got;
}

std::string_view TraceInput::peek(size_t n) {
  if (n > 64) n = 64;
  if (limit_ - offset_ < n) n = static_cast<size_t>(limit_ - offset_);
  if (peeked_.size() < n) {
    char tmp[64];
    const size_t k = raw_read(tmp, n - peeked_.size());
    peeked_.append(tmp, k);
  }
  return std::string_view(peeked_).substr(0, n);
}

// ---- TraceOutput ---------------------------------------------------------------------------

namespace {
// Flushed at 1 MiB: a few large writes, and little memory.
constexpr size_t kOutputBufferBytes = 1u << 20;
}  // namespace

TraceOutput TraceOutput::open(const std::string& path) {
  TraceOutput out;
  if (path.empty() || path == "-") {
    out.fd_ = STDOUT_FILENO;
    out.name_ = "stdout";
  } else {
    out.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out.fd_ < 0)
      throw Error("cannot open output " + path + ": " + std::strerror(errno), errno, path);
    out.owns_fd_ = true;
    out.name_ = path;
  }
  out.buf_.resize(kOutputBufferBytes + kMaxRoom);
  return out;
}

TraceOutput TraceOutput::memory(std::string* sink) {
  TraceOutput out;
  out.sink_ = sink;
  out.name_ = "memory";
  out.buf_.resize(kOutputBufferBytes + kMaxRoom);
  return out;
}

TraceOutput::TraceOutput(TraceOutput&& o) noexcept
    : fd_(o.fd_), owns_fd_(o.owns_fd_), sink_(o.sink_), buf_(std::move(o.buf_)), len_(o.len_),
      name_(std::move(o.name_)) {
  o.fd_ = -1;
  o.owns_fd_ = false;
  o.sink_ = nullptr;
  o.len_ = 0;
}

TraceOutput::~TraceOutput() {
  try {
    flush();
  } catch (...) {
    // finish() is where errors are reported; a destructor only tries.
  }
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

void TraceOutput::write(std::string_view s) {
  while (!s.empty()) {
    const size_t k = std::min(s.size(), kMaxRoom);
    std::memcpy(room(k), s.data(), k);
    commit(k);
    s.remove_prefix(k);
  }
}

void TraceOutput::flush() {
  if (len_ == 0) return;
  if (sink_ != nullptr) {
    sink_->append(buf_.data(), len_);
    len_ = 0;
    return;
  }
  if (fd_ < 0) {
    len_ = 0;
    return;
  }
  size_t done = 0;
  while (done < len_) {
    const ssize_t r = ::write(fd_, buf_.data() + done, len_ - done);
    if (r > 0) {
      done += static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      const int err = r < 0 ? errno : EIO;
      len_ = 0;
      throw Error("writing " + name_ + " failed: " + std::strerror(err), err, name_);
    }
  }
  len_ = 0;
}

void TraceOutput::finish() {
  flush();
  if (owns_fd_ && fd_ >= 0) {
    const int fd = fd_;
    fd_ = -1;
    owns_fd_ = false;
    if (::close(fd) != 0)
      throw Error("closing " + name_ + " failed: " + std::strerror(errno), errno, name_);
  }
}

std::string printable_prefix(std::string_view s, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace spanring
