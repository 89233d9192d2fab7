// The C++ producer API: RAII spans, invocation scopes and an explicit emit.
//
// Tracing is enabled for a process when SPANRING_SEGMENT names a live spanring segment at the
// time libspanring is loaded (or, in a forked child, inherited from the parent). Otherwise every
// call below is a relaxed load and a branch.
//
// Hot path guarantees (producer side, any thread, also inside signal handlers): after a thread's
// first record, no call here makes a syscall, takes a lock or allocates. A thread's first record
// maps the thread's state (one mmap, unless a state of an exited thread is free) and claims a
// ring (a CAS in the segment's ring table plus a few syscalls: gettid, prctl, reading
// /proc/self/stat once per process).
//
// Loaded with dlopen (a plugin that links libspanring.so or libspanring.a): libspanring's static
// TLS is 12 bytes (one pointer to the thread's state, and the vfork flag), and every cache of
// string ids lives in the module that owns the strings (a module's table keyed by pointer, a
// SPANRING_SPAN call site's static descriptor, or a Span call's own descriptor), so a library
// that is dlclose'd takes its caches with it. Threads may outlive a dlclose; a ring a thread claimed
// through the closed copy stays claimed until the process exits. Nothing here throws, blocks, or
// aborts the caller: a record that cannot be stored is dropped and counted in the segment, where
// the drainer reports it.
//
// Inlined into the caller: a Span with a literal name (and literal integer keys) and emit() with
// literal strings write their one-slot record in the caller's code, through one TLS pointer to
// the thread's state (thread_state.h); the thread's first record, a full ring, a string not yet
// interned and anything not compact call into the library. A program built against these
// headers therefore compiles in ThreadState's and RingWriter's layout: libspanring's soname
// changes whenever they do (src/meson.build).
//
// Limits (from the [STRACE] format, shared/strace-format.md): a name is cut at 64 encoded bytes
// and attributes at 192 encoded bytes, with the cut marked `~`. The producer copies at most 65
// raw name bytes and 193 raw attribute bytes; encoding happens in the drainer.
#pragma once

#include <spanring/packed_attrs.h>
#include <spanring/segment_layout.h>
#include <spanring/thread_state.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Inlined into the caller whatever the optimizer's size heuristics say: literal detection
// (`__builtin_constant_p(__builtin_strlen(p))`, see Span) only sees a literal through an
// inlined call; an out-of-line copy would take every string for a runtime one.
#if defined(__GNUC__)
#define SPANRING_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define SPANRING_ALWAYS_INLINE inline
#endif

namespace spanring {

namespace detail {
// Non-null while tracing is enabled in this process. Written once at load/fork (release);
// read relaxed on every span: the data it guards was published before by the same thread
// (load) or is process-private, so only the null check matters on the hot path.
extern std::atomic<void*> g_segment;

// Which attach of this copy of libspanring the string ids belong to: incremented (never 0
// again) by every attach, which maps another segment with another string table, before
// g_segment is published. A fork keeps it (the child keeps the segment and its ids); exec
// starts at 0.
extern std::atomic<uint32_t> g_attach_generation;

// A module's string ids: a direct-mapped table of words `pointer << 16 | id`, by the address of a
// literal name, key or attribute text, so a lookup is a multiply, a shift, two loads and two
// compares. One table per module (executable or shared library) that holds call sites:
// g_module_strings is a hidden inline variable, so it lives in the module's own .bss and is
// unmapped with the module. A library that is dlclose'd takes its cache with it; a library loaded
// later at the same address starts with an empty table, so its literals get their own ids (a
// process-wide table keyed by pointer would give them the unloaded library's names). `generation`
// is the g_attach_generation its words belong to: another one empties the table (string_id_slow)
// and gives it a new `serial`, a number no other emptying in this process took, so that what the
// library remembers about a table's ids (a thread's memo of key ids) can tell this table's ids
// from those of an unloaded module's table at the same address. Id 0 cached for a pointer means it
// cannot be interned (too long, or no room in the segment's table, which never frees entries), so
// its spans are ordinary without asking the segment again. Only pointers below 2^48 are cached
// (every user-space pointer with 4-level paging); others are interned on every use.
inline constexpr uint32_t kModuleStringBits = 8;  // 256 words (2 KiB): far more than hot literals
struct ModuleStrings {
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> serial;
  std::atomic<uint64_t> words[1u << kModuleStringBits];
};
#if defined(__GNUC__)
__attribute__((visibility("hidden")))
#endif
inline ModuleStrings g_module_strings{};

// Interns `p` (len bytes, 1..kStringMaxBytes; 0: measure it) in the segment's string table and
// caches its id in `table`, first emptying the table when it belongs to an older attach.
// Returns the id, 0 when it cannot be interned. Lock-free, no syscall, async-signal-safe.
uint16_t string_id_slow(ModuleStrings& table, const char* p, uint32_t len) noexcept;

// The string id of the literal at `p` (len bytes; 0: unknown) in `table`, 0 when it has none.
// Tracing must be enabled. Inline: a cached id costs no call.
SPANRING_ALWAYS_INLINE uint16_t string_id_in(ModuleStrings& table, const char* p,
                                             uint32_t len) noexcept {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  // Fibonacci hashing: nearby literals (one .rodata) land on different words.
  // acquire: pairs with string_id_slow's release, so the entry the id names is seen ready.
  const uint64_t x =
      table.words[(at * 0x9e3779b97f4a7c15ull) >> (64 - kModuleStringBits)].load(
          std::memory_order_acquire) ^
      (static_cast<uint64_t>(at) << 16);
  // relaxed: both generations are written before g_segment is published (attach) or by this
  // thread's own string_id_slow; attach while other threads record is not supported.
  if (__builtin_expect(x < 0x10000 && table.generation.load(std::memory_order_relaxed) ==
                                          g_attach_generation.load(std::memory_order_relaxed),
                       1))
    return static_cast<uint16_t>(x);
  return string_id_slow(table, p, len);
}

// Whether the kCompactAttrs key pointers of `a` and `b0`..`b3` are equal: two 16-byte compares
// instead of one compare and branch per key. Both hold their keys first and null past them
// (Span::compact_key nulls a span's, key_ids a thread's memo's), so with equal counts this is
// whether the keys in use are the same; no slot read here is indeterminate. The span's keys
// come as values, not as a pointer to them, so that the Span's address is never taken.
// x86-64: each vector compared in 32-bit lanes (pcmpeqd, SSE2), the two results ANDed and their
// byte mask tested whole (pmovmskb): 8 instructions where XOR, OR and a reduction to one
// 64-bit word took 10.
SPANRING_ALWAYS_INLINE bool same_keys(const char* const* a, const char* b0, const char* b1,
                                      const char* b2, const char* b3) noexcept {
  static_assert(kCompactAttrs == 4 && sizeof(const char*) == 8);
#if defined(__GNUC__) && defined(__SSE2__)
  const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2));
  const __m128i c0 = _mm_set_epi64x(static_cast<long long>(reinterpret_cast<uintptr_t>(b1)),
                                    static_cast<long long>(reinterpret_cast<uintptr_t>(b0)));
  const __m128i c1 = _mm_set_epi64x(static_cast<long long>(reinterpret_cast<uintptr_t>(b3)),
                                    static_cast<long long>(reinterpret_cast<uintptr_t>(b2)));
  const __m128i eq = _mm_and_si128(_mm_cmpeq_epi32(a0, c0), _mm_cmpeq_epi32(a1, c1));
  return _mm_movemask_epi8(eq) == 0xffff;
#elif defined(__GNUC__)
  typedef uint64_t Lanes __attribute__((vector_size(16)));
  Lanes a0, a1;
  std::memcpy(&a0, a, 16);
  std::memcpy(&a1, a + 2, 16);
  const Lanes c0 = {reinterpret_cast<uint64_t>(b0), reinterpret_cast<uint64_t>(b1)};
  const Lanes c1 = {reinterpret_cast<uint64_t>(b2), reinterpret_cast<uint64_t>(b3)};
  const Lanes d = (a0 ^ c0) | (a1 ^ c1);
  return (d[0] | d[1]) == 0;
#else
  return a[0] == b0 && a[1] == b1 && a[2] == b2 && a[3] == b3;
#endif
}

// Whether a thread's key memo holds `count` keys of the table with serial `serial` that are
// the span's keys `k0`..`k3` (null past its count); `ids` their ids. The count and the serial
// first, each with its own branch, then the keys as two 16-byte vectors (same_keys): tested
// this way round, the memo's slot is addressed once and nothing is held across the tests.
SPANRING_ALWAYS_INLINE bool memo_keys_match(const KeyMemo& memo, uint32_t count, uint32_t serial,
                                            const char* k0, const char* k1, const char* k2,
                                            const char* k3, uint64_t& ids) noexcept {
  if (memo.count != count || memo.serial != serial) return false;
  ids = memo.ids;
  return same_keys(memo.keys, k0, k1, k2, k3);
}

// string_id_in the calling module's table.
SPANRING_ALWAYS_INLINE uint16_t string_id(const char* p, uint32_t len) noexcept {
  return string_id_in(g_module_strings, p, len);
}

// string_id for two literals `a` and `b` (lengths as string_id's) into `id_a` and `id_b`: both
// words loaded first, then one test of the table's generation for the two, instead of one after
// each acquire load (which the compiler may not merge).
SPANRING_ALWAYS_INLINE void string_ids(const char* a, uint32_t len_a, const char* b,
                                       uint32_t len_b, uint16_t& id_a, uint16_t& id_b) noexcept {
  ModuleStrings& table = g_module_strings;
  const uintptr_t at_a = reinterpret_cast<uintptr_t>(a);
  const uintptr_t at_b = reinterpret_cast<uintptr_t>(b);
  // acquire: as string_id_in's.
  const uint64_t x = table.words[(at_a * 0x9e3779b97f4a7c15ull) >> (64 - kModuleStringBits)].load(
                         std::memory_order_acquire) ^
                     (static_cast<uint64_t>(at_a) << 16);
  const uint64_t y = table.words[(at_b * 0x9e3779b97f4a7c15ull) >> (64 - kModuleStringBits)].load(
                         std::memory_order_acquire) ^
                     (static_cast<uint64_t>(at_b) << 16);
  // relaxed generations: see string_id_in.
  if (__builtin_expect((x | y) < 0x10000 &&
                           table.generation.load(std::memory_order_relaxed) ==
                               g_attach_generation.load(std::memory_order_relaxed),
                       1)) {
    id_a = static_cast<uint16_t>(x);
    id_b = static_cast<uint16_t>(y);
    return;
  }
  id_a = string_id_in(table, a, len_a);
  id_b = string_id_in(table, b, len_b);
}

// The open-span note's word (OpenSpan::name_id, flags, name_len as one little-endian 32-bit
// word) of a span with interned name `id`, timed by the counter: id | kOpenTsc << 16, name_len
// 0. A SPANRING_SPAN site's word (generation << 32 | kGateOpen | id) holds it as its low 32
// bits, so the site's begin stores it without computing it.
static_assert(uint32_t{kOpenTsc} << 16 == kGateOpen && offsetof(OpenSpan, flags) == 18 &&
              offsetof(OpenSpan, name_len) == 19 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
constexpr uint32_t open_note_word(uint16_t id) noexcept {
  return id | uint32_t{kOpenTsc} << 16;
}
// Stores `word` (open_note_word) as `o`'s name_id, flags and name_len: one 32-bit store.
SPANRING_ALWAYS_INLINE void store_open_word(OpenSpan& o, uint32_t word) noexcept {
  std::memcpy(reinterpret_cast<char*>(&o) + offsetof(OpenSpan, name_id), &word, 4);
}

// enter_busy (thread_state.h) on a gate not yet tested: sets kGateBusy when the gate is exactly
// kGateOpen, and says whether it did, in one signal-atomic compare-and-exchange
// (RingWriter::gate_cas), where a test of the gate, the busy bit's `or` and a test after it
// (for a signal handler's drop in between, kGateGap) took three instructions on memory. False
// leaves the gate as it was (a vfork child's kGateVfork, a drop's kGateGap, a busy or closed
// gate): the caller then goes to the library without release_busy. True: as enter_busy's.
SPANRING_ALWAYS_INLINE bool enter_open_busy(ThreadState& t) noexcept {
  return t.ring.gate_cas(kGateOpen, kGateOpen | kGateBusy);
}

// Whether an explicit record starting at `ts_ns` may be written inline on thread `t`: not
// negative, and not before what the thread's ring announced (ThreadState::early_ns). One signed
// compare for both: early_ns is at least -1. False for every ts on the closed state
// (kClosedEarlyNs), which is what keeps emit's compare-and-exchange (enter_site_busy) off it.
SPANRING_ALWAYS_INLINE bool ts_announced(const ThreadState& t, int64_t ts_ns) noexcept {
  return ts_ns > t.early_ns;
}

// The counter's ticks since `start`: read_tsc() now minus `start`, modulo 2^64. x86-64: rdtsc
// and the subtraction in one asm whose result is in rdx, where GCC builds the counter in rax
// and copies it (the end's value, for a slow path that can add `start` back) and `start`
// before subtracting: 8 instructions with the caller's test, here 6. In rdx, not rax: the
// inline end's cmpxchg (RingWriter::gate_cas) takes rax next, which would cost a move.
SPANRING_ALWAYS_INLINE uint64_t ticks_since(uint64_t start) noexcept {
#if defined(__x86_64__)
  uint64_t dur;
  uint64_t lo;
  asm volatile("rdtsc\n\t"
               "shl $32, %%rdx\n\t"
               "or %%rax, %%rdx\n\t"
               "sub %[start], %%rdx"
               : "=&d"(dur), "=&a"(lo)
               : [start] "r"(start)
               : "cc");
  return dur;
#else
  return read_tsc() - start;
#endif
}

// The descriptor of one SPANRING_SPAN call site: the macro declares it as a function-local
// static in the caller's function, so it lives in the .bss of the module that holds the call
// site and is unmapped with it (no cache outlives its module). Constant-initialised (all zero:
// no guard variable, no constructor call); shared by every thread that runs the site.
//
// `name`: generation << 32 | kGateOpen | id, the string id (1..) of the site's literal name in
// the string table of attach generation `generation` (g_attach_generation, never 0 for a live
// one), or generation << 32 alone when the name cannot be interned (id 0); kSiteEmpty before
// the site's first use. Id and generation are one 64-bit word, read with one acquire load, so
// an id is never paired with another attach's generation. A valid word is laid out as a
// thread's gate word (RingWriter::gate_word: epoch << 32 | gate, the gate's low 16 bits 0) is
// for an open gate on a ring of that generation, so that Span's site constructor tests the site
// and the thread in one: (name ^ gate_word) >> 16 == 0 says the id is valid for the segment of
// the thread's ring (no compare with g_attach_generation: a thread's ring and epoch are always
// the current attach's, since attach() is refused while a thread holds a ring and a fork child
// closes its gate) and that the thread may begin inline. A word without kGateOpen (no id)
// never passes that test with an open gate; kSiteEmpty, a bit no gate ever has, never passes
// it at all (an empty word 0 would, against the gate word 0 of a thread with a state but no
// ring yet).
inline constexpr uint64_t kSiteEmpty = uint64_t{1} << 31;
//
// `name_head`: the CompactRecord's word 6 of a span of this site without attributes
// (RingWriter::compact_word6: one slot, kRecordCompact | kRecordTsc, the name's id), so that
// Span's inline end stores it as loaded. Stored (relaxed) by every thread that fills `name`
// with an id, before its CAS of `name` (release): a reader that acquired a word with an id of
// generation g reads the word 6 of that id (every filler of generation g stores the same value:
// one string, one id). 0 before first use.
//
// `keys_tag`, `keys`, `keys_head`, `keys_tail`: the first set of literal keys (pointers,
// 1..kCompactAttrs of them, null past their count) a span of this site ended with in generation
// `keys_tag >> 32`, and the record words that set gives a span of this site: `keys_head` is the
// CompactRecord's word 6 (RingWriter::compact_word6: one slot, kRecordCompact | kRecordTsc, the
// name's id, key 0's id) and `keys_tail` its word 7 but for the depth byte and the negative bits
// (keys 1..3's ids, the count in the attribute byte), so that Span's inline end stores both as
// loaded. `keys_tag` is generation << 32 | kGateOpen | kGateBusy once filled: the gate word
// (RingWriter::gate_word) of a thread inside a record write (enter_busy) on a ring of that
// generation, which Span's end compares with the thread's in one compare; generation << 32 |
// kSiteKeysBusy while one thread fills it (never a gate word of a thread inside a write: no
// kGateOpen), 0 empty. The count is not in the tag: both the span's keys and the site's are null
// past their count, so equal keys are an equal count. The set is filled once per generation
// (site_fill_keys, a CAS on keys_tag claims it) and never rewritten within that generation: a
// reader that acquired the filled tag reads keys, keys_head and keys_tail as their filler's
// release published them. A span with another key set at the same site takes the thread's key
// memo instead (the same output). Attaching again while other threads record is not supported
// (attach()), so no refill of a later generation overlaps a read. The order matters: the word
// carrying the generation is read first, with acquire, and the ids it covers after it; read the
// other way round (ids, then a tag or generation), a reader could pair ids of one fill with the
// generation of a later one. A forked child whose parent had another thread between its claim
// and its release keeps the set busy: the child's spans of that site then take the memo until
// the child attaches again.
inline constexpr uint64_t kSiteKeysBusy = 0x100;
inline constexpr uint64_t kSiteKeysFilled = uint64_t{kGateOpen} | kGateBusy;
static_assert((kSiteKeysBusy & kGateOpen) == 0);
struct SpanSite {
  std::atomic<uint64_t> name{kSiteEmpty};
  std::atomic<uint64_t> name_head{0};
  std::atomic<uint64_t> keys_tag{0};
  // Plain fields: written by the filler between its claim (keys_tag busy) and the tag's
  // release, read only after acquiring the filled tag (site_keys_match); no read overlaps a
  // write (see above).
  const char* keys[kCompactAttrs]{};
  uint64_t keys_head{0};
  uint64_t keys_tail{0};
};
static_assert(std::is_standard_layout_v<SpanSite> && std::is_trivially_destructible_v<SpanSite> &&
              std::atomic<uint64_t>::is_always_lock_free);

// The id of `site`'s literal name `p` (len bytes, 1..kStringMaxBytes) in the current attach
// generation: interns it and stores generation << 32 | id in site.name (a CAS from the word the
// caller saw; when another thread filled it first for this generation, its id). 0 when it
// cannot be interned. Lock-free, no syscall, async-signal-safe.
uint16_t site_name_slow(SpanSite& site, const char* p, uint32_t len) noexcept;

// The id of `site`'s literal name in the current generation: one acquire load and one compare
// of the word's generation with g_attach_generation in the common case.
SPANRING_ALWAYS_INLINE uint16_t site_name_id(SpanSite& site, const char* p,
                                             uint32_t len) noexcept {
  // acquire: pairs with site_name_slow's release, so the string entry the id names is seen
  // ready (as string_id_in's words). relaxed generation: see string_id_in.
  const uint64_t word = site.name.load(std::memory_order_acquire);
  if (__builtin_expect((word >> 32) == g_attach_generation.load(std::memory_order_relaxed), 1))
    return static_cast<uint16_t>(word);
  return site_name_slow(site, p, len);
}

// Whether the site's key set, filled for the ring of the thread whose writer is `ring`, inside
// its record write (SpanSite::keys_tag: the gate word such a thread has then), is the span's keys
// `k0`..`k3` (null past its count); `head` and `tail` its record words (SpanSite::keys_head,
// keys_tail). One acquire load of the tag and one compare with the gate word in memory
// (RingWriter::gate_word_is; which also says the set is filled, not busy);
// only then the key pointers (plain fields: the tag's acquire orders them after their filler's
// stores, and they are never rewritten within a generation), compared as two 16-byte vectors
// (same_keys).
SPANRING_ALWAYS_INLINE bool site_keys_match(const SpanSite& site, const RingWriter& ring,
                                            const char* k0, const char* k1, const char* k2,
                                            const char* k3, uint64_t& head,
                                            uint64_t& tail) noexcept {
  // The tag in a register, the gate word compared in memory (RingWriter::gate_word_is).
  if (!ring.gate_word_is(site.keys_tag.load(std::memory_order_acquire))) return false;
  head = site.keys_head;
  tail = site.keys_tail;
  return same_keys(site.keys, k0, k1, k2, k3);
}

// The descriptor a plain Span(name) call with a literal name gives itself (Span's first
// constructor; no macro): a SpanSite, used as SPANRING_SPAN's, and the name's pointer.
//
// One emitted call may run with more than one name: GCC takes a choice between two literals of
// one length (`Span s{prof ? "sig.prof" : "sig.alrm"}`) for a literal, and the compiler may
// merge two calls' code into one with the name as a choice. So the site belongs to one name
// only: `literal` is null before the site's first use and then, for good, the pointer of the
// first name that claimed it (claim_implicit_site: a CAS from null). Only a call whose name is
// that pointer uses the site (reads its id, fills it: site_name_slow, site_fill_keys); any
// other name looks its id up in the module's table (string_id) and leaves the site alone, so
// the site's word only ever holds the id of `literal`'s string, and a span is never named by
// another call's name. Write-once, `literal` needs no ordering with the site's words: a value
// read is null (no match) or the final one, and every word a reader acquires was filled by a
// call with that same pointer.
struct ImplicitSite {
  SpanSite site;
  std::atomic<const char*> literal{nullptr};
};
static_assert(std::is_standard_layout_v<ImplicitSite> &&
              std::is_trivially_destructible_v<ImplicitSite> &&
              std::atomic<const char*>::is_always_lock_free);

// Whether `name` owns `s` (see ImplicitSite): it is the site's literal, or the site had none
// and this call claimed it.
SPANRING_ALWAYS_INLINE bool claim_implicit_site(ImplicitSite& s, const char* name) noexcept {
  // relaxed: write-once; see ImplicitSite for why no ordering is needed with the site's words.
  const char* seen = s.literal.load(std::memory_order_relaxed);
  if (seen == nullptr &&
      s.literal.compare_exchange_strong(seen, name, std::memory_order_relaxed,
                                        std::memory_order_relaxed))
    return true;
  return seen == name;
}

// The id of literal `name` (len bytes, 1..kStringMaxBytes) for a span at the call's own site
// `s` that is not begun inline, with bit 16 set when `name` owns the site (claim_implicit_site:
// the id is then the site's, site_name_id, and the span ends with the site), clear when
// another name does (the id from the module's table, string_id, and no site). Out of line,
// so that the begin's fast path keeps no register for it; hidden, so that every module calls
// its own copy, which looks names up in that module's table (g_module_strings).
#if defined(__GNUC__)
__attribute__((noinline, cold, visibility("hidden")))
#endif
inline uint32_t implicit_site_id(ImplicitSite& s, const char* name, uint32_t len) noexcept {
  if (claim_implicit_site(s, name)) return site_name_id(s.site, name, len) | uint32_t{1} << 16;
  return string_id(name, len);
}

// The calling code's own descriptor of type `Site`: an inline asm that emits sizeof(Site)
// bytes, the first word `kFirstWord` and the rest zero, in the data section
// .data.spanring_site under a local label and yields its address (PC-relative, below). So
// `Site` must be a standard-layout type
// whose first member is that word and whose other bytes read as its value-initialised state
// when zero (each user static_asserts its layout). Every asm the compiler emits (each inlined
// call, and each copy the optimizer makes of one) defines its own descriptor, so it lives in
// the module that holds the call and is unmapped with it, like SPANRING_SPAN's static; a local
// label never becomes a unique symbol that keeps a plugin loaded. Volatile: left where the
// call is (hoisted out of a loop, the address takes a register across the whole loop). Used
// for Span(name)'s ImplicitSite and emit()'s ImplicitEmitSite. x86-64 (a RIP-relative `lea`)
// and aarch64 (`adrp` and `add` of the label's low 12 bits), not for the large code model,
// whose labels may lie beyond either's reach; elsewhere Span(name) and emit look their strings
// up in the module's table.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(__code_model_large__) && !defined(__AARCH64_CMODEL_LARGE__)
#define SPANRING_IMPLICIT_SITE 1
template <class Site, uint64_t kFirstWord>
SPANRING_ALWAYS_INLINE Site* call_descriptor() noexcept {
  static_assert(std::is_standard_layout_v<Site> && std::is_trivially_destructible_v<Site> &&
                    alignof(Site) <= 8 && sizeof(Site) >= 8 && sizeof(Site) % 8 == 0,
                "the asm emits 8-byte aligned words: the first, then zeros");
  Site* site;
  asm volatile(
      ".pushsection .data.spanring_site,\"aw\",@progbits\n\t"
      ".balign 8\n"
      ".Lspanring_site%=:\n\t"
      ".long %c1, %c2\n\t"
      ".zero %c3\n\t"
      ".popsection\n\t"
#if defined(__x86_64__)
      "lea .Lspanring_site%=(%%rip), %0"
#else
      "adrp %0, .Lspanring_site%=\n\t"
      "add %0, %0, :lo12:.Lspanring_site%="
#endif
      : "=r"(site)
      // The first word as two 32-bit halves, low first (little-endian): GCC prints no 64-bit
      // constant outside the sign-extended 32-bit range as an operand (0x80000000 included).
      : "i"(static_cast<uint32_t>(kFirstWord)), "i"(static_cast<uint32_t>(kFirstWord >> 32)),
        "i"(sizeof(Site) - 8));
  return site;
}
static_assert(sizeof(ImplicitSite) == 80 && offsetof(ImplicitSite, site) == 0 &&
                  offsetof(SpanSite, name) == 0 && kSiteEmpty == 0x80000000u,
              "call_site's descriptor: the name word (kSiteEmpty), then 72 zero bytes");
// Span(name)'s own ImplicitSite: SpanSite::name kSiteEmpty, everything else 0 (empty key set,
// no literal).
SPANRING_ALWAYS_INLINE ImplicitSite* call_site() noexcept {
  return call_descriptor<ImplicitSite, kSiteEmpty>();
}
#else
#define SPANRING_IMPLICIT_SITE 0
#endif

// The descriptor of one SPANRING_EMIT call site: a function-local static of the caller's
// (inside the macro's lambda), so, like SpanSite, it lives in the .bss of the module that holds
// the call and is unmapped with it; constant-initialised, shared by every thread that runs the
// site. One site always has one literal name and one literal attribute text.
//
// `word`: generation << 32 | kGateOpen when the record can be compact (the name has an id, and
// the attribute text is empty or has one): the gate word (RingWriter::gate_word) of a thread
// whose ring belongs to that generation's segment and whose gate is exactly open, so that emit
// tests the site and the thread's gate, and sets the busy bit, in one compare-and-exchange of
// the gate word with the site's word (detail::enter_site_busy); the ids are in `head`.
// generation << 32 | kEmitSiteOrdinary when the record cannot be compact; generation << 32 |
// kEmitSiteBusy while one thread fills the site; kSiteEmpty before first use. Every form but
// the first has a bit no gate ever has (kEmitSiteOrdinary, kEmitSiteBusy, kSiteEmpty), so it
// never equals a gate word: generation << 32 alone would equal the gate word of a thread
// without a ring whose state kept the epoch (gate 0: a forked child's thread, a pooled state a
// new thread took before its claim), which the exchange would then mark busy and write a
// record for. `head`: the CompactRecord's word 6 for the site
// (RingWriter::compact_word6(kRecordCompact, name id, attrs id): both ids, 0 where there is
// none), written by the filler after its claim of `word` (a CAS to busy) and before `word`'s
// release; read after an acquire of `word` of the reader's generation, so it is the filler's.
// As for SpanSite, attaching again while other threads record is not supported, so no refill
// of a later generation overlaps a read.
inline constexpr uint64_t kEmitSiteBusy = uint64_t{1} << 24;  // above every gate bit
inline constexpr uint64_t kEmitSiteOrdinary = uint64_t{1} << 25;  // above every gate bit
static_assert(kEmitSiteBusy > kGateDeepMask && kEmitSiteOrdinary > kEmitSiteBusy &&
              kEmitSiteOrdinary < kSiteEmpty);
struct EmitSite {
  std::atomic<uint64_t> word{kSiteEmpty};
  std::atomic<uint64_t> head{0};
};
static_assert(std::is_standard_layout_v<EmitSite> && std::is_trivially_destructible_v<EmitSite>);
}  // namespace detail

// True when records from this process go to a segment. Any thread; a relaxed load.
//
// x86-64 (GCC, clang): the load is one `cmpq $0` of the pointer in memory, its result taken
// from the flags (an asm flag output), so a disabled span costs that compare and its branch;
// the compiler emits a relaxed atomic load as a separate move and test. An aligned 8-byte
// compare is one atomic read, as the relaxed load; volatile, so that the compiler neither
// merges two of them nor moves one out of a loop (a thread in a loop of spans sees an attach).
inline bool enabled() noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  static_assert(sizeof(detail::g_segment) == 8 && alignof(std::atomic<void*>) == 8);
  bool on;
  asm volatile("cmpq $0, %1" : "=@ccne"(on) : "m"(detail::g_segment));
  return on;
#else
  return detail::g_segment.load(std::memory_order_relaxed) != nullptr;
#endif
}

// Attaches this process to the named segment, as loading the library does for the name in
// SPANRING_SEGMENT. Cold path: opens and maps the segment (syscalls, allocation). Call it before
// any thread of the process emits (or first thing in a child forked outside any Span). While a
// thread of this process holds a ring (it recorded and has not exited) or has Spans open (their
// names are ids of the attached segment's table), another segment is refused (false, one line on
// stderr; recording goes on where it was) and the same segment again returns true and changes
// nothing. Returns false, with one line on stderr, when the segment cannot be used:
// tracing then stays attached as it was, or, when the process was not attached, disabled.
bool attach(const char* segment_name) noexcept;

// CLOCK_MONOTONIC in ns: the clock of every host `ts` in the output. Any thread; vDSO, no
// syscall on Linux with a TSC clock source.
int64_t now_ns() noexcept;

// Names the calling thread in the trace (the thread name of the binary trace and of the
// Chrome/Perfetto lane): the ring this thread claims next (on its first span, or on its first span
// in a forked child) carries the first 16 bytes of `name` instead of the kernel's thread name
// (prctl PR_GET_NAME, read when the ring is claimed). A ring the thread already holds keeps the
// name it was claimed with, so call it before the thread's first span. NULL or "" goes back to the
// kernel's name. Thread-local: names only the calling thread. Stored in the thread's state, which
// the thread's first call maps (one mmap) when it has none yet; no other syscall, no allocation;
// also stored while tracing is disabled. When no state can be mapped the name is not stored (the
// kernel's name is used). Language bindings use it to give their own thread names (the Python
// package: threading's name) to lanes that would otherwise all read `python3`.
void set_thread_name(const char* name) noexcept;

// Emits one span timed by the caller, at the calling thread's current depth and invocation (as
// a child of the innermost open Span, if any). `ts_ns` and `dur_ns` are ns; for a device span
// pass the device clock's offset and put `clk=dev` in `attrs`. `attrs` is raw `k1=v1 k2=v2`
// text (NULL or "" = none). A NULL or empty name, or a negative ts/dur, drops the record (counted
// with reason `invalid`). Returns true when the record was stored in the ring, false when it was
// dropped or tracing is disabled.
//
// Inline: a disabled process pays a load and a branch. When `name` and `attrs` are string
// literals (detected at compile time, see "Literal strings" at Span) the record is usually one
// compact slot naming both by string id: on x86-64 (GCC) their ids are kept in a descriptor of
// the call's own (detail::ImplicitEmitSite, as SPANRING_EMIT's site, for the first pair of
// pointers that reaches the call), elsewhere looked up in the module's table; any other call
// takes detail::emit_text.
SPANRING_ALWAYS_INLINE bool emit(const char* name, int64_t ts_ns, int64_t dur_ns,
                                 const char* attrs = nullptr) noexcept;

// Emits one fully specified record: the C ABI's spanring_emit uses this. Same rules as emit();
// the strings are read as spanring_emit reads them (spanring.h: on x86-64 up to 15 bytes past
// the NUL, never in a page the string does not reach).
bool emit_record(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                 int64_t dur_ns, const char* attrs) noexcept;

namespace detail {
// emit() for any name and attributes (measured with strnlen, copied into the record). Same
// contract as emit(), which has already checked that tracing is enabled.
bool emit_text(const char* name, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept;
// emit() for a literal name (name_len = strlen, 1..kStringMaxBytes) and literal attributes
// (`attrs` null or attrs_len = strlen <= kStringMaxBytes) with their string ids (string_id; 0:
// none): the record is compact when both have ids (else as emit_text). Same contract as emit().
bool emit_literal(const char* name, uint32_t name_len, uint16_t name_id, const char* attrs,
                  uint32_t attrs_len, uint16_t attrs_id, int64_t ts_ns, int64_t dur_ns) noexcept;
// emit_literal for SPANRING_EMIT's site `site`: the two ids from the site when it is filled for
// the current attach generation, else interned, and the site filled with them when no other
// thread is filling it. Same contract as emit().
bool emit_site_slow(EmitSite& site, const char* name, uint32_t name_len, const char* attrs,
                    uint32_t attrs_len, int64_t ts_ns, int64_t dur_ns) noexcept;

// The descriptor a plain emit(name, ts, dur, attrs) call with literal strings gives itself (no
// macro), as ImplicitSite is Span(name)'s: an EmitSite, used as SPANRING_EMIT's, and the two
// pointers it is for. One emitted call may run with more than one name or attribute text (a
// choice between two literals of one length, or two calls whose code the compiler merged), so
// the site belongs to one pair only: `name` is claimed once by a CAS from null, and its claimer
// then stores `attrs` (never null: emit passes "" for no attributes). A call uses the site only
// when both pointers are its own (claim_implicit_emit_site); any other pair sees another name
// or an attribute pointer that is not its own (null or the owner's) and takes the module's
// table (emit_literal), so the site's ids are only ever its owner's strings. Write-once, the
// pointers need no ordering with the site's words: only the owner pair passes the test and
// fills the site (emit_site_slow).
struct ImplicitEmitSite {
  EmitSite site;
  std::atomic<const char*> name{nullptr};
  std::atomic<const char*> attrs{nullptr};
};
static_assert(std::is_standard_layout_v<ImplicitEmitSite> &&
              std::is_trivially_destructible_v<ImplicitEmitSite>);

// Whether `at` holds `p`, as a relaxed load and a compare. x86-64: one `cmpq` of the pointer in
// memory with the result from the flags (an aligned 8-byte read is one atomic read), where GCC
// loads the atomic into a register first (emit: 57.3 -> 55.3 instructions a record). Not
// volatile: the value is written once (see ImplicitEmitSite), so a compare the compiler reuses
// or moves is at worst a missed match, which takes the slow path.
SPANRING_ALWAYS_INLINE bool holds(const std::atomic<const char*>& at, const char* p) noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  static_assert(sizeof(std::atomic<const char*>) == 8 && alignof(std::atomic<const char*>) == 8);
  bool same;
  asm("cmpq %2, %1" : "=@cce"(same) : "m"(at), "r"(p));
  return same;
#else
  // relaxed: see ImplicitEmitSite.
  return at.load(std::memory_order_relaxed) == p;
#endif
}

// Whether `s` holds the pair (`name`, `attrs`): holds() of both, in one asm on x86-64 (a
// `cmpq`, a `jne` past the second `cmpq`, the result from the flags), so that the caller has
// one branch for both: with two, GCC copied the second pointer into the slow call's argument
// register ahead of its compare, for the edge both branches share.
SPANRING_ALWAYS_INLINE bool holds_pair(const ImplicitEmitSite& s, const char* name,
                                       const char* attrs) noexcept {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool same;
  asm("cmpq %2, %1\n\t"
      "jne 1f\n\t"
      "cmpq %4, %3\n"
      "1:"
      : "=@cce"(same)
      : "m"(s.name), "r"(name), "m"(s.attrs), "r"(attrs));
  return same;
#else
  return holds(s.name, name) && holds(s.attrs, attrs);
#endif
}

// Whether the pair (`name`, `attrs`) owns `s` (see ImplicitEmitSite): the site's pair, or the
// site had none and this call claimed it.
SPANRING_ALWAYS_INLINE bool claim_implicit_emit_site(ImplicitEmitSite& s, const char* name,
                                                     const char* attrs) noexcept {
  // relaxed: write-once; see ImplicitEmitSite for why no ordering is needed.
  const char* seen = s.name.load(std::memory_order_relaxed);
  if (seen == nullptr && s.name.compare_exchange_strong(seen, name, std::memory_order_relaxed,
                                                        std::memory_order_relaxed)) {
    s.attrs.store(attrs, std::memory_order_relaxed);
    return true;
  }
  return seen == name && s.attrs.load(std::memory_order_relaxed) == attrs;
}

// emit()'s slow path at the call's own site `s` for literal `name` and `attrs` (lengths as
// emit_site_slow's; `attrs` "" for none): SPANRING_EMIT's (emit_site_slow) when the pair owns
// the site, else the ids from the module's table and emit_literal. Out of line and hidden, as
// implicit_site_id: every module calls its own copy, which looks strings up in its own table.
#if defined(__GNUC__)
__attribute__((noinline, cold, visibility("hidden")))
#endif
inline bool implicit_emit_slow(ImplicitEmitSite& s, const char* name, uint32_t name_len,
                               const char* attrs, uint32_t attrs_len, int64_t ts_ns,
                               int64_t dur_ns) noexcept {
  if (claim_implicit_emit_site(s, name, attrs))
    return emit_site_slow(s.site, name, name_len, attrs, attrs_len, ts_ns, dur_ns);
  uint16_t name_id;
  uint16_t attrs_id = 0;
  if (attrs_len == 0)
    name_id = string_id(name, name_len);
  else
    string_ids(name, name_len, attrs, attrs_len, name_id, attrs_id);
  return emit_literal(name, name_len, name_id, attrs, attrs_len, attrs_id, ts_ns, dur_ns);
}

#if SPANRING_IMPLICIT_SITE
static_assert(sizeof(ImplicitEmitSite) == 32 && offsetof(ImplicitEmitSite, site) == 0 &&
                  offsetof(EmitSite, word) == 0 && kSiteEmpty == 0x80000000u,
              "call_emit_site's descriptor: the word (kSiteEmpty), then 24 zero bytes");
// emit()'s own ImplicitEmitSite, as call_site() emits Span(name)'s: zero-filled but for the
// word (kSiteEmpty).
SPANRING_ALWAYS_INLINE ImplicitEmitSite* call_emit_site() noexcept {
  return call_descriptor<ImplicitEmitSite, kSiteEmpty>();
}
#endif
}  // namespace detail

// Sets the calling thread's invocation id and callable hash for the spans that start while it
// is in scope; restores the previous ones when it ends. Nestable; thread-local. Kept in the
// thread's state, which the thread's first use maps (one mmap) when it has none yet; when
// none can be mapped the scope sets nothing.
class Invocation {
 public:
  Invocation(uint64_t inv, uint64_t hid) noexcept;
  ~Invocation();
  Invocation(const Invocation&) = delete;
  Invocation& operator=(const Invocation&) = delete;

 private:
  uint64_t saved_inv_;
  uint64_t saved_hid_;
};

// A span that starts when constructed and is recorded when destroyed, at depth = number of Spans
// open on this thread around it. `name` must stay valid until the Span ends (a literal is the
// usual case). Attributes are appended in order as raw `key=value` tokens; past 193 raw bytes
// they are cut (the drainer marks the cut with `~`). Use on one thread only.
//
// How a Span is stored (the output is the same bytes whichever way):
// - compact: a literal name and up to kCompactAttrs (4) integer attributes with literal keys
//   and values that fit in 32 bits (signed or unsigned) are kept as (key pointer, value) pairs
//   in the Span and written as one 64-byte CompactRecord naming the name and keys by string id
//   (segment_layout.h), when the ids are known and the span's duration is < 2^32 ticks/ns and
//   its depth <= 255;
// - ordinary: anything else (a runtime name or key, a text attribute, a fifth integer, a wider
//   value, a record after a drop) goes out as today's RecordHeader record: integers packed
//   (packed_attrs.h) until a text attribute or the size limit turns them into that text.
//
// Literal strings: a name or key is taken for a literal when GCC can fold
// `__builtin_constant_p(__builtin_strlen(p))`, i.e. a string literal or a constant char array
// seen through the inlined call, with optimization (-O1 and up). Its string id is resolved
// inline, where the Span is written, from the table of the module that holds the call site
// (detail::string_id: the first use interns it in the segment's string table, later ones look
// the pointer up in the module's own table, a few instructions). On x86-64 a
// literal name's id, and the ids of the keys its spans end with, are kept instead in a
// descriptor of the call's own (detail::ImplicitSite, emitted by an inline asm: what
// SPANRING_SPAN declares, without the macro), for the first name pointer that reaches the
// call; a call whose name is a choice of literals takes the module's table for the others.
// Both caches die with the module, so a library that is dlclose'd and another loaded at its
// address each name their spans with their own strings. -O0 builds, clang and every runtime
// pointer take the ordinary path (the same output bytes).
namespace detail {
// A Span's fields, as one trivially copyable struct that the library's out-of-line part of Span
// takes and returns by value: a Span's address never reaches a call, so an optimizing compiler
// keeps the fields the inline path uses in registers (scalar replacement) instead of storing
// them in the Span at begin and loading them again at the end; a fallback pays a copy of the
// struct instead. Only name_ is set by a disabled span's constructor; the rest is set by begin
// (inline or not) and read only while name_ is non-null. Not an API: Span's own.
struct SpanData {
  static constexpr size_t kNameLenUnknown = ~size_t{0};
  const char* name_;  // null: tracing was disabled at construction (or a vfork child's span)
  int64_t start_;               // TSC ticks when tsc_, else CLOCK_MONOTONIC ns
  uint64_t inv_;
  uint64_t hid_;
  uint32_t depth_;
  uint16_t name_len_;   // min(strlen(name_), kNameRawMax), measured once at begin
  // String id of a literal name_, 0: none (the record is ordinary). 0 too in a span begun
  // inline at a site (inline_ 2), whose id is the site's (end_at reads it there).
  uint16_t name_id_;
  // Compact attributes in keys_/values_, 0..kCompactAttrs, while spilled_ is 0. Once spilled_
  // is 1 the library ignores it, and the inline code keeps it at the number of integer
  // attributes with a literal key so far (at most kCompactAttrs) whichever way they went, so
  // that it is the same constant on the inline path and after a fallback.
  uint8_t count_;
  uint8_t negative_;    // bit i: values_[i] is a negative value (two's complement, 32 bits)
  bool tsc_;            // timed by the TSC (the record carries kRecordTsc)
  bool packed_;         // attrs_ holds packed tokens (kRecordPackedAttrs), not text
  uint16_t attrs_len_;  // bytes in attrs_: packed (<= kAttrsPackedMax) or text (<= kAttrsRawMax)
  // 1: begun by begin_inline, so it may end inline (finish), site_ unset (no site); 2: the same
  // with site_ set; 0: begun by begin(), site_ set (null: no site). See site().
  uint8_t inline_;
  // 1: the attributes are in attrs_ (packed tokens or text): the span is ordinary.
  uint8_t spilled_;
  detail::ModuleStrings* strings_;   // the table of name_id_ and the compact keys; null: none
  detail::SpanSite* site_;           // the SPANRING_SPAN site of name_id_ (read it by site())
  // The thread's state (t_self, a ThreadState) when begun inline (inline_ != 0), for its inline
  // end: the pointer t_self holds then, since a span ends on the thread it began on (the end
  // takes it from here instead of loading t_self again). Unset otherwise. void*: ThreadState is
  // hidden, and SpanData is not.
  void* state_;
  const char* keys_[kCompactAttrs];  // literal keys of the compact attributes
  uint32_t values_[kCompactAttrs];   // their values, low 32 bits
  char attrs_[kAttrsPackedMax];  // packed tokens, or raw attribute text; not NUL-terminated

  // The library's part (span.cpp), on a copy: begin and end as Span::begin and Span::end_at
  // describe them; the compact attributes become packed tokens in attrs_ (spilled_ = 1);
  // the text and number appenders; the keys' ids.
  void begin(const char* name, size_t name_len, uint16_t name_id, ModuleStrings* strings,
             SpanSite* site) noexcept;
  void end_at(int64_t end) noexcept;
  void spill() noexcept;
  void append(std::string_view text) noexcept;
  void unpack() noexcept;
  void append_number(std::string_view key, bool negative, uint64_t magnitude) noexcept;
  bool key_ids(KeyMemo* memo, uint64_t& keys) const noexcept;
  // The span's SPANRING_SPAN site, null when it has none.
  SpanSite* site() const noexcept { return inline_ == 1 ? nullptr : site_; }
};
static_assert(std::is_trivially_copyable_v<SpanData> && std::is_standard_layout_v<SpanData>);
}  // namespace detail

class Span : private detail::SpanData {
 public:
  SPANRING_ALWAYS_INLINE explicit Span(const char* name) noexcept {
    // A literal's length is known here at compile time (no strnlen in the library), and only a
    // literal's pointer may stand for its bytes: its string id is looked up here, in this
    // module's table. Any other name is measured once, in begin().
    // Disabled: name_ = nullptr on this path only, where the destructor's check sees it (and
    // both vanish); begin() sets name_ itself.
    if (enabled()) {
      if (__builtin_constant_p(__builtin_strlen(name)) && __builtin_strlen(name) != 0 &&
          __builtin_strlen(name) <= kStringMaxBytes) {
#if SPANRING_IMPLICIT_SITE
        // The call's own descriptor (detail::ImplicitSite), used as SPANRING_SPAN's site when
        // this name owns it.
        begin_implicit(*detail::call_site(), name);
#else
        const uint16_t id =
            detail::string_id(name, static_cast<uint32_t>(__builtin_strlen(name)));
        detail::ThreadState* const t = detail::t_self;
        // The common case, written here: an interned name, a thread whose ring is claimed and
        // timed by the counter, a depth the open-span stack describes, not a vfork child.
        // Anything else (the thread's first span, clock_gettime timing) is begin()'s.
        if (__builtin_expect(id != 0 && detail::gate_open(*t) &&
                                 t->depth < kOpenSpanMax,
                             1))
          begin_inline(*t, name, id, detail::open_note_word(id), nullptr);
        else
          begin_library(name, __builtin_strlen(name), id, &detail::g_module_strings, nullptr);
#endif
      } else {
        begin_library(name,
                      __builtin_constant_p(__builtin_strlen(name)) ? __builtin_strlen(name)
                                                                   : kNameLenUnknown,
                      0, nullptr, nullptr);
      }
    } else {
      name_ = nullptr;
    }
  }
  // The call-site form, which SPANRING_SPAN writes: `site` is the call site's descriptor (a
  // function-local static of the caller's function) and `name` the site's literal. The name's
  // id comes from the site (one compare of its generation, detail::site_name_id) instead of
  // the module's table, and a span that ends with the site's key set names its keys from the
  // site instead of the thread's key memo. The output is the same bytes as Span(name)'s. A name
  // GCC does not see as a literal (-O0, clang) takes Span(name)'s path and leaves the site
  // alone.
  SPANRING_ALWAYS_INLINE explicit Span(detail::SpanSite& site, const char* name) noexcept {
    if (enabled()) {
      if (__builtin_constant_p(__builtin_strlen(name)) && __builtin_strlen(name) != 0 &&
          __builtin_strlen(name) <= kStringMaxBytes) {
        // acquire: pairs with site_name_slow's release, so the string entry the id names is
        // seen ready.
        const uint64_t word = site.name.load(std::memory_order_acquire);
        detail::ThreadState* const t = detail::t_self;
        // One test for the site and the thread (detail::site_word): the site's id belongs to
        // the segment of this thread's ring (the same epoch), the id is not 0 (kGateOpen is in
        // the word) and the thread's gate is exactly open; then a depth the open-span stack
        // describes. Anything else: the site's id for the current attach (site_name_id), and
        // begin()'s path.
        if (__builtin_expect(((word ^ t->ring.gate_word()) >> 16) == 0 &&
                                 t->depth < kOpenSpanMax,
                             1))
          begin_inline(*t, name, static_cast<uint16_t>(word), static_cast<uint32_t>(word),
                       &site);
        else
          begin_library(name, __builtin_strlen(name),
                        detail::site_name_id(site, name,
                                             static_cast<uint32_t>(__builtin_strlen(name))),
                        &detail::g_module_strings, &site);
      } else {
        begin_library(name,
                      __builtin_constant_p(__builtin_strlen(name)) ? __builtin_strlen(name)
                                                                   : kNameLenUnknown,
                      0, nullptr, nullptr);
      }
    } else {
      name_ = nullptr;
    }
  }
  SPANRING_ALWAYS_INLINE ~Span() {
    if (name_ != nullptr) {
      if (inline_ != 0)
        finish();
      else
        end(data());
    }
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // Integer attributes with a `const char*` key (a literal key binds here before
  // std::string_view). A literal key and a 32-bit value are kept inline while the span is
  // compact (at most kCompactAttrs); anything else goes on as with a std::string_view key.
  // A span on a process with tracing disabled costs no call at all.
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, int64_t value) noexcept {
    if (__builtin_constant_p(__builtin_strlen(key)) && __builtin_strlen(key) <= kStringMaxBytes) {
      if (name_ != nullptr) {
        if (compact_key(key, value == static_cast<int32_t>(value))) {
          set_value(static_cast<uint32_t>(value));
          negative_ = static_cast<uint8_t>(negative_ | (value < 0 ? 1u << count_ : 0u));
          ++count_;
        } else {
          const uint8_t count = count_;
          settle();
          data() = add_number(data(), key, __builtin_strlen(key), value < 0,
                              value < 0 ? 0 - static_cast<uint64_t>(value)
                                        : static_cast<uint64_t>(value));
          after_fallback(count);
        }
      }
      return *this;
    }
    return attr(std::string_view{key != nullptr ? key : ""}, value);
  }
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, uint64_t value) noexcept {
    if (__builtin_constant_p(__builtin_strlen(key)) && __builtin_strlen(key) <= kStringMaxBytes) {
      if (name_ != nullptr) {
        if (compact_key(key, value <= 0xffffffffu)) {
          set_value(static_cast<uint32_t>(value));
          ++count_;
        } else {
          const uint8_t count = count_;
          settle();
          data() = add_number(data(), key, __builtin_strlen(key), false, value);
          after_fallback(count);
        }
      }
      return *this;
    }
    return attr(std::string_view{key != nullptr ? key : ""}, value);
  }
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, int value) noexcept {
    return attr(key, int64_t{value});
  }
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, unsigned value) noexcept {
    return attr(key, uint64_t{value});
  }
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, long long value) noexcept {
    return attr(key, static_cast<int64_t>(value));
  }
  SPANRING_ALWAYS_INLINE Span& attr(const char* key, unsigned long long value) noexcept {
    return attr(key, static_cast<uint64_t>(value));
  }
  // Text values with a `const char*` key: as with a std::string_view key.
  Span& attr(const char* key, std::string_view value) noexcept {
    return attr(std::string_view{key != nullptr ? key : ""}, value);
  }
  Span& attr(const char* key, const char* value) noexcept {
    return attr(std::string_view{key != nullptr ? key : ""},
                std::string_view{value != nullptr ? value : ""});
  }

  // Integer attributes with any key: stored inline as a packed token (packed_attrs.h: the
  // key's bytes and the value's, formatted by the drainer) when it surely fits, else by a call
  // into the library, which unpacks to text and cuts at the limit. The span is ordinary from
  // here on (its compact attributes, if any, become packed tokens first).
  Span& attr(std::string_view key, int64_t value) noexcept {
    if (name_ != nullptr) {
      settle();
      if (fits(key)) {
        spilled_ = 1;
        attrs_len_ = static_cast<uint16_t>(
            attrs_len_ + pack_token(attrs_ + attrs_len_, key.data(),
                                    static_cast<uint32_t>(key.size()),
                                    value < 0 ? kPackedNegative : kPackedUnsigned,
                                    value < 0 ? 0 - static_cast<uint64_t>(value)
                                              : static_cast<uint64_t>(value)));
      } else {
        data() = append_int(data(), key, value);
        spilled_ = 1;
      }
    }
    return *this;
  }
  Span& attr(std::string_view key, uint64_t value) noexcept {
    if (name_ != nullptr) {
      settle();
      if (fits(key)) {
        spilled_ = 1;
        attrs_len_ = static_cast<uint16_t>(
            attrs_len_ + pack_token(attrs_ + attrs_len_, key.data(),
                                    static_cast<uint32_t>(key.size()), kPackedUnsigned, value));
      } else {
        data() = append_uint(data(), key, value);
        spilled_ = 1;
      }
    }
    return *this;
  }
  Span& attr(std::string_view key, int value) noexcept { return attr(key, int64_t{value}); }
  Span& attr(std::string_view key, unsigned value) noexcept { return attr(key, uint64_t{value}); }
  Span& attr(std::string_view key, long long value) noexcept {
    return attr(key, static_cast<int64_t>(value));
  }
  Span& attr(std::string_view key, unsigned long long value) noexcept {
    return attr(key, static_cast<uint64_t>(value));
  }
  // Text value; it should hold no space (a space separates tokens in [STRACE]).
  Span& attr(std::string_view key, std::string_view value) noexcept {
    if (name_ != nullptr) {
      settle();
      data() = append_text(data(), key, value);
      spilled_ = 1;
    }
    return *this;
  }
  Span& attr(std::string_view key, const char* value) noexcept {
    return attr(key, std::string_view{value ? value : ""});
  }

  // True while the span is recording (tracing was enabled when it began).
  bool active() const noexcept { return name_ != nullptr; }

 private:
  // The out-of-line part takes the span's fields by value and returns them by value (see
  // detail::SpanData): nothing here ever sees the Span's address.
  detail::SpanData& data() noexcept { return *this; }
  // A span begun in the library: its fields (name_ null: inactive). name_len: strlen of a
  // literal, else kNameLenUnknown; name_id: its string id, 0: none; strings: the table name_id
  // came from (the caller's module's), null with no id; site: the SPANRING_SPAN site of a
  // literal name, else null.
  static detail::SpanData begin(const char* name, size_t name_len, uint16_t name_id,
                                detail::ModuleStrings* strings, detail::SpanSite* site) noexcept;
#if SPANRING_IMPLICIT_SITE
  // Span(name)'s begin for literal `name` (1..kStringMaxBytes bytes) at the call's own site
  // `s`: as SPANRING_SPAN's when the name is the site's literal (one more compare: the site's
  // pointer with the name's), else the name's id from the module's table and no site.
  SPANRING_ALWAYS_INLINE void begin_implicit(detail::ImplicitSite& s, const char* name) noexcept {
    const uint32_t len = static_cast<uint32_t>(__builtin_strlen(name));
    // acquire: pairs with site_name_slow's release, so the string entry the id names is seen
    // ready.
    const uint64_t word = s.site.name.load(std::memory_order_acquire);
    detail::ThreadState* const t = detail::t_self;
    // SPANRING_SPAN's one test of the site and the thread (detail::SpanSite::name), and the
    // site's literal is this name (relaxed: write-once, detail::ImplicitSite).
    if (__builtin_expect(((word ^ t->ring.gate_word()) >> 16) == 0 &&
                             s.literal.load(std::memory_order_relaxed) == name &&
                             t->depth < kOpenSpanMax,
                         1))
      begin_inline(*t, name, static_cast<uint16_t>(word), static_cast<uint32_t>(word), &s.site);
    else {
      const uint32_t id = detail::implicit_site_id(s, name, len);
      begin_library(name, len, static_cast<uint16_t>(id), &detail::g_module_strings,
                    (id >> 16) != 0 ? &s.site : nullptr);
    }
  }
#endif
  // begin() into this span, with what begin() always sets repeated here, where the compiler
  // sees it: whichever way the span began, attr() and the destructor then test constants (no
  // compact attribute yet, packed, an empty attribute buffer; ends through end()).
  SPANRING_ALWAYS_INLINE void begin_library(const char* name, size_t name_len, uint16_t name_id,
                                            detail::ModuleStrings* strings,
                                            detail::SpanSite* site) noexcept {
    data() = begin(name, name_len, name_id, strings, site);
    // The table and the site as the call passed them (begin() nulls the table of a name
    // without an id; attr() then keeps integers compact until end_at, which packs them the same
    // way): constants of the call site, the same as begin_inline's, so that the two ways a span
    // begins leave them alike and nothing is kept to tell them apart.
    strings_ = strings;
    site_ = site;
    count_ = 0;
    negative_ = 0;
    packed_ = true;
    attrs_len_ = 0;
    inline_ = 0;
    spilled_ = 0;
    clear_compact();
  }
  // No compact attribute: all kCompactAttrs keys null and values 0, so that finish() reads no
  // indeterminate slot (same_keys compares all the keys; the record carries all the values).
  // Constants the compiler keeps in registers: they cost nothing until an attribute is set.
  SPANRING_ALWAYS_INLINE void clear_compact() noexcept {
    keys_[0] = keys_[1] = keys_[2] = keys_[3] = nullptr;
    values_[0] = values_[1] = values_[2] = values_[3] = 0;
  }
  // begin() for a literal name with id `name_id` in this module's table, on thread `t` whose
  // gate is open (detail::gate_open: a ring claimed, timed by the counter, not busy, not a vfork
  // child, no drop since the last record), at a depth below kOpenSpanMax:
  // the span's fields, the counter read and the open-span note (ring->open[depth], then
  // open_depth), which a drainer reports when this process is killed before the span ends.
  // name_len_, tsc_, packed_ and attrs_len_ are left unset: only the library reads them, and
  // its end_at sets them for a span begun here (inline_ != 0: the name's length, the counter,
  // packed) and settle() before an attribute goes there; stored here they would be stores on
  // every span (the compiler keeps them in memory: only the fallbacks' copies read them).
  // `note` is the open-span note's word for the name (detail::open_note_word(name_id)), which
  // a SPANRING_SPAN site's word holds as its low 32 bits. `site`: the span's site, whose word
  // (tested against the thread's gate) holds name_id, or null.
  SPANRING_ALWAYS_INLINE void begin_inline(detail::ThreadState& t, const char* name,
                                           uint16_t name_id, uint32_t note,
                                           detail::SpanSite* site) noexcept {
    const uint32_t depth = t.depth;
    const uint64_t inv = t.inv;
    const uint64_t hid = t.hid;
    name_ = name;
    inv_ = inv;
    hid_ = hid;
    depth_ = depth;
    // At a site, 0: the inline end takes the record's words from the site, and end_at the id
    // from the site's word (so nothing holds the id in a register from begin to end).
    name_id_ = site != nullptr ? 0 : name_id;
    count_ = 0;
    negative_ = 0;
    spilled_ = 0;
    clear_compact();
    strings_ = &detail::g_module_strings;
    site_ = site;
    state_ = &t;
    // A constant at each call: 2 with a site, 1 without (see inline_).
    inline_ = site != nullptr ? 2 : 1;
    const uint64_t start = detail::read_tsc();
    start_ = static_cast<int64_t>(start);
    RingHeader* const ring = t.ring.shared();
    OpenSpan& o = ring->open[depth];
    o.ts_ns = start;
    o.inv = inv;
    // name_id, kOpenTsc and name_len 0 (an interned name: its id, no bytes) in one store.
    detail::store_open_word(o, note);
    // After the note's stores, which GCC cannot tell from the state's: one store of depth.
    t.depth = depth + 1;
    // relaxed: read by the drainer only once this process is dead.
    ring->open_depth.store(depth + 1, std::memory_order_relaxed);
  }
  // The span, begun by begin_inline (inline_: an interned name, timed by the counter, depth
  // below kOpenSpanMax), ends at counter value `end`: written here, as one CompactRecord, when
  // it is still compact (literal keys whose ids the thread's memo holds for this name, 32-bit
  // values, a duration below 2^32 ticks) and the thread may write inline (its gate open: not busy, not
  // a vfork child, no drop since its last record). Else end_at().
  SPANRING_ALWAYS_INLINE void finish() noexcept {
    detail::ThreadState* const t = static_cast<detail::ThreadState*>(state_);
    // The counter now minus the start, and whether that is below 2^32 ticks (detail::
    // ticks_since). An end before the start (TSC ticks of two CPUs can differ by a few ticks
    // on some hosts) wraps to a duration above 2^32 here and goes to end_at, which records 0.
    const uint64_t dur = detail::ticks_since(static_cast<uint64_t>(start_));
    const uint32_t count = count_;
    // busy from here when the gate is open (enter_open_busy: the test and the busy bit in one
    // instruction): a signal handler's record meanwhile is dropped and counted
    // (reentrant_drops, announced by release_busy), and the handler cannot change what is read
    // below (the key memo, the gate) while this thread reads it.
    if (__builtin_expect(spilled_ == 0 && dur <= 0xffffffffu && detail::enter_open_busy(*t), 1)) {
      // The record's words 6 and 7 (but for the depth byte): without attributes the name's id
      // alone; with them, from the site's key set (SPANRING_SPAN, or the call's own site) or
      // from the key ids of the thread's memo.
      // relaxed name_head: ordered by begin_inline's acquire of the site's word (SpanSite).
      uint64_t word6 =
          count == 0 && inline_ == 2
              ? site_->name_head.load(std::memory_order_relaxed)
              : RingWriter::compact_word6(kRecordCompact | kRecordTsc, name_id_, 0);
      uint64_t word7 = 0;
      bool known = true;
      if (count != 0 && inline_ == 2) {
        // A SPANRING_SPAN span: the site's key set, if it is this span's (else end_at, which
        // resolves the keys through the memo and fills an empty site). The site's set is
        // tagged with the gate word a thread of the set's generation has here (busy), the
        // current one while its gate is open.
        known = detail::site_keys_match(*site_, t->ring, keys_[0], keys_[1],
                                        keys_[2], keys_[3], word6, word7);
      } else if (count != 0) {
        // relaxed: the serial was set by this thread's or an earlier lookup in the table,
        // ordered for this thread by the acquire of the name's word (string_id).
        uint64_t keys = 0;
        known = detail::memo_keys_match(t->key_memo[name_id_ % detail::kKeyMemoSlots], count,
                                        strings_->serial.load(std::memory_order_relaxed),
                                        keys_[0], keys_[1], keys_[2], keys_[3], keys);
        word6 = RingWriter::compact_word6(kRecordCompact | kRecordTsc, name_id_, keys);
        word7 = keys >> 16 | uint64_t{count} << 56;
      }
      // The ring's room before the span's fields are read (RingWriter::room_for_compact); a
      // full ring is end_at's, which counts the drop.
      if (__builtin_expect(known && t->ring.room_for_compact(), 1)) {
        const uint32_t depth = depth_;
        t->depth -= 1;
        RingHeader* const ring = t->ring.put_compact_words(
            static_cast<uint64_t>(start_), inv_, hid_, values_[0], values_[1], values_[2],
            values_[3], static_cast<uint32_t>(dur), word6,
            word7 | uint64_t{negative_} << 60, static_cast<uint8_t>(depth));
        // After the record is published (see end_at), with the ring header's pointer still in
        // a register (after release_open_busy's compiler barriers it would be loaded again).
        // release: ordered after the head's release store, so a process killed in between
        // shows the span written and open, never neither; the drainer reads it only once this
        // process is dead.
        ring->open_depth.store(depth, std::memory_order_release);
        detail::release_open_busy(*t);
        return;
      }
      detail::release_busy(*t);
    }
    end_at(data(), static_cast<int64_t>(static_cast<uint64_t>(start_) + dur));
  }
  // The span `d` ends at `end` (counter ticks when d.tsc_, else ns): the record through the
  // library's guarded write (ordinary or compact), the depth lowered. end(): at the clock's
  // reading now.
  static void end_at(detail::SpanData d, int64_t end) noexcept;
  static void end(detail::SpanData d) noexcept;
  // The attribute appended to `d` (its compact attributes spilled to tokens first): the span's
  // fields after it.
  static detail::SpanData append_int(detail::SpanData d, std::string_view key,
                                     int64_t value) noexcept;
  static detail::SpanData append_uint(detail::SpanData d, std::string_view key,
                                      uint64_t value) noexcept;
  static detail::SpanData append_text(detail::SpanData d, std::string_view key,
                                      std::string_view value) noexcept;
  // A literal key's integer that cannot be kept compact (a fifth one, or wider than 32 bits).
  static detail::SpanData add_number(detail::SpanData d, const char* key, size_t key_len,
                                     bool negative, uint64_t magnitude) noexcept;
  // Keeps literal key `key` as compact attribute count_ when the span can stay compact: a
  // literal name, fewer than kCompactAttrs, a 32-bit value (`fits`), and the key is a literal
  // of the module whose table holds the name's id (end() looks the key's id up in strings_: a
  // key of another module, which may be unloaded while strings_' module is not, must never be
  // cached there). A pointer compare, no lookup: end() resolves the ids.
  SPANRING_ALWAYS_INLINE bool compact_key(const char* key, bool fits) noexcept {
    if (spilled_ != 0 || count_ >= kCompactAttrs || !fits || strings_ != &detail::g_module_strings)
      return false;
    // The slots past count_ are null and 0 from begin (clear_compact).
    keys_[count_] = key;
    return true;
  }
  // Before an attribute goes to attrs_ (inline or in the library): a span whose attributes are
  // not there yet has an empty, packed buffer (begin_inline leaves both unset). A constant test
  // where the span is in registers.
  SPANRING_ALWAYS_INLINE void settle() noexcept {
    if (spilled_ == 0) {
      packed_ = true;
      attrs_len_ = 0;
    }
  }
  // After an integer attribute with a literal key went to the library (which spilled the span):
  // count_ as the inline path would have left it (see count_), from `count` before the call.
  SPANRING_ALWAYS_INLINE void after_fallback(uint8_t count) noexcept {
    spilled_ = 1;
    count_ = static_cast<uint8_t>(count < kCompactAttrs ? count + 1 : kCompactAttrs);
  }
  // values_[count_] = v, count_ < kCompactAttrs. The two arrays are indexed by count_, which
  // is not a constant where an attribute's fallback joins the inline path, so the compiler
  // keeps them in the span's memory and the span's other fields in registers.
  SPANRING_ALWAYS_INLINE void set_value(uint32_t v) noexcept { values_[count_] = v; }

  // Ordinary (or nothing compact yet), still packed, and room for a token with any value
  // (pack_token stores 8 value bytes).
  bool fits(std::string_view key) const noexcept {
    return (count_ == 0 || spilled_ != 0) && packed_ && key.size() <= kAttrsRawMax &&
           attrs_len_ + key.size() + kPackedTokenFixed + 8 <= kAttrsPackedMax;
  }

};

namespace detail {
// The inline part of SPANRING_EMIT's form of emit() at `site` (and of emit()'s at its own site,
// once the site's pointers are the call's), for literal strings (`attrs_len` the attribute
// text's length, 0 for none): the record written as one CompactRecord from the site's word 6
// when the site holds ids of the segment of this thread's ring and the record can be compact,
// ts and dur are in range, and the gate is exactly open (which also says depth <= 255:
// kGateDeep); anything else, and a full ring, is `slow()`'s, which returns emit()'s result.
template <class Slow>
SPANRING_ALWAYS_INLINE bool emit_at_site(EmitSite& site, uint32_t attrs_len, int64_t ts_ns,
                                         int64_t dur_ns, Slow&& slow) noexcept {
  // acquire: pairs with emit_site_slow's release, so the string entries the ids name are seen
  // ready and `head` is the filler's.
  const uint64_t word = site.word.load(std::memory_order_acquire);
  ThreadState* const t = t_self;
  // ts and dur first (ts_announced also keeps the closed state out of the exchange), then the
  // site's word against the thread's gate word with the busy bit set in the same
  // compare-and-exchange (enter_site_busy). From there a signal handler's record is dropped
  // and counted (reentrant_drops, announced by release_busy).
  if (__builtin_expect(ts_announced(*t, ts_ns) && static_cast<uint64_t>(dur_ns) <= 0xffffffffu &&
                           enter_site_busy(*t, word),
                       1)) {
    uint64_t pos;
    if (__builtin_expect(t->ring.room_for_compact(pos), 1)) {
      // relaxed: ordered after the filler's store by the acquire of `word` above.
      const uint64_t head = site.head.load(std::memory_order_relaxed);
      t->ring.put_compact_words(
          pos, static_cast<uint64_t>(ts_ns), t->inv, t->hid, 0, 0, static_cast<uint32_t>(dur_ns),
          head, static_cast<uint64_t>(attrs_len != 0 ? kCompactAttrsText : 0) << 56,
          static_cast<uint8_t>(t->depth));
      release_open_busy(*t);
      return true;
    }
    release_busy(*t);
  }
  return slow();
}
}  // namespace detail

SPANRING_ALWAYS_INLINE bool emit(const char* name, int64_t ts_ns, int64_t dur_ns,
                                 const char* attrs) noexcept {
  if (!enabled()) return false;
  // Both literals (see "Literal strings" at Span): their ids are cached by pointer, in this
  // module's table.
  if (__builtin_constant_p(__builtin_strlen(name)) && __builtin_strlen(name) != 0 &&
      __builtin_strlen(name) <= kStringMaxBytes && __builtin_constant_p(attrs == nullptr) &&
      (attrs == nullptr || (__builtin_constant_p(__builtin_strlen(attrs)) &&
                            __builtin_strlen(attrs) <= kStringMaxBytes))) {
    const uint32_t name_len = static_cast<uint32_t>(__builtin_strlen(name));
    const uint32_t attrs_len = attrs == nullptr ? 0u : static_cast<uint32_t>(__builtin_strlen(attrs));
#if SPANRING_IMPLICIT_SITE
    // The call's own descriptor (detail::ImplicitEmitSite), used as SPANRING_EMIT's site when
    // this call's two pointers own it (relaxed: write-once, detail::ImplicitEmitSite).
    const char* const text = attrs != nullptr ? attrs : "";
    detail::ImplicitEmitSite& s = *detail::call_emit_site();
    if (__builtin_expect(detail::holds_pair(s, name, text), 1))
      return detail::emit_at_site(s.site, attrs_len, ts_ns, dur_ns, [&]() noexcept {
        // SPANRING_EMIT's slow path, with the pointers read back from the site (they are this
        // call's), so that the caller's need not be kept in the call's argument registers
        // across the tests (GCC copied them there before each compare). relaxed: as above.
        return detail::emit_site_slow(s.site, s.name.load(std::memory_order_relaxed), name_len,
                                      s.attrs.load(std::memory_order_relaxed), attrs_len, ts_ns,
                                      dur_ns);
      });
    return detail::implicit_emit_slow(s, name, name_len, text, attrs_len, ts_ns, dur_ns);
#else
    uint16_t name_id;
    uint16_t attrs_id = 0;
    if (attrs_len == 0)
      name_id = detail::string_id(name, name_len);
    else
      detail::string_ids(name, name_len, attrs, attrs_len, name_id, attrs_id);
    detail::ThreadState* const t = detail::t_self;
    // The common case, written here as one CompactRecord naming both strings: both interned, a
    // thread whose ring is claimed, not busy, not a vfork child, no drop since its last record,
    // depth <= 255 (all in the gate: kGateDeep), ts and dur in range (not negative, dur below
    // 2^32 ns, ts not before what the ring announced: early_ns). Anything else is
    // emit_literal's.
    if (__builtin_expect(name_id != 0 && (attrs_id != 0 || attrs_len == 0) &&
                             detail::gate_open(*t) && detail::ts_announced(*t, ts_ns) &&
                             static_cast<uint64_t>(dur_ns) <= 0xffffffffu,
                         1)) {
      // busy while the slot is written (enter_busy: false when a signal handler dropped a
      // record just before, kGateGap): a signal handler's record meanwhile is dropped and
      // counted (reentrant_drops, announced by release_busy). A full ring is emit_literal's,
      // which counts the drop.
      if (__builtin_expect(detail::enter_busy(*t) && t->ring.room_for_compact(), 1)) {
        t->ring.put_compact(
            static_cast<uint64_t>(ts_ns), t->inv, t->hid, 0, 0,
            static_cast<uint32_t>(dur_ns), kRecordCompact, name_id, attrs_id,
            static_cast<uint8_t>(t->depth), attrs_id != 0 ? kCompactAttrsText : uint8_t{0});
        detail::release_open_busy(*t);
        return true;
      }
      detail::release_busy(*t);
    }
    return detail::emit_literal(name, name_len, name_id, attrs, attrs_len, attrs_id, ts_ns,
                                dur_ns);
#endif
  }
  return detail::emit_text(name, ts_ns, dur_ns, attrs);
}

// emit() for the call site `site` (SPANRING_EMIT's form): `name` and `attrs` are the site's
// string literals, the same at every call. The record and the output are emit()'s; the two
// string ids come from the site (one acquire load, tested with the thread's gate word in one
// XOR and shift, then the record's word 6 from the site) instead of two lookups in the
// module's table. A name or text GCC does not see as a literal (-O0, clang) takes emit()'s path
// and leaves the site alone.
SPANRING_ALWAYS_INLINE bool emit(detail::EmitSite& site, const char* name, int64_t ts_ns,
                                 int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  if (__builtin_constant_p(__builtin_strlen(name)) && __builtin_strlen(name) != 0 &&
      __builtin_strlen(name) <= kStringMaxBytes && __builtin_constant_p(__builtin_strlen(attrs)) &&
      __builtin_strlen(attrs) <= kStringMaxBytes) {
    const uint32_t name_len = static_cast<uint32_t>(__builtin_strlen(name));
    const uint32_t attrs_len = static_cast<uint32_t>(__builtin_strlen(attrs));
    // Captured by value: a reference capture takes the parameters' addresses, after which
    // GCC (12, aarch64) no longer folds the __builtin_constant_p tests above to true and every
    // call took emit_text.
    return detail::emit_at_site(
        site, attrs_len, ts_ns, dur_ns,
        [&site, name, name_len, attrs, attrs_len, ts_ns, dur_ns]() noexcept {
          return detail::emit_site_slow(site, name, name_len, attrs, attrs_len, ts_ns, dur_ns);
        });
  }
  return detail::emit_text(name, ts_ns, dur_ns, attrs);
}

#if defined(__cpp_constinit)
#define SPANRING_SITE_CONSTINIT constinit
#else
#define SPANRING_SITE_CONSTINIT
#endif

// SPANRING_EMIT(name, ts_ns, dur_ns, attrs): emit(name, ts_ns, dur_ns, attrs) with a descriptor
// of this call site (detail::EmitSite) as a function-local static: the same record and output
// bytes, cheaper because the string ids of `name` and `attrs` are kept in the site, valid for
// the segment the process is attached to (a fork keeps them; an attach resolves them again on
// the site's next use). `name` and `attrs` must be string literals (anything else does not
// compile; "" for no attributes). An expression of type bool (emit()'s result); `ts_ns` and
// `dur_ns` are evaluated once. Where the site lives, and the caveat for inline functions and
// templates: as SPANRING_SPAN's (below). SPANRING_COMPILED_OUT: false, the arguments not
// evaluated.
#ifdef SPANRING_COMPILED_OUT
#define SPANRING_EMIT(name, ts_ns, dur_ns, attrs) \
  (static_cast<void>(sizeof(ts_ns)), static_cast<void>(sizeof(dur_ns)), false)
#else
#define SPANRING_EMIT(name, ts_ns, dur_ns, attrs)                                        \
  ([&]() noexcept -> bool {                                                              \
    static SPANRING_SITE_CONSTINIT ::spanring::detail::EmitSite spanring_emit_site;      \
    return ::spanring::emit(spanring_emit_site, "" name, ts_ns, dur_ns, "" attrs);        \
  }())
#endif

// SPANRING_SPAN(var, "name"): declares `spanring::Span var` for the string literal `name`,
// with a descriptor of this call site (detail::SpanSite) as a function-local static of the
// enclosing function. The span behaves and records exactly as `spanring::Span var{"name"}` (the
// same output bytes); it is cheaper because the name's string id and the ids of the literal
// keys its spans end with are kept in the site, valid for the segment the process is attached
// to (a fork keeps them; an attach, also in a forked child, resolves them again on the site's
// next use), instead of being looked up by pointer in the module's table and the thread's key
// memo. `var` is an identifier (the site is named after it); `name` must be a string literal
// (anything else does not compile): one site always has one name.
//
// Statement form: it expands to two declarations (the static site, then the Span), so use it
// where a declaration statement may stand, not as the body of an unbraced if/for.
//
// Where the site lives: the static belongs to the module (executable or shared library) whose
// function holds the call, and is unmapped with it; a library dlclose'd and another loaded at
// its address each use their own sites. In a function that is not inline (the usual case) the
// static is a local symbol and the library unloads normally. In an inline function or a
// template, the static of a symbol with default visibility becomes a unique symbol
// (STB_GNU_UNIQUE) that glibc never unloads, which keeps a plugin loaded after dlclose: build
// such code with -fvisibility=hidden (or -fvisibility-inlines-hidden), or use Span there.
//
// SPANRING_COMPILED_OUT: declares a NullSpan that compiles to nothing.
#ifdef SPANRING_COMPILED_OUT
struct NullSpan {
  explicit NullSpan(const char*) noexcept {}
  template <class K, class V>
  NullSpan& attr(K&&, V&&) noexcept { return *this; }
};
#define SPANRING_SPAN(var, name) ::spanring::NullSpan var { "" name }
#else
#define SPANRING_SPAN(var, name)                                                   \
  static SPANRING_SITE_CONSTINIT ::spanring::detail::SpanSite spanring_site_##var; \
  ::spanring::Span var { spanring_site_##var, "" name }
#endif

}  // namespace spanring
