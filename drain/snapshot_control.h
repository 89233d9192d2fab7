// How `spanring snapshot --segment NAME [-o FILE]` reaches the flight-recording drainer of a
// segment: a Unix stream socket in the abstract namespace, "@spanring/NAME/snapshot", which
// only a drainer started with --flight-recorder listens on.
//
//   client -> drainer   "snapshot <absolute path or nothing>\n"   (at most kMaxRequestBytes)
//   drainer -> client   "ok <path written>\n" once the snapshot is written and fsynced, or
//                       "error <why>\n"; then the drainer closes the connection.
//
// An abstract name belongs to a network namespace: `spanring snapshot` must run in the
// drainer's (a container's own network namespace cannot reach it). Abstract sockets have no
// file permissions, so the drainer checks the peer's credentials
// (SO_PEERCRED): only its own uid or root may ask (a snapshot writes a file as the drainer).
// The segment itself (mode 0600) names the drainer's pid, which the client reads to tell "no
// drainer" from "a drainer that is not a flight recorder".
//
// SnapshotListener: the drainer's side, drain thread only, non-blocking: a slow or silent
// client costs one read attempt per check, and never stalls draining.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace spanring {

// A snapshot to take: where to write it and whom to tell. Made by SnapshotListener::poll (or
// the drainer's SIGUSR1 handling) and carried out by the FlightRecorder (drain/flight_recorder.h).
struct SnapshotRequest {
  std::string path;    // absolute, or relative to the drainer's directory
  std::string reason;  // for the operator's line: "SIGUSR1", "spanring snapshot", ...
  int reply_fd = -1;   // a `spanring snapshot` connection to answer (owned), or -1
};

// The drainer's answers, each sent once on the connection `fd`, which is then closed; fd -1
// (a request that came from a signal, not a connection) is a no-op. A client that went away
// costs nothing (MSG_NOSIGNAL: no SIGPIPE). Drain thread; throws only std::bad_alloc.
// "ok PATH\n": the snapshot is written and fsynced at PATH.
void answer_snapshot_ok(int fd, const std::string& path);
// "error WHY\n": the request was refused or the snapshot failed; WHY is one line for the
// client's message.
void answer_snapshot_error(int fd, const std::string& why);

// "\0spanring/NAME/snapshot" (abstract: the leading NUL), as a sockaddr_un path of its length.
std::string snapshot_socket_name(const std::string& segment);

inline constexpr size_t kMaxRequestBytes = 4096 + 16;

class SnapshotListener {
 public:
  // Binds and listens. Throws Error (kBusy) when another process listens on the name (a second
  // flight recorder for one segment cannot happen: one drainer per segment), or kSystem.
  explicit SnapshotListener(const std::string& segment);
  ~SnapshotListener();
  SnapshotListener(const SnapshotListener&) = delete;
  SnapshotListener& operator=(const SnapshotListener&) = delete;

  // Accepts waiting connections and reads their requests; each complete one becomes a
  // SnapshotRequest (path empty = the default name; reply_fd = the connection) in `out`.
  // Refused requests (another uid, a malformed line) are answered and closed here.
  void poll(std::vector<SnapshotRequest>& out);

 private:
  struct Pending {
    int fd;
    std::string line;
    int checks;  // polls without a complete line; dropped after kMaxChecks
  };
  static constexpr int kMaxChecks = 100;  // ~10 s at the drainer's 100 ms checks
  static constexpr size_t kMaxPending = 16;
  int fd_ = -1;
  std::vector<Pending> pending_;
};

// The client: asks the drainer of `segment` for a snapshot into `path` (absolute; empty = its
// default name) and waits until it is written. Returns the path written. Throws Error:
// kNotFound (no such segment) and the other Segment::open errors; kUnsupported when the
// segment has no live drainer or its drainer is not a flight recorder; kSystem when the
// drainer refused or failed the snapshot (its reason in the message), or exited before it was
// written.
std::string request_snapshot(const std::string& segment, const std::string& path);

}  // namespace spanring
