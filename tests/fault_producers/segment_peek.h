// A read-only view of the segment a traced emitter is attached to, so that an emitter can see
// which rings are taken (to pace its launches, or to notice its ring being freed under it).
// It maps the shared-memory object PROT_READ: it can never change the segment, and it reads
// only the ring table, through a SegmentView (include/spanring/segment_view.h).
#pragma once

#include <spanring/segment_layout.h>
#include <spanring/segment_view.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fault_emitter {

struct RingSnapshot {
  uint32_t state;
  uint32_t owner_pid;
  uint32_t owner_tid;
  uint32_t generation;
  uint64_t head;  // slots published by the owner
  uint64_t tail;  // slots the drainer has consumed
};

class SegmentPeek {
 public:
  // The ring owned by (pid, tid) in state kRingActive, or -1.
  int64_t find_ring(uint32_t pid, uint32_t tid) const {
    for (uint32_t i = 0; i < ring_count(); ++i) {
      const RingSnapshot r = ring(i);
      if (r.state == spanring::kRingActive && r.owner_pid == pid && r.owner_tid == tid) return i;
    }
    return -1;
  }

  // Maps the segment named by SPANRING_SEGMENT; false (and why) when it cannot.
  bool open_from_environment(std::string* why) {
    const char* name = std::getenv("SPANRING_SEGMENT");
    if (name == nullptr || *name == '\0') {
      *why = "SPANRING_SEGMENT is not set";
      return false;
    }
    const int fd = ::shm_open((std::string("/") + name).c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
      *why = std::string("shm_open ") + name + " failed";
      return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(spanring::kSegmentHeaderBytes)) {
      ::close(fd);
      *why = "segment too small";
      return false;
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      *why = "mmap failed";
      return false;
    }
    // Read-only: the view hands out non-const references, but this class only ever reads
    // through them (the mapping is PROT_READ, a write would fault).
    if (!spanring::SegmentView::validate(static_cast<std::byte*>(p),
                                         static_cast<uint64_t>(st.st_size), view_, *why)) {
      ::munmap(p, static_cast<size_t>(st.st_size));
      return false;
    }
    return true;
  }

  uint32_t ring_count() const { return view_.ring_count(); }
  uint32_t ring_capacity() const { return view_.ring_capacity(); }  // slots

  RingSnapshot ring(uint32_t i) const {
    const spanring::RingHeader* r = &view_.ring(i);
    RingSnapshot s{};
    // acquire: the owner fields are written before the claimer's release of kRingActive.
    s.state = r->state.load(std::memory_order_acquire);
    s.owner_pid = r->owner_pid;
    s.owner_tid = r->owner_tid;
    s.generation = r->generation;
    // acquire: pairs with the owner's release of head and the drainer's release of tail.
    s.head = r->head.load(std::memory_order_acquire);
    s.tail = r->tail.load(std::memory_order_acquire);
    return s;
  }

 private:
  spanring::SegmentView view_;  // validated once at open; every ring read goes through it
};

}  // namespace fault_emitter
