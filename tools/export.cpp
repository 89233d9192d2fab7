#include "tools/export.h"

#include "format/binary_format.h"
#include "format/binary_reader.h"
#include "format/block_frame.h"
#include "format/convert_io.h"
#include "format/trace_reader.h"
#include "tools/clickhouse_client.h"
#include "tools/clickhouse_rows.h"
#include "tools/progress_bar.h"

#include <spanring/error.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

namespace spanring {

namespace {

using Clock = std::chrono::steady_clock;

// The running export's stop request (ExportOptions::stop_requested; one export per process):
// stop reading, send what was read (one attempt per batch), report.
std::function<bool()> g_stop_requested;

bool stopping() { return g_stop_requested && g_stop_requested(); }

// Sleeps `d`, in steps short enough to notice a stop within 20 ms.
void sleep_for(std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (!stopping() && Clock::now() < until)
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20),
                                                          until - Clock::now()));
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis and prime (the FNV spec's)
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016" PRIx64, v);
  return b;
}

std::string to_hex(std::string_view s) {
  std::string out;
  for (const char c : s) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(c));
    out += b;
  }
  return out;
}

// pread that completes short reads; returns the bytes read (fewer only at end of file).
size_t pread_full(int fd, char* out, size_t n, uint64_t at, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out + got, n - got, static_cast<off_t>(at + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read " + path + " at byte " + std::to_string(at + got), errno, path);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

bool process_alive(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) == 0) return true;
  return errno == EPERM;
}

// The binary file header of `fd` (its declared length, up to kMaxFileHeaderBytes), or nullopt
// when it is not all there yet. Throws Error when the file is not a spanring binary trace.
std::optional<std::string> read_file_header(int fd, const std::string& path) {
  char h[kFileHeaderBytes];
  if (pread_full(fd, h, sizeof h, 0, path) < sizeof h) return std::nullopt;
  if (!is_binary_trace(std::string_view(h, sizeof h)))
    throw Error(ErrorCode::kCorruptFile,
                path + " is not a spanring binary trace (--follow reads binary traces only: "
                       "`spanring run --format binary`)",
                0, path);
  FileHeader fh;
  std::memcpy(&fh, h, sizeof fh);
  if (fh.version < kOldestTraceVersion || fh.version > kTraceVersion)
    throw Error(ErrorCode::kCorruptFile,
                path + ": unsupported format version " + std::to_string(fh.version), 0, path);
  if (fh.header_bytes < kFileHeaderBytes || fh.header_bytes > kMaxFileHeaderBytes)
    throw Error(ErrorCode::kCorruptFile, path + ": bad header length", 0, path);
  std::string out(fh.header_bytes, '\0');
  if (pread_full(fd, out.data(), out.size(), 0, path) < out.size()) return std::nullopt;
  return out;
}

// Sends batches, retrying with back-off; counts what was delivered.
class Shipper {
 public:
  explicit Shipper(const ExportOptions& o) : o_(o), client_(o.url, o.timeout) {}

  // Runs every statement of the schema; retries like send(). True when all succeeded.
  bool create_schema(const std::function<bool()>& give_up) {
    for (const std::string& sql : clickhouse_schema(o_.database, o_.cluster)) {
      if (!with_retries([&] { return client_.query(sql); }, give_up)) return false;
    }
    return true;
  }

  // Sends every table of `b` (processes first). A failure retries the whole batch: a table that
  // was acknowledged already gets its rows again, which its ReplacingMergeTree key merges.
  // Returns true once all are acknowledged, false when `give_up()` said to stop first.
  bool send(const RowBatch& b, const std::function<bool()>& give_up) {
    const bool ok = with_retries(
        [&] {
          ClickHouseReply r;
          r.kind = ClickHouseReply::Kind::kOk;
          for (int t = 0; t < 4 && r.ok(); ++t) {
            if (b.rows[t] == 0) continue;
            r = client_.insert(clickhouse_insert(o_.database, t), b.body[t]);
          }
          return r;
        },
        give_up);
    if (ok) {
      ++batches_;
      for (int t = 0; t < 4; ++t) sent_[t] += b.rows[t];
    }
    return ok;
  }

  uint64_t sent(int table) const noexcept { return sent_[table]; }
  uint64_t batches() const noexcept { return batches_; }
  uint64_t retries() const noexcept { return retries_; }
  const std::string& last_error() const noexcept { return last_error_; }

 private:
  bool with_retries(const std::function<ClickHouseReply()>& attempt,
                    const std::function<bool()>& give_up) {
    auto backoff = std::chrono::milliseconds(100);
    for (bool first = true;; first = false) {
      if (!first) ++retries_;
      const ClickHouseReply r = attempt();
      if (r.ok()) {
        if (down_) {
          std::fprintf(stderr, "spanring: export: ClickHouse at %s answers again\n",
                       o_.url.c_str());
          down_ = false;
        }
        return true;
      }
      last_error_ = r.error;
      if (!down_) {
        // Once per outage, not once per attempt.
        std::fprintf(stderr, "spanring: export: ClickHouse at %s: %s; retrying\n",
                     o_.url.c_str(), r.error.c_str());
        down_ = true;
      }
      if (give_up()) return false;
      sleep_for(backoff);
      // 5 s cap: a server that comes back is found within 5 s.
      backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
  }

  const ExportOptions& o_;
  ClickHouseClient client_;
  uint64_t sent_[4] = {0, 0, 0, 0};
  uint64_t batches_ = 0;
  uint64_t retries_ = 0;
  bool down_ = false;
  std::string last_error_;
};

// Forwards events to the rows and calls `after` once each event is in.
class ForwardingVisitor final : public EventVisitor {
 public:
  ForwardingVisitor(ClickHouseRows& rows, std::function<void()> after)
      : rows_(rows), after_(std::move(after)) {}
  void process(const ProcessEvent& e) override { rows_.process(e), after_(); }
  void thread(const ThreadEvent& e) override { rows_.thread(e), after_(); }
  void span(const SpanEvent& e) override { rows_.span(e), after_(); }
  void drops(const DropsEvent& e) override { rows_.drops(e), after_(); }
  void unfinished(const UnfinishedEvent& e) override { rows_.unfinished(e), after_(); }
  void undescribed(const UndescribedEvent& e) override { rows_.undescribed(e), after_(); }

 private:
  ClickHouseRows& rows_;
  std::function<void()> after_;
};

// What one file's export did, for its summary line.
struct FileExport {
  std::string path;
  std::string host;
  std::string session;
  uint64_t undelivered[4] = {0, 0, 0, 0};
  bool failed = false;         // corrupt or unreadable: exit 1
  std::string problem;         // the reader's message (cut or corrupt)
};

uint64_t sum4(const uint64_t (&a)[4]) { return a[0] + a[1] + a[2] + a[3]; }

// The shipper's counters when a file's export began.
struct Snapshot {
  uint64_t sent[4] = {0, 0, 0, 0};
  uint64_t batches = 0;
  uint64_t retries = 0;
};
Snapshot snapshot(const Shipper& s) {
  Snapshot out;
  for (int t = 0; t < 4; ++t) out.sent[t] = s.sent(t);
  out.batches = s.batches();
  out.retries = s.retries();
  return out;
}

int summarize(const FileExport& f, const Shipper& s, const Snapshot& before,
              const ExportOptions& o) {
  uint64_t sent[4];
  for (int t = 0; t < 4; ++t) sent[t] = s.sent(t) - before.sent[t];
  std::fprintf(stderr,
               "spanring: export summary: file=%s host=%s session=%s spans=%" PRIu64
               " drops=%" PRIu64 " unfinished=%" PRIu64 " processes=%" PRIu64
               " batches=%" PRIu64 " retries=%" PRIu64 " undelivered=%" PRIu64 "\n",
               f.path.c_str(), f.host.c_str(), f.session.c_str(), sent[1], sent[2], sent[3],
               sent[0], s.batches() - before.batches, s.retries() - before.retries,
               sum4(f.undelivered));
  if (!f.problem.empty())
    std::fprintf(stderr, "spanring: %s: %s\n", f.path.c_str(), f.problem.c_str());
  if (sum4(f.undelivered) > 0) {
    std::fprintf(stderr,
                 "spanring: warning: %" PRIu64 " rows of %s were not delivered to %s (%" PRIu64
                 " spans, %" PRIu64 " drops, %" PRIu64 " unfinished, %" PRIu64
                 " processes; last error: %s): the file still holds them; run the same export "
                 "again to send them (rows already sent are not counted twice)\n",
                 sum4(f.undelivered), f.path.c_str(), o.url.c_str(), f.undelivered[1],
                 f.undelivered[2], f.undelivered[3], f.undelivered[0], s.last_error().c_str());
  }
  return f.failed || sum4(f.undelivered) > 0 ? 1 : 0;
}

std::string default_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// ---- finished traces

int export_file(const std::string& path, const ExportOptions& o, const std::string& host,
                Shipper& shipper) {
  FileExport f;
  f.path = path;
  f.host = host;
  f.session = o.session.empty() ? derive_session(path) : o.session;
  if (f.session.empty()) f.session = hex64(fnv1a(""));  // a binary file with no whole block
  const Snapshot before = snapshot(shipper);

  TraceInput in = TraceInput::open(path);
  show_progress(in, 0);  // any size: sending is slower than converting
  ClickHouseRows rows(host, f.session);
  bool delivering = true;
  std::optional<Clock::time_point> failing_since;
  const auto give_up = [&] {
    if (!failing_since) failing_since = Clock::now();
    return stopping() || Clock::now() - *failing_since >= o.retry_for;
  };
  const auto flush = [&] {
    RowBatch b = rows.take();
    if (b.empty()) return;
    failing_since.reset();
    if (delivering && !stopping() && shipper.send(b, give_up)) return;
    // Given up: the rest of the file is still read, to count what was not delivered.
    delivering = false;
    for (int t = 0; t < 4; ++t) f.undelivered[t] += b.rows[t];
  };
  ForwardingVisitor v(rows, [&] {
    if (rows.pending().bytes() >= o.batch_bytes) flush();
  });
  const ReadResult r = read_trace(in, v);
  flush();
  if (r.status == ReadResult::Status::kCut) f.problem = r.message;
  if (!r.ok()) {
    f.failed = true;
    f.problem = r.message;
  }
  return summarize(f, shipper, before, o);
}

// ---- --follow

// The state file: where a follower is, written after each acknowledged batch (docs/clickhouse.md).
struct FollowState {
  std::string session;
  uint64_t offset = 0;             // the file's bytes before it were delivered (a block end)
  uint64_t last_block_offset = 0;  // the block that ends at `offset` ...
  std::string last_block_header;   // ... and its 24 header bytes (hex), to see it was not rewritten
};

void write_state(const std::string& state_path, const ExportOptions& o, const std::string& file,
                 const std::string& host, const FollowState& s) {
  nlohmann::json j = {{"version", 1},
                      {"file", file},
                      {"url", o.url},
                      {"database", o.database},
                      {"host", host},
                      {"session", s.session},
                      {"offset", s.offset},
                      {"last_block_offset", s.last_block_offset},
                      {"last_block_header", s.last_block_header}};
  const std::string text = j.dump() + "\n";
  const std::string tmp = state_path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write the state file " + tmp, errno, tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fdatasync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw Error("cannot write the state file " + tmp, err, tmp);
  // rename: a follower killed at any point leaves the old state or the new one, never half.
  if (::rename(tmp.c_str(), state_path.c_str()) != 0)
    throw Error("cannot rename the state file to " + state_path, errno, state_path);
}

std::optional<FollowState> load_state(const std::string& state_path, const ExportOptions& o,
                                      const std::string& file, const std::string& host) {
  std::FILE* fp = std::fopen(state_path.c_str(), "r");
  if (fp == nullptr) return std::nullopt;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, fp)) > 0) text.append(buf, n);
  std::fclose(fp);
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("version") != 1 || j.at("url") != o.url || j.at("database") != o.database ||
        j.at("host") != host || j.at("file") != file) {
      std::fprintf(stderr,
                   "spanring: export: the state file %s is for another file or destination: "
                   "starting from the beginning of %s\n",
                   state_path.c_str(), file.c_str());
      return std::nullopt;
    }
    FollowState s;
    s.session = j.at("session");
    s.offset = j.at("offset");
    s.last_block_offset = j.at("last_block_offset");
    s.last_block_header = j.at("last_block_header");
    return s;
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr,
                 "spanring: export: the state file %s is not valid (%s): starting from the "
                 "beginning of %s\n",
                 state_path.c_str(), e.what(), file.c_str());
    return std::nullopt;
  }
}

class Follower {
 public:
  Follower(const std::string& path, const ExportOptions& o, const std::string& host,
           Shipper& shipper)
      : path_(path), o_(o), host_(host), shipper_(shipper),
        state_path_(o.state.empty() ? path + ".export-state" : o.state),
        rows_(host, "") {}

  int run() {
    before_ = snapshot(shipper_);
    if (!open_file()) {
      FileExport f;
      f.path = path_;
      f.host = host_;
      f.problem = "the workload ended before the file held a complete block: nothing to export";
      return summarize(f, shipper_, before_, o_);
    }
    f_.path = path_;
    f_.host = host_;
    start();
    f_.session = session_;
    loop();
    ::close(fd_);
    return summarize(f_, shipper_, before_, o_);
  }

 private:
  bool workload_ended() {
    if (stopping()) return true;
    if (o_.while_pid > 0 && !process_alive(o_.while_pid)) {
      if (!ended_at_) ended_at_ = Clock::now();
      return true;
    }
    return false;
  }

  // Waits until the file exists and its first block is complete (the session is derived from
  // it). False when the workload ended first.
  bool open_file() {
    for (;;) {
      const bool ended = workload_ended();  // read before looking: then a last look suffices
      if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ >= 0) {
        if (!file_header_) file_header_ = read_file_header(fd_, path_);
        if (file_header_) {
          session_ = o_.session.empty() ? derive_session(path_) : o_.session;
          if (!session_.empty()) return true;
        }
      } else if (errno != ENOENT) {
        throw Error("cannot open " + path_, errno, path_);
      }
      if (ended) return false;
      sleep_for(std::chrono::milliseconds(50));
    }
  }

  // Resumes from the state file when it is for this file and its last block is still there;
  // else starts at the first block.
  void start() {
    std::optional<FollowState> st = load_state(state_path_, o_, path_, host_);
    if (st && st->session != session_) {
      std::fprintf(stderr,
                   "spanring: export: the state file %s is for session %s, this file's is %s: "
                   "starting from the beginning\n",
                   state_path_.c_str(), st->session.c_str(), session_.c_str());
      st.reset();
    }
    if (st && st->offset > file_header_->size()) {
      std::string hdr(kBlockHeaderBytes, '\0');
      if (pread_full(fd_, hdr.data(), hdr.size(), st->last_block_offset, path_) < hdr.size() ||
          to_hex(hdr) != st->last_block_header) {
        std::fprintf(stderr,
                     "spanring: export: %s was rewritten since the state file %s was written: "
                     "starting from the beginning\n",
                     path_.c_str(), state_path_.c_str());
        st.reset();
      }
    }
    rows_ = ClickHouseRows(host_, session_);
    carry_.reset();
    if (st && st->offset > file_header_->size()) {
      // Replay what was delivered, for the anchors, thread names and ordinals later rows need.
      TraceInput in = TraceInput::open(path_);
      in.set_limit(st->offset);
      rows_.set_quiet(true);
      read_binary_trace(in, rows_, nullptr, &carry_);
      rows_.set_quiet(false);
      pos_ = acked_ = st->offset;
      last_ = {st->last_block_offset, st->last_block_header};
      acked_last_ = last_;
      std::fprintf(stderr, "spanring: export: resuming %s at byte %" PRIu64 " (%s)\n",
                   path_.c_str(), pos_, state_path_.c_str());
    } else {
      pos_ = acked_ = file_header_->size();
    }
  }

  enum class Read : uint8_t { kBlock, kNone };

  // Reads the block at pos_ into rows_ when it is complete and its checksums match.
  Read read_block() {
    char hb[kBlockHeaderBytes];
    if (pread_full(fd_, hb, sizeof hb, pos_, path_) < sizeof hb) return Read::kNone;
    BlockHeader h;
    std::memcpy(&h, hb, sizeof h);
    // Not (yet) a block: io_uring writes several blocks at once, so the bytes at pos_ may still
    // be a hole or partly written while a later block is complete.
    const BlockCheck check = check_block_header(h);
    if (check == BlockCheck::kBadMagic || check == BlockCheck::kBadHeaderCrc) return Read::kNone;
    if (check == BlockCheck::kTooLong)
      throw Error(ErrorCode::kCorruptFile,
                  path_ + ": the block at byte " + std::to_string(pos_) + " claims " +
                      std::to_string(h.payload_bytes) + " bytes",
                  0, path_);
    std::string mem = *file_header_;
    mem.append(hb, sizeof hb);
    const size_t at = mem.size();
    mem.resize(at + h.payload_bytes);
    if (pread_full(fd_, mem.data() + at, h.payload_bytes, pos_ + sizeof hb, path_) <
        h.payload_bytes)
      return Read::kNone;
    if (block_payload_crc(mem.data() + at, h.payload_bytes) != h.payload_crc) return Read::kNone;
    // The block alone behind the file header: the reader checks every event of it.
    TraceInput in = TraceInput::memory(std::move(mem), path_);
    const ReadResult r = read_binary_trace(in, rows_, nullptr, &carry_);
    if (r.status != ReadResult::Status::kComplete)
      throw Error(ErrorCode::kCorruptFile,
                  path_ + ": the block at byte " + std::to_string(pos_) + ": " + r.message, 0,
                  path_);
    last_ = {pos_, to_hex(std::string_view(hb, sizeof hb))};
    pos_ += sizeof hb + h.payload_bytes;
    return Read::kBlock;
  }

  // True when the last block read is no longer in the file as it was read: a restarted drainer
  // cut the file back to its last commit and wrote on from there.
  bool rewritten() {
    if (last_.first == 0) return false;
    struct stat st;
    if (::fstat(fd_, &st) != 0) throw Error("cannot stat " + path_, errno, path_);
    if (static_cast<uint64_t>(st.st_size) < pos_) return true;
    std::string hdr(kBlockHeaderBytes, '\0');
    return pread_full(fd_, hdr.data(), hdr.size(), last_.first, path_) < hdr.size() ||
           to_hex(hdr) != last_.second;
  }

  void flush() {
    RowBatch b = rows_.take();
    if (b.empty()) {
      acked_ = pos_;
      acked_last_ = last_;
      return;
    }
    failing_since_.reset();
    const auto give_up = [&] {
      if (!failing_since_) failing_since_ = Clock::now();
      if (stopping()) return true;
      // While the workload runs, never: the file is the buffer. After it ended, retry_for.
      return workload_ended() && ended_at_ && Clock::now() - *ended_at_ >= o_.retry_for &&
             Clock::now() - *failing_since_ >= o_.retry_for;
    };
    if (delivering_ && shipper_.send(b, give_up)) {
      acked_ = pos_;
      acked_last_ = last_;
      write_state(state_path_, o_, path_, host_,
                  FollowState{session_, acked_, acked_last_.first, acked_last_.second});
      return;
    }
    delivering_ = false;
    for (int t = 0; t < 4; ++t) f_.undelivered[t] += b.rows[t];
  }

  void loop() {
    auto pending_since = Clock::now();
    for (;;) {
      const bool ended = workload_ended();  // before reading: a last pass sees everything
      if (rewritten()) {
        std::fprintf(stderr,
                     "spanring: export: %s was cut back and rewritten (a restarted drainer): "
                     "reading it again from the start; rows sent twice are merged\n",
                     path_.c_str());
        rows_.reset();
        pos_ = file_header_->size();
        last_ = {};
        continue;
      }
      const Read r = read_block();
      if (r == Read::kBlock) {
        if (rows_.pending().total_rows() == 0) pending_since = Clock::now();
        if (rows_.pending().bytes() >= o_.batch_bytes) flush();
        continue;
      }
      // Caught up with the file.
      if (!rows_.pending().empty() &&
          (ended || Clock::now() - pending_since >= o_.flush_every)) {
        flush();
      }
      if (ended) break;
      // 50 ms: half the drainer's 100 ms partial-buffer timer, so a block waits at most that
      // long to be read; an idle poll is one pread of 24 bytes.
      sleep_for(std::chrono::milliseconds(50));
    }
    flush();
    struct stat st;
    if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) > pos_) {
      f_.problem = "the file goes on for " + std::to_string(st.st_size - pos_) +
                   " bytes after its last complete block (at byte " + std::to_string(pos_) +
                   "): a cut block, not exported";
    }
  }

  const std::string path_;
  const ExportOptions& o_;
  const std::string host_;
  Shipper& shipper_;
  const std::string state_path_;
  ClickHouseRows rows_;
  BinaryCarry carry_;  // the file's string definitions, across blocks read one by one
  FileExport f_;
  Snapshot before_;
  int fd_ = -1;
  std::optional<std::string> file_header_;
  std::string session_;
  uint64_t pos_ = 0;    // the next block to read
  uint64_t acked_ = 0;  // everything before it is acknowledged
  std::pair<uint64_t, std::string> last_, acked_last_;  // (offset, header hex) of a block
  bool delivering_ = true;
  std::optional<Clock::time_point> ended_at_;
  std::optional<Clock::time_point> failing_since_;
};

}  // namespace

std::string derive_session(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path, errno, path);
  // 64 KiB: a text trace's first anchors and hundreds of its lines (pids, timestamps), which
  // two runs do not share; a binary trace needs only its first 56 bytes (below).
  std::string head(64 << 10, '\0');
  size_t n;
  try {
    n = pread_full(fd, head.data(), head.size(), 0, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  head.resize(n);
  if (!is_binary_trace(head)) return hex64(fnv1a(head));
  if (head.size() < kFileHeaderBytes) return "";
  FileHeader fh;
  std::memcpy(&fh, head.data(), sizeof fh);
  const uint64_t first_block_end = uint64_t{fh.header_bytes} + kBlockHeaderBytes;
  if (head.size() < first_block_end) return "";
  BlockHeader bh;
  std::memcpy(&bh, head.data() + fh.header_bytes, sizeof bh);
  // The identity needs a header that is one (magic and CRC); its length is not used here.
  const BlockCheck check = check_block_header(bh);
  if (check == BlockCheck::kBadMagic || check == BlockCheck::kBadHeaderCrc) return "";
  return hex64(fnv1a(std::string_view(head.data(), first_block_end)));
}

int export_traces(const ExportOptions& o) {
  g_stop_requested = o.stop_requested;
  const std::string host = o.host.empty() ? default_host() : o.host;
  Shipper shipper(o);
  // Idempotent (IF NOT EXISTS), so every export runs it: the tables exist on first use. A
  // follower waits for a server that is down for as long as the workload runs, like a batch.
  std::optional<Clock::time_point> since;
  const bool schema_ok = shipper.create_schema([&] {
    if (stopping()) return true;
    if (o.follow && (o.while_pid == 0 || process_alive(o.while_pid))) return false;
    if (!since) since = Clock::now();
    return Clock::now() - *since >= o.retry_for;
  });
  if (!schema_ok) {
    std::fprintf(stderr,
                 "spanring: export: cannot create the schema in %s at %s: %s; nothing was sent "
                 "(the files hold everything)\n",
                 o.database.c_str(), o.url.c_str(), shipper.last_error().c_str());
    return 2;
  }
  if (o.create_schema && o.files.empty()) {
    std::fprintf(stderr, "spanring: export: schema ready: database %s at %s%s%s\n",
                 o.database.c_str(), o.url.c_str(), o.cluster.empty() ? "" : ", cluster ",
                 o.cluster.c_str());
    return 0;
  }
  if (o.follow) {
    if (o.files.size() != 1)
      throw Error(ErrorCode::kInvalidArgument, "--follow takes exactly one file", EINVAL, "");
    Follower f(o.files[0], o, host, shipper);
    return f.run();
  }
  int status = 0;
  for (const std::string& path : o.files)
    status = std::max(status, export_file(path, o, host, shipper));
  return status;
}

}  // namespace spanring
