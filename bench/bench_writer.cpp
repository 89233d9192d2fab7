// bench_writer: the output writer alone (drain/uring_writer.h), as fast as it takes buffers.
//
//   bench_writer FILE [MB=2048] [DEPTH=8] [DIRECT=1]
//
// 32 buffers of about 1 MiB (the drainer's size; each ends inside a 4 KiB block, as the
// drainer's do) are kept queued to one UringWriter (DEPTH buffers in flight, Direct::kTry when
// DIRECT is 1) until MB megabytes are written; prints MB/s and whether O_DIRECT was used, then
// deletes FILE. No drain thread, no rings: what the writer and the filesystem can take, the
// ceiling of a drainer that is never the bound. Compare builds by alternating runs.
#include "drain/uring_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

using namespace spanring;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_writer FILE [MB=2048] [DEPTH=8] [DIRECT=1]\n");
    return 2;
  }
  const char* path = argv[1];
  const size_t total = static_cast<size_t>(argc > 2 ? std::atoll(argv[2]) : 2048) << 20;
  const unsigned depth = argc > 3 ? static_cast<unsigned>(std::atoi(argv[3])) : 8;
  const bool direct = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  constexpr size_t kBytes = size_t{1} << 20;
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<Buffer*> free;
  for (int i = 0; i < 32; ++i) {
    auto b = std::make_unique<Buffer>();
    b->data = std::make_unique<char[]>(kBytes);
    for (size_t j = 0; j < kBytes; ++j) b->data[j] = static_cast<char>('a' + j % 26);
    b->capacity = kBytes;
    free.push_back(b.get());
    bufs.push_back(std::move(b));
  }
  UringWriter w(path, depth, 0, UringWriter::Fallback::kRequired,
                direct ? UringWriter::Direct::kTry : UringWriter::Direct::kOff);
  const auto t0 = std::chrono::steady_clock::now();
  size_t sent = 0, back = 0, bytes = 0;
  bool failed = false;
  while (bytes < total || back < sent) {
    while (!free.empty() && bytes < total) {
      Buffer* b = free.back();
      free.pop_back();
      b->len = kBytes - 64 + (sent % 7) * 8;
      b->failed = false;
      w.submit(b);
      ++sent;
      bytes += b->len;
    }
    if (Buffer* b = w.take_done(1000000)) {
      failed |= b->failed;
      free.push_back(b);
      ++back;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu MB in %.2f s: %.0f MB/s, O_DIRECT %s%s\n", bytes >> 20, s,
              static_cast<double>(bytes) / s / 1e6, w.direct() ? "yes" : "no",
              failed ? ", a write FAILED" : "");
  ::unlink(path);
  return failed ? 1 : 0;
}
