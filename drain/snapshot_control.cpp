// The snapshot socket (drain/snapshot_control.h).
#include "drain/snapshot_control.h"

#include "src/proc.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spanring {
namespace {

socklen_t make_address(const std::string& name, sockaddr_un& a) {
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof a.sun_path);
  std::memcpy(a.sun_path, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
}

void answer(int fd, const std::string& line) noexcept {
  if (fd < 0) return;
  // MSG_NOSIGNAL: a client that went away must not kill the drainer with SIGPIPE.
  (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  ::close(fd);
}

}  // namespace

void answer_snapshot_ok(int fd, const std::string& path) {
  answer(fd, "ok " + path + "\n");
}

void answer_snapshot_error(int fd, const std::string& why) {
  answer(fd, "error " + why + "\n");
}

std::string snapshot_socket_name(const std::string& segment) {
  return std::string(1, '\0') + "spanring/" + segment + "/snapshot";
}

SnapshotListener::SnapshotListener(const std::string& segment) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error("cannot create the snapshot socket", errno, segment);
  sockaddr_un a;
  const socklen_t len = make_address(snapshot_socket_name(segment), a);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 16) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EADDRINUSE)
      throw Error(ErrorCode::kBusy, "another process listens for snapshots of segment " + segment,
                  err, segment);
    throw Error("cannot listen for snapshot requests of segment " + segment, err, segment);
  }
}

SnapshotListener::~SnapshotListener() {
  for (Pending& p : pending_) answer_snapshot_error(p.fd, "the drainer is exiting");
  if (fd_ >= 0) ::close(fd_);
}

void SnapshotListener::poll(std::vector<SnapshotRequest>& out) {
  for (;;) {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) break;  // EAGAIN: none waiting (other errors: try again next check)
    ucred cred{};
    socklen_t cl = sizeof cred;
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        (cred.uid != ::geteuid() && cred.uid != 0)) {
      answer_snapshot_error(
          c, "permission denied: only the drainer's user or root may take snapshots");
      continue;
    }
    if (pending_.size() == kMaxPending) {
      answer_snapshot_error(c, "too many snapshot requests waiting");
      continue;
    }
    pending_.push_back(Pending{c, {}, 0});
  }
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    char buf[1024];
    bool closed = false;
    for (;;) {
      const ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
      if (n > 0) {
        p.line.append(buf, static_cast<size_t>(n));
        if (p.line.size() > kMaxRequestBytes) break;
        continue;
      }
      if (n == 0) closed = true;
      break;
    }
    const size_t nl = p.line.find('\n');
    std::string why;
    if (nl != std::string::npos) {
      const std::string line = p.line.substr(0, nl);
      static constexpr char kVerb[] = "snapshot";
      if (line.compare(0, sizeof kVerb - 1, kVerb) != 0 ||
          (line.size() > sizeof kVerb - 1 && line[sizeof kVerb - 1] != ' ')) {
        why = "malformed request";
      } else {
        std::string path = line.size() > sizeof kVerb ? line.substr(sizeof kVerb) : "";
        if (!path.empty() && path[0] != '/') {
          why = "the path must be absolute";
        } else {
          out.push_back(SnapshotRequest{std::move(path), "spanring snapshot", p.fd});
          pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
          continue;
        }
      }
    } else if (p.line.size() > kMaxRequestBytes) {
      why = "request too long";
    } else if (closed || ++p.checks > kMaxChecks) {
      ::close(p.fd);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    } else {
      ++i;
      continue;
    }
    answer_snapshot_error(p.fd, why);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

std::string request_snapshot(const std::string& segment_name, const std::string& path) {
  uint32_t drainer = 0;
  {
    Segment segment = Segment::open(segment_name);
    const SegmentHeader& h = segment.header();
    // acquire: pairs with the DrainerLock's CAS; the start time is written right after it.
    drainer = h.drainer_pid.load(std::memory_order_acquire);
    if (drainer == 0 || process_start_time(drainer) != h.drainer_start_time)
      throw Error(ErrorCode::kUnsupported,
                  "segment " + segment_name + " has no drainer running: there is no flight "
                  "recorder to take a snapshot from (start one with spanring run "
                  "--flight-recorder SIZE)",
                  ESRCH, segment_name);
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("cannot create a socket", errno, segment_name);
  sockaddr_un a;
  const socklen_t len = make_address(snapshot_socket_name(segment_name), a);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(ErrorCode::kUnsupported,
                "the drainer of segment " + segment_name + " (pid " + std::to_string(drainer) +
                    ") is not a flight recorder (it was not started with --flight-recorder): "
                    "its trace is in its output file, there is nothing in memory to snapshot",
                err, segment_name);
  }
  const std::string req = "snapshot" + (path.empty() ? "" : " " + path) + "\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot send the snapshot request to pid " + std::to_string(drainer), err,
                segment_name);
  }
  // The answer comes once the snapshot is written: wait for it, however long that takes.
  std::string reply;
  char buf[1024];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      reply.append(buf, static_cast<size_t>(n));
      if (reply.find('\n') != std::string::npos || reply.size() > kMaxRequestBytes) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fd);
  const size_t nl = reply.find('\n');
  if (nl == std::string::npos)
    throw Error("the drainer (pid " + std::to_string(drainer) +
                    ") exited before the snapshot was written",
                EPIPE, segment_name);
  reply.resize(nl);
  if (reply.compare(0, 3, "ok ") == 0) return reply.substr(3);
  throw Error("the drainer (pid " + std::to_string(drainer) + ") could not take the snapshot: " +
                  (reply.compare(0, 6, "error ") == 0 ? reply.substr(6) : reply),
              EIO, segment_name);
}

}  // namespace spanring
