// spanring._spanring: the CPython extension behind the `spanring` package (docs/python.md).
//
// Every call on the hot path is C: Producer.span() (vectorcall with keyword names, no dict),
// Span.__enter__/__exit__ (C functions, METH_NOARGS and METH_FASTCALL, bound to a span without
// allocating: SpanMethod, BoundObject), Producer.enabled(). Span objects are kept on a small free
// list (kFreeSpans) instead of being freed, so a `with` usually allocates nothing. A Python span is recorded one of two ways, with the same output:
// - by id (the common case): a name seen before from the same str object, with at most
//   kCompactAttrs attributes whose keys (the call site's keyword-name tuple, seen before) have
//   ids and whose values are ints in 32 bits. The name's and keys' string ids come from the
//   producer's name cache (NameEntry), interned once per attach generation; the span is an
//   IdSpan (src/id_span.h) and usually one 64-byte CompactRecord;
// - otherwise a spanring::Span (span.h) built in place inside the Python object, with the name
//   copied and measured and each attribute added as a C++ caller adds it.
// Either way it shares everything a C++ span has: the thread's ring and depth (a Python span
// inside a C++ span of the same thread is its child), the TSC clock converted by the drainer,
// the open-span note that reports a killed process' open spans. libspanring is linked as a
// shared library, so a process that also loads C++ code linked against libspanring holds one
// copy of the producer (one ring per thread).
//
// Rejected: ctypes over the C ABI (a ctypes call alone costs more than the whole span), and a
// pure-Python context-manager class around C calls (two Python frames per span, ~3x the cost).
//
// Threading: the GIL serialises every call here (the free list and the name caches are guarded
// by it). A span is recorded by the thread that entered it; one left on another thread is not
// recorded (RuntimeWarning), because ending it there would pop another thread's depth.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <spanring/segment_layout.h>
#include <spanring/span.h>

#include "src/id_span.h"

#include <atomic>
#include <charconv>
#include <cstring>
#include <new>
#include <string_view>

namespace {

// Keyword attributes held inline in a span object; more go to one PyMem block.
constexpr Py_ssize_t kInlineAttrs = 6;

// The name bytes a span keeps: the library reads at most kNameRawMax (65) raw bytes of a name,
// one past the 64-byte cap so that the drainer knows to cut with `~`.
constexpr size_t kNameBuf = spanring::kNameRawMax + 1;

// Span objects kept for reuse after they are freed (a `with` makes one and frees it).
constexpr int kFreeSpans = 16;

// Entries of a producer's name cache (a power of two): the distinct span names a program's
// hot loop uses are few; a collision only costs the colliding names the Span path.
constexpr uint32_t kNameCacheBits = 4;

PyObject* g_decorate = nullptr;        // spanring._decorate(producer, name, attrs, func)
PyObject* g_current_thread = nullptr;  // threading.current_thread
// The last keyword-name tuple that passed the identifier check (a strong reference, so its
// address cannot be reused by another tuple). A call site's keyword names are one constant
// tuple of its code object, so a loop checks its keys once.
PyObject* g_checked_kwnames = nullptr;

// This thread's serial: 0 until its first span or invocation enters, then a number no other
// thread of the process is given (g_next_thread_serial), which spans and invocations keep to
// tell whether they end on the thread that began them. Not PyThread_get_thread_ident(): that
// is the pthread_t, which glibc hands to a new thread as soon as one exits, so a span left open
// by an exited thread (a suspended generator, say) passed the check on the next thread and
// ended on a state that was not its own (a null one: a crash; another thread's: its depth).
// Set also means this thread has given its Python name to the library (set_thread_name). Kept
// across fork: the forking thread is the child's, its open spans are still its own there.
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_serial = 0;
// relaxed: only uniqueness matters, and each thread reads back its own value.
std::atomic<uint64_t> g_next_thread_serial{0};

// ---- helpers

// UTF-8 bytes of a str; a str that UTF-8 cannot encode (lone surrogates) is encoded with
// backslash escapes into *keep, which the caller releases. Never fails with an exception set.
std::string_view utf8(PyObject* s, PyObject** keep) {
  Py_ssize_t n = 0;
  if (const char* p = PyUnicode_AsUTF8AndSize(s, &n)) return {p, static_cast<size_t>(n)};
  PyErr_Clear();
  *keep = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
  if (*keep == nullptr) {
    PyErr_Clear();
    return {};
  }
  return {PyBytes_AS_STRING(*keep), static_cast<size_t>(PyBytes_GET_SIZE(*keep))};
}

// The calling thread's Python name becomes its ring's thread name (before its first span
// claims the ring). Failures only leave the kernel's name.
void name_thread() {
  t_serial = g_next_thread_serial.fetch_add(1, std::memory_order_relaxed) + 1;
  PyObject* t = PyObject_CallNoArgs(g_current_thread);
  PyObject* name = t != nullptr ? PyObject_GetAttrString(t, "name") : nullptr;
  if (name != nullptr && PyUnicode_Check(name)) {
    PyObject* keep = nullptr;
    const std::string_view v = utf8(name, &keep);
    char buf[17] = {};
    std::memcpy(buf, v.data(), v.size() < 16 ? v.size() : 16);
    spanring::set_thread_name(buf);
    Py_XDECREF(keep);
  }
  Py_XDECREF(name);
  Py_XDECREF(t);
  PyErr_Clear();
}

// The calling thread's serial (t_serial), given on its first call (which also names the
// thread for the library).
inline uint64_t thread_serial() {
  if (__builtin_expect(t_serial == 0, 0)) name_thread();
  return t_serial;
}

// The keyword attributes of a span() call: keys must be identifiers (ValueError), values int,
// float, bool or str (TypeError), a str value without a space (ValueError: a space separates
// [STRACE] tokens). Checked whether tracing is enabled or not, so a program behaves the same
// traced and untraced.
int check_attrs(PyObject* const* values, PyObject* kwnames) {
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  if (kwnames != g_checked_kwnames) {
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* key = PyTuple_GET_ITEM(kwnames, i);
      if (PyUnicode_IsIdentifier(key) != 1) {
        PyErr_Format(PyExc_ValueError,
                     "spanring: attribute key %R is not an identifier", key);
        return -1;
      }
    }
    Py_INCREF(kwnames);
    Py_XSETREF(g_checked_kwnames, kwnames);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = values[i];
    if (PyLong_Check(v) || PyFloat_Check(v)) continue;
    if (PyUnicode_Check(v)) {
      if (PyUnicode_FindChar(v, ' ', 0, PyUnicode_GET_LENGTH(v), 1) >= 0) {
        PyErr_Format(PyExc_ValueError,
                     "spanring: attribute %U=%R holds a space, which separates [STRACE] tokens",
                     PyTuple_GET_ITEM(kwnames, i), v);
        return -1;
      }
      continue;
    }
    PyErr_Format(PyExc_TypeError,
                 "spanring: attribute %U must be int, float, bool or str, not %.100s",
                 PyTuple_GET_ITEM(kwnames, i), Py_TYPE(v)->tp_name);
    return -1;
  }
  return 0;
}

// The span name: a non-empty str. Anything else, None included, is a ValueError, as
// simpler.trace (the runtime's Python tracing API, docs/python.md) refuses a bad name: code
// written against either catches the same exception.
int check_name(PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_ValueError, "spanring: a span name must be a str, not %.100s",
                 Py_TYPE(name)->tp_name);
    return -1;
  }
  if (PyUnicode_GET_LENGTH(name) == 0) {
    PyErr_SetString(PyExc_ValueError, "spanring: a span name must not be empty");
    return -1;
  }
  return 0;
}

// One attribute into a recording span, spelled as str() spells the value (True, 0.5, 1e-05),
// integers packed (decimal text written by the drainer).
void add_attr(spanring::Span& s, std::string_view key, PyObject* v) {
  if (PyBool_Check(v)) {
    s.attr(key, v == Py_True ? "True" : "False");
    return;
  }
  if (PyLong_Check(v)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow == 0 && !(x == -1 && PyErr_Occurred())) {
      s.attr(key, static_cast<int64_t>(x));
      return;
    }
    PyErr_Clear();
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(v);
      if (!PyErr_Occurred()) {
        s.attr(key, static_cast<uint64_t>(u));
        return;
      }
      PyErr_Clear();
    }
    // Beyond 64 bits: the decimal text.
    if (PyObject* text = PyObject_Str(v)) {
      PyObject* keep = nullptr;
      s.attr(key, utf8(text, &keep));
      Py_XDECREF(keep);
      Py_DECREF(text);
    }
    PyErr_Clear();
    return;
  }
  if (PyFloat_Check(v)) {
    // repr(float): the shortest text that reads back as the same double.
    if (char* text = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), 'r', 0, Py_DTSF_ADD_DOT_0,
                                           nullptr)) {
      s.attr(key, std::string_view{text});
      PyMem_Free(text);
    }
    PyErr_Clear();
    return;
  }
  PyObject* keep = nullptr;  // a str (check_attrs let nothing else through)
  s.attr(key, utf8(v, &keep));
  Py_XDECREF(keep);
}

// ---- Producer

// One entry of a producer's name cache: the string ids of span name `name` (the full name
// "ext.<producer>.<name>") and of the keys of keyword-name tuple `kwnames`. Keyed by the objects
// themselves, held as strong references: a cached object cannot be freed, so no other object can
// take its address, and a str and a tuple of str never change, so an entry can never give the
// ids of other bytes. The ids are those of attach generation `name_gen` / `keys_gen`
// (spanring::detail::attach_generation(), checked on every use: a re-attach, with another
// string table, interns again; 0: not interned yet). An object is interned the second time it is
// seen, never the first: the segment's string table is shared and never frees an entry, so a
// name made anew for every span (an f-string) must not fill it; such names take the Span path.
struct NameEntry {
  PyObject* name;      // strong; nullptr: the entry is empty
  PyObject* kwnames;   // strong; the keyword-name tuple key_ids belongs to, nullptr: none yet
  uint32_t name_gen;   // generation of name_id; 0: not interned yet
  uint32_t keys_gen;   // generation of key_ids/keys_ok; 0: not interned yet
  uint64_t key_ids;    // key i's id in bits 16i..16i+15
  uint16_t name_id;    // 0: the name cannot be interned (longer than kStringMaxBytes, a NUL
                       // byte, not UTF-8 encodable, the segment's table full)
  bool keys_ok;        // every key has an id (and there are at most kCompactAttrs)
};

struct ProducerObject {
  PyObject_HEAD
  PyObject* name;            // the producer's name (str)
  uint32_t prefix_len;       // bytes of prefix
  char prefix[kNameBuf];     // "ext.<name>.", cut at kNameBuf
  NameEntry names[1u << kNameCacheBits];  // the name cache, by the name object's address
};

// ---- Span (recording) and NoopSpan (tracing disabled)

// How an entered span is being recorded.
enum : uint8_t {
  kClosed = 0,  // not entered (or ended)
  kBySpan = 1,  // a spanring::Span in `storage`
  kById = 2,    // an IdSpan in `id`, attributes in ids/cvalues
};

struct SpanObject {
  PyObject_HEAD
  ProducerObject* producer;  // strong; on the free list: the next free span
  PyObject* name;            // str, strong
  PyObject* kwnames;         // tuple of keys, strong; nullptr: no attributes
  PyObject** values;         // nattrs strong references: inline_values or a PyMem block
  Py_ssize_t nattrs;
  uint64_t thread;           // thread_serial() of the thread that entered it
  uint8_t mode;              // kClosed, kBySpan, kById
  // kById: the attributes as the compact record holds them.
  uint32_t negative;         // bit i: cvalues[i] is negative (two's complement)
  uint64_t key_ids;          // key i's string id in bits 16i..
  uint32_t cvalues[spanring::kCompactAttrs];
  spanring::detail::IdSpan id;
  PyObject* inline_values[kInlineAttrs];
  // Freed BoundObjects of this span's __enter__ (0) and __exit__ (1), kept for the next `with`
  // (see BoundObject); nullptr: none kept. Owned by the span; they stay with it on the free list.
  struct BoundObject* bound[2];
  char full_name[kNameBuf + 1];  // prefix + name, NUL-terminated; read by the Span until it ends
  alignas(spanring::Span) unsigned char storage[sizeof(spanring::Span)];

  spanring::Span& span() { return *std::launder(reinterpret_cast<spanring::Span*>(storage)); }
};

// Freed span objects for reuse (linked through `producer`); the GIL guards both.
SpanObject* g_free_spans = nullptr;
int g_free_count = 0;

// For the tests (_spanring._set_by_id, _spanring._path_counts): whether spans may be recorded by
// id (false: every span takes the Span path, as before the id path existed), and how many took
// each path in this process (by_id_text: by id, ended as an ordinary record). GIL-guarded.
bool g_by_id = true;
unsigned long long g_count_by_span = 0;
unsigned long long g_count_by_id = 0;
unsigned long long g_count_by_id_text = 0;

extern PyTypeObject SpanType;
extern PyTypeObject NoopSpanType;
extern PyTypeObject ProducerType;
extern PyTypeObject InvocationType;

PyObject g_noop_span = {};

// A zeroed type object with refcount 1; PyType_Ready fills in the metatype.
PyTypeObject new_type() {
  PyTypeObject t;
  std::memset(&t, 0, sizeof t);
  Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);
  return t;
}  // the one NoopSpan (static, immortal by its refcount)

// The span's full name, "ext.<producer>." + name, into self->full_name: at most kNameBuf bytes
// (the library reads no more), NUL-terminated. Returns its length.
uint32_t build_full_name(SpanObject* self) {
  const ProducerObject* p = self->producer;
  const uint32_t len = p->prefix_len;
  std::memcpy(self->full_name, p->prefix, len);
  PyObject* keep = nullptr;
  const std::string_view leaf = utf8(self->name, &keep);
  const size_t n = leaf.size() < kNameBuf - len ? leaf.size() : kNameBuf - len;
  std::memcpy(self->full_name + len, leaf.data(), n);
  self->full_name[len + n] = '\0';
  Py_XDECREF(keep);
  return static_cast<uint32_t>(len + n);
}

// The string id of a producer's span name `name` (the full name), 0 when it cannot be interned:
// longer than kStringMaxBytes, holding a NUL byte (the Span path stops at it), or not UTF-8
// encodable (lone surrogates: the Span path writes their backslash escapes).
uint16_t intern_name(const ProducerObject* p, PyObject* name) {
  Py_ssize_t n = 0;
  const char* leaf = PyUnicode_AsUTF8AndSize(name, &n);
  if (leaf == nullptr) {
    PyErr_Clear();
    return 0;
  }
  const size_t len = p->prefix_len + static_cast<size_t>(n);
  if (len > spanring::kStringMaxBytes) return 0;
  char full[spanring::kStringMaxBytes];
  std::memcpy(full, p->prefix, p->prefix_len);
  std::memcpy(full + p->prefix_len, leaf, static_cast<size_t>(n));
  if (std::memchr(full, '\0', len) != nullptr) return 0;
  return spanring::detail::intern_string(full, static_cast<uint32_t>(len));
}

// The string ids of the keys of `kwnames` (1..kCompactAttrs identifiers) into *ids (key i in
// bits 16i..); false when a key has none (longer than kStringMaxBytes, table full).
bool intern_keys(PyObject* kwnames, uint64_t* ids) {
  const Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
  if (n > static_cast<Py_ssize_t>(spanring::kCompactAttrs)) return false;
  uint64_t out = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_ssize_t len = 0;
    const char* key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kwnames, i), &len);
    if (key == nullptr) {
      PyErr_Clear();
      return false;
    }
    const uint16_t id = spanring::detail::intern_string(key, static_cast<uint32_t>(len));
    if (id == 0) return false;
    out |= uint64_t{id} << (16 * i);
  }
  *ids = out;
  return true;
}

// Whether `self` can be recorded by id: its name and keys have ids in its producer's name cache
// (interned here on the second sight, see NameEntry), at most kCompactAttrs attributes, each an
// int (not a bool or another subclass: their text is not the integer's) in 32 bits. Fills
// self->id.name_id, key_ids, cvalues and negative.
bool resolve_ids(SpanObject* self) {
  const Py_ssize_t nattrs = self->nattrs;
  if (nattrs > static_cast<Py_ssize_t>(spanring::kCompactAttrs)) return false;
  uint32_t negative = 0;
  for (Py_ssize_t i = 0; i < nattrs; ++i) {
    PyObject* v = self->values[i];
    if (!PyLong_CheckExact(v)) return false;
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow != 0 || x < INT32_MIN || x > static_cast<long long>(UINT32_MAX)) return false;
    self->cvalues[i] = static_cast<uint32_t>(x);
    negative |= (x < 0 ? 1u : 0u) << i;
  }
  self->negative = negative;
  ProducerObject* const p = self->producer;
  PyObject* const name = self->name;
  const uintptr_t at = reinterpret_cast<uintptr_t>(name);
  NameEntry& e = p->names[(at * 0x9e3779b97f4a7c15ull) >> (64 - kNameCacheBits)];
  PyObject* const kwnames = self->kwnames;
  if (__builtin_expect(e.name != name, 0)) {
    // First sight of this name object here: remember it (and its keys), record by Span.
    Py_INCREF(name);
    Py_XSETREF(e.name, name);
    e.name_gen = 0;
    e.name_id = 0;
    if (kwnames != nullptr) {
      Py_INCREF(kwnames);
      Py_XSETREF(e.kwnames, kwnames);
    }
    e.keys_gen = 0;
    return false;
  }
  const uint32_t generation = spanring::detail::attach_generation();
  if (__builtin_expect(e.name_gen != generation, 0)) {
    e.name_id = intern_name(p, name);
    e.name_gen = generation;
  }
  if (e.name_id == 0) return false;
  self->id.name_id = e.name_id;
  if (kwnames == nullptr) {
    self->key_ids = 0;
    return true;
  }
  if (__builtin_expect(e.kwnames != kwnames, 0)) {
    // First sight of these keyword names with this name: remember them, record by Span.
    Py_INCREF(kwnames);
    Py_XSETREF(e.kwnames, kwnames);
    e.keys_gen = 0;
    return false;
  }
  if (__builtin_expect(e.keys_gen != generation, 0)) {
    e.keys_ok = intern_keys(kwnames, &e.key_ids);
    e.keys_gen = generation;
  }
  self->key_ids = e.key_ids;
  return e.keys_ok;
}

// A span recorded by id that cannot end compact (id_span_end_compact said so): its ordinary
// record, from the same name and attribute text the Span path would store (integers in decimal,
// `key=value` tokens separated by one space, cut at kAttrsRawMax).
void end_by_text(SpanObject* self) {
  const uint32_t name_len = build_full_name(self);
  char attrs[spanring::kCompactAttrs * (spanring::kStringMaxBytes + 13)];
  size_t len = 0;
  for (Py_ssize_t i = 0; i < self->nattrs; ++i) {
    Py_ssize_t key_len = 0;
    // The keys were UTF-8 encoded when they were interned (cached in the str).
    const char* key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(self->kwnames, i), &key_len);
    if (key == nullptr) {
      PyErr_Clear();
      key_len = 0;
    }
    if (len != 0) attrs[len++] = ' ';
    std::memcpy(attrs + len, key, static_cast<size_t>(key_len));
    len += static_cast<size_t>(key_len);
    attrs[len++] = '=';
    const uint32_t v = self->cvalues[i];
    if ((self->negative >> i & 1) != 0) {
      attrs[len++] = '-';
      len = std::to_chars(attrs + len, attrs + sizeof attrs, 0u - v).ptr - attrs;
    } else {
      len = std::to_chars(attrs + len, attrs + sizeof attrs, v).ptr - attrs;
    }
  }
  spanring::detail::id_span_end_text(self->id, self->full_name, name_len, attrs,
                                     static_cast<uint32_t>(len));
}

// Ends the span recorded in `self` (entered on this thread) or, when entered on another one,
// drops it with a warning: a span must end on its own thread (it pops that thread's depth).
void end_span(SpanObject* self) {
  const uint8_t mode = self->mode;
  self->mode = kClosed;
  if (self->thread == thread_serial()) {
    if (mode == kById) {
      if (!spanring::detail::id_span_end_compact(self->id, self->cvalues, self->key_ids,
                                                 static_cast<uint32_t>(self->nattrs),
                                                 self->negative)) {
        ++g_count_by_id_text;
        end_by_text(self);
      }
      return;
    }
    self->span().~Span();
    return;
  }
  PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                   "spanring: span %R ended on another thread than it began on: not recorded",
                   self->name);
}

// The `with` statement looks __enter__ and __exit__ up on the span's type and binds each to the
// span (CPython's _PyObject_LookupSpecial): with method descriptors that makes and frees two
// GC-tracked builtin-method objects per `with`, about a third of a traced span's instructions.
// The type's __enter__ and __exit__ are instead SpanMethod descriptors (installed over the
// method descriptors at import; looked up on the type they return those, so Span.__enter__(s)
// still works), which bind by handing out a BoundObject: a plain object (no GC: it refers only
// to its span, which refers to no live BoundObject) that calls Span_enter/Span_exit through
// vectorcall. When a BoundObject is freed its memory goes back to its span (SpanObject::bound)
// and the next `with` on that span object, which the free list usually hands out again, takes
// it: a `with` allocates nothing.
PyObject* Span_enter(SpanObject* self, PyObject*);
PyObject* Span_exit(SpanObject* self, PyObject* const*, Py_ssize_t);

struct BoundObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  SpanObject* span;  // strong
  int which;         // 0: __enter__, 1: __exit__
};

struct SpanMethodObject {
  PyObject_HEAD
  PyObject* method;  // the type's method descriptor this replaces (strong): the unbound method
  int which;
};

extern PyTypeObject BoundType;

PyObject* Bound_enter(PyObject* callable, PyObject* const*, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 0 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
    PyErr_SetString(PyExc_TypeError, "spanring: __enter__() takes no arguments");
    return nullptr;
  }
  return Span_enter(reinterpret_cast<BoundObject*>(callable)->span, nullptr);
}

PyObject* Bound_exit(PyObject* callable, PyObject* const* args, size_t nargsf,
                     PyObject* kwnames) {
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) {
    PyErr_SetString(PyExc_TypeError, "spanring: __exit__() takes no keyword arguments");
    return nullptr;
  }
  return Span_exit(reinterpret_cast<BoundObject*>(callable)->span, args,
                   PyVectorcall_NARGS(nargsf));
}

void Bound_dealloc(BoundObject* self) {
  SpanObject* const span = self->span;
  if (span->bound[self->which] == nullptr)
    span->bound[self->which] = self;  // kept for the span's next `with`
  else
    PyObject_Free(self);
  Py_DECREF(reinterpret_cast<PyObject*>(span));
}

PyObject* Bound_repr(BoundObject* self) {
  return PyUnicode_FromFormat("<bound method %s of %R>", self->which == 0 ? "__enter__" : "__exit__",
                              reinterpret_cast<PyObject*>(self->span));
}

PyTypeObject BoundType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.SpanMethod.bound";
  t.tp_basicsize = sizeof(BoundObject);
  t.tp_dealloc = reinterpret_cast<destructor>(Bound_dealloc);
  t.tp_repr = reinterpret_cast<reprfunc>(Bound_repr);
  t.tp_vectorcall_offset = offsetof(BoundObject, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  t.tp_doc = "__enter__ or __exit__ of one span.";
  return t;
}();

// SpanMethod.__get__: on the type, the method descriptor; on a span, its BoundObject.
PyObject* SpanMethod_get(SpanMethodObject* self, PyObject* obj, PyObject* type) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self->method);
    return self->method;
  }
  // Only a Span binds here (the type has no subclasses); anything else gets the method
  // descriptor's own answer (a TypeError).
  if (!Py_IS_TYPE(obj, &SpanType))
    return Py_TYPE(self->method)->tp_descr_get(self->method, obj, type);
  SpanObject* const span = reinterpret_cast<SpanObject*>(obj);
  BoundObject* b = span->bound[self->which];
  if (b != nullptr) {
    span->bound[self->which] = nullptr;
    PyObject_Init(reinterpret_cast<PyObject*>(b), &BoundType);
  } else {
    b = PyObject_New(BoundObject, &BoundType);
    if (b == nullptr) return nullptr;
    b->which = self->which;
    b->vectorcall = self->which == 0 ? Bound_enter : Bound_exit;
  }
  Py_INCREF(obj);
  b->span = span;
  return reinterpret_cast<PyObject*>(b);
}

void SpanMethod_dealloc(SpanMethodObject* self) {
  Py_XDECREF(self->method);
  PyObject_Free(self);
}

PyTypeObject SpanMethodType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.SpanMethod";
  t.tp_basicsize = sizeof(SpanMethodObject);
  t.tp_dealloc = reinterpret_cast<destructor>(SpanMethod_dealloc);
  t.tp_descr_get = reinterpret_cast<descrgetfunc>(SpanMethod_get);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "Span.__enter__ / Span.__exit__: binds to a span without allocating.";
  return t;
}();

// Installs the SpanMethod descriptors over Span's __enter__ and __exit__ (after PyType_Ready).
int install_span_methods() {
  static const char* const names[2] = {"__enter__", "__exit__"};
  for (int which = 0; which < 2; ++which) {
    PyObject* method = PyDict_GetItemString(SpanType.tp_dict, names[which]);  // borrowed
    if (method == nullptr) {
      PyErr_SetString(PyExc_RuntimeError, "spanring: Span has no __enter__/__exit__");
      return -1;
    }
    SpanMethodObject* d = PyObject_New(SpanMethodObject, &SpanMethodType);
    if (d == nullptr) return -1;
    Py_INCREF(method);
    d->method = method;
    d->which = which;
    const int r = PyDict_SetItemString(SpanType.tp_dict, names[which],
                                       reinterpret_cast<PyObject*>(d));
    Py_DECREF(d);
    if (r < 0) return -1;
  }
  PyType_Modified(&SpanType);
  return 0;
}

void Span_dealloc(SpanObject* self) {
  if (self->mode != kClosed) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    end_span(self);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
  }
  for (Py_ssize_t i = 0; i < self->nattrs; ++i) Py_DECREF(self->values[i]);
  if (self->values != self->inline_values) PyMem_Free(self->values);
  Py_XDECREF(self->kwnames);
  Py_DECREF(self->name);
  Py_DECREF(reinterpret_cast<PyObject*>(self->producer));
  if (g_free_count < kFreeSpans) {
    self->producer = reinterpret_cast<ProducerObject*>(g_free_spans);
    g_free_spans = self;
    ++g_free_count;
    return;
  }
  for (BoundObject* b : self->bound) PyObject_Free(b);
  PyObject_Free(self);
}

PyObject* Span_enter(SpanObject* self, PyObject*) {
  if (self->mode != kClosed) {
    PyErr_SetString(PyExc_RuntimeError, "spanring: this span is already open");
    return nullptr;
  }
  self->thread = thread_serial();
  if (__builtin_expect(g_by_id && spanring::enabled() && resolve_ids(self), 1)) {
    spanring::detail::id_span_begin(self->id, self->id.name_id);
    self->mode = kById;
    ++g_count_by_id;
  } else {
    ++g_count_by_span;
    build_full_name(self);
    spanring::Span* s = new (self->storage) spanring::Span(self->full_name);
    for (Py_ssize_t i = 0; i < self->nattrs; ++i) {
      PyObject* kkeep = nullptr;
      add_attr(*s, utf8(PyTuple_GET_ITEM(self->kwnames, i), &kkeep), self->values[i]);
      Py_XDECREF(kkeep);
    }
    self->mode = kBySpan;
  }
  Py_INCREF(self);
  return reinterpret_cast<PyObject*>(self);
}

PyObject* Span_exit(SpanObject* self, PyObject* const*, Py_ssize_t) {
  if (self->mode != kClosed) end_span(self);
  if (PyErr_Occurred()) return nullptr;  // the warning was turned into an error
  Py_RETURN_FALSE;
}

// A keyword-argument dict of a span's attributes (for the decorator).
PyObject* attrs_dict(PyObject* kwnames, PyObject* const* values, Py_ssize_t n) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, i), values[i]) < 0) {
      Py_DECREF(d);
      return nullptr;
    }
  return d;
}

// span(func): the decorator. spanring._decorate builds the wrapper (a new span per call; an
// async def is timed over its awaited body).
PyObject* decorate(PyObject* producer, PyObject* name, PyObject* attrs, PyObject* args,
                   PyObject* kwargs) {
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "spanring: a span decorates one function");
    return nullptr;
  }
  if (PyTuple_GET_SIZE(args) != 1 || !PyCallable_Check(PyTuple_GET_ITEM(args, 0))) {
    PyErr_SetString(PyExc_TypeError, "spanring: a span decorates one function");
    return nullptr;
  }
  if (g_decorate == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "spanring: the decorator is not set up");
    return nullptr;
  }
  return PyObject_CallFunctionObjArgs(g_decorate, producer, name, attrs, PyTuple_GET_ITEM(args, 0),
                                      nullptr);
}

PyObject* Span_call(SpanObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* attrs = self->kwnames != nullptr
                        ? attrs_dict(self->kwnames, self->values, self->nattrs)
                        : PyDict_New();
  if (attrs == nullptr) return nullptr;
  PyObject* r = decorate(reinterpret_cast<PyObject*>(self->producer), self->name, attrs, args,
                         kwargs);
  Py_DECREF(attrs);
  return r;
}

PyObject* Span_repr(SpanObject* self) {
  return PyUnicode_FromFormat("<spanring span %U of producer %U%s>", self->name,
                              self->producer->name, self->mode != kClosed ? ", open" : "");
}

PyMethodDef span_methods[] = {
    {"__enter__", reinterpret_cast<PyCFunction>(Span_enter), METH_NOARGS,
     "Begins the span (reads the clock); returns the span."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Span_exit)),
     METH_FASTCALL, "Ends the span and records it; never suppresses an exception."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject SpanType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.Span";
  t.tp_basicsize = sizeof(SpanObject);
  t.tp_dealloc = reinterpret_cast<destructor>(Span_dealloc);
  t.tp_repr = reinterpret_cast<reprfunc>(Span_repr);
  t.tp_call = reinterpret_cast<ternaryfunc>(Span_call);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A span of a producer: a context manager (timed from __enter__ to __exit__) and a "
             "decorator. Made by Producer.span().";
  t.tp_methods = span_methods;
  return t;
}();

// The span of a process that is not traced: nothing to time, nothing to keep.
PyObject* Noop_enter(PyObject* self, PyObject*) {
  Py_INCREF(self);
  return self;
}
PyObject* Noop_exit(PyObject*, PyObject* const*, Py_ssize_t) { Py_RETURN_FALSE; }
// As a decorator it returns the function itself: an untraced process stays untraced.
PyObject* Noop_call(PyObject*, PyObject* args, PyObject* kwargs) {
  if ((kwargs != nullptr && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != 1 ||
      !PyCallable_Check(PyTuple_GET_ITEM(args, 0))) {
    PyErr_SetString(PyExc_TypeError, "spanring: a span decorates one function");
    return nullptr;
  }
  PyObject* f = PyTuple_GET_ITEM(args, 0);
  Py_INCREF(f);
  return f;
}

PyMethodDef noop_methods[] = {
    {"__enter__", Noop_enter, METH_NOARGS, "Does nothing (tracing is disabled)."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Noop_exit)),
     METH_FASTCALL, "Does nothing (tracing is disabled)."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject NoopSpanType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.NoopSpan";
  t.tp_basicsize = sizeof(PyObject);
  t.tp_call = Noop_call;
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "The span of a process that is not traced: enter and exit do nothing.";
  t.tp_methods = noop_methods;
  return t;
}();

// Producer.span(name, **attrs)
PyObject* Producer_span(ProducerObject* self, PyObject* const* args, size_t nargsf,
                        PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError,
                 "spanring: span() takes a name and keyword attributes (%zd positional given)",
                 nargs);
    return nullptr;
  }
  PyObject* name = args[0];
  if (check_name(name) < 0) return nullptr;
  const Py_ssize_t nattrs = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nattrs != 0 && check_attrs(args + 1, kwnames) < 0) return nullptr;
  if (!spanring::enabled()) {
    Py_INCREF(&g_noop_span);
    return &g_noop_span;
  }
  SpanObject* s = g_free_spans;
  if (s != nullptr) {
    g_free_spans = reinterpret_cast<SpanObject*>(s->producer);
    --g_free_count;
    PyObject_Init(reinterpret_cast<PyObject*>(s), &SpanType);
  } else {
    s = PyObject_New(SpanObject, &SpanType);
    if (s == nullptr) return nullptr;
    s->bound[0] = s->bound[1] = nullptr;
  }
  s->values = s->inline_values;
  s->nattrs = 0;
  s->mode = kClosed;
  s->thread = 0;
  Py_INCREF(self);
  s->producer = self;
  Py_INCREF(name);
  s->name = name;
  s->kwnames = nullptr;
  if (nattrs != 0) {
    if (nattrs > kInlineAttrs) {
      s->values = static_cast<PyObject**>(PyMem_Malloc(sizeof(PyObject*) * nattrs));
      if (s->values == nullptr) {
        s->values = s->inline_values;
        Py_DECREF(s);
        return PyErr_NoMemory();
      }
    }
    Py_INCREF(kwnames);
    s->kwnames = kwnames;
    for (Py_ssize_t i = 0; i < nattrs; ++i) {
      Py_INCREF(args[1 + i]);
      s->values[i] = args[1 + i];
    }
    s->nattrs = nattrs;
  }
  return reinterpret_cast<PyObject*>(s);
}

PyObject* Producer_enabled(PyObject*, PyObject*) {
  if (spanring::enabled()) Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

// Makes a producer: a str name, not empty, without a dot, space or `=`; anything else, None
// and non-str included, is a ValueError (simpler.trace's exception for a bad producer name).
PyObject* Producer_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"name", nullptr};
  PyObject* name = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:producer", const_cast<char**>(kwlist), &name))
    return nullptr;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_ValueError, "spanring: a producer name must be a str, not %.100s",
                 Py_TYPE(name)->tp_name);
    return nullptr;
  }
  if (PyUnicode_GET_LENGTH(name) == 0) {
    PyErr_SetString(PyExc_ValueError, "spanring: a producer name must not be empty");
    return nullptr;
  }
  for (const Py_UCS4 bad : {U'.', U' ', U'='}) {
    if (PyUnicode_FindChar(name, bad, 0, PyUnicode_GET_LENGTH(name), 1) >= 0) {
      PyErr_Format(PyExc_ValueError,
                   "spanring: producer name %R holds '%c': span names are ext.<producer>.<name>, "
                   "so a producer name has no dot, space or '='",
                   name, static_cast<int>(bad));
      return nullptr;
    }
  }
  PyObject* keep = nullptr;
  const std::string_view v = utf8(name, &keep);
  ProducerObject* p = reinterpret_cast<ProducerObject*>(type->tp_alloc(type, 0));
  if (p == nullptr) {
    Py_XDECREF(keep);
    return nullptr;
  }
  Py_INCREF(name);
  p->name = name;
  std::string_view parts[] = {"ext.", v, "."};
  uint32_t len = 0;
  for (const std::string_view part : parts) {
    const size_t n = part.size() < kNameBuf - len ? part.size() : kNameBuf - len;
    std::memcpy(p->prefix + len, part.data(), n);
    len += static_cast<uint32_t>(n);
  }
  p->prefix_len = len;
  Py_XDECREF(keep);
  return reinterpret_cast<PyObject*>(p);
}

void Producer_dealloc(ProducerObject* self) {
  for (NameEntry& e : self->names) {
    Py_XDECREF(e.name);
    Py_XDECREF(e.kwnames);
  }
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free(self);
}

PyObject* Producer_repr(ProducerObject* self) {
  return PyUnicode_FromFormat("<spanring producer %R>", self->name);
}

PyObject* Producer_get_name(ProducerObject* self, void*) {
  Py_INCREF(self->name);
  return self->name;
}

// Pickles as its name, so a producer can go to a multiprocessing child.
PyObject* Producer_reduce(ProducerObject* self, PyObject*) {
  return Py_BuildValue("(O(O))", reinterpret_cast<PyObject*>(Py_TYPE(self)), self->name);
}

PyMethodDef producer_methods[] = {
    {"span", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Producer_span)),
     METH_FASTCALL | METH_KEYWORDS,
     "span(name, **attrs): a span named ext.<producer>.<name>, a context manager and a "
     "decorator. attrs: int, float, bool or str values (a str without spaces), identifier keys."},
    {"enabled", Producer_enabled, METH_NOARGS,
     "True when this process is traced (SPANRING_SEGMENT named a live segment at import)."},
    {"__reduce__", reinterpret_cast<PyCFunction>(Producer_reduce), METH_NOARGS,
     "Pickles as Producer(name)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef producer_getset[] = {
    {"name", reinterpret_cast<getter>(Producer_get_name), nullptr, "The producer's name.",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject ProducerType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.Producer";
  t.tp_basicsize = sizeof(ProducerObject);
  t.tp_dealloc = reinterpret_cast<destructor>(Producer_dealloc);
  t.tp_repr = reinterpret_cast<reprfunc>(Producer_repr);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "Producer(name): emits spans named ext.<name>.<span>. ValueError for an empty name "
             "or one holding a dot, space or '='.";
  t.tp_methods = producer_methods;
  t.tp_getset = producer_getset;
  t.tp_new = Producer_new;
  return t;
}();

// ---- Invocation

struct InvocationObject {
  PyObject_HEAD
  uint64_t inv;
  uint64_t hid;
  uint64_t thread;  // thread_serial() of the thread that entered it
  bool entered;
  alignas(spanring::Invocation) unsigned char storage[sizeof(spanring::Invocation)];
};

PyObject* Invocation_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"inv", "hid", nullptr};
  unsigned long long inv = 0, hid = 0;
  // K: an unsigned 64-bit value, no overflow check: negative or too large is refused below.
  PyObject *inv_obj = nullptr, *hid_obj = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|O!:invocation", const_cast<char**>(kwlist),
                                   &PyLong_Type, &inv_obj, &PyLong_Type, &hid_obj))
    return nullptr;
  inv = PyLong_AsUnsignedLongLong(inv_obj);
  if (PyErr_Occurred()) {
    PyErr_SetString(PyExc_ValueError, "spanring: inv must be an int in 0..2**64-1");
    return nullptr;
  }
  if (hid_obj != nullptr) {
    hid = PyLong_AsUnsignedLongLong(hid_obj);
    if (PyErr_Occurred()) {
      PyErr_SetString(PyExc_ValueError, "spanring: hid must be an int in 0..2**64-1");
      return nullptr;
    }
  }
  InvocationObject* self = reinterpret_cast<InvocationObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->inv = inv;
  self->hid = hid;
  self->entered = false;
  return reinterpret_cast<PyObject*>(self);
}

void invocation_end(InvocationObject* self) {
  self->entered = false;
  if (self->thread == thread_serial()) {
    std::launder(reinterpret_cast<spanring::Invocation*>(self->storage))->~Invocation();
    return;
  }
  PyErr_WarnEx(PyExc_RuntimeWarning,
               "spanring: invocation ended on another thread than it began on", 1);
}

void Invocation_dealloc(InvocationObject* self) {
  if (self->entered) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    invocation_end(self);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
  }
  Py_TYPE(self)->tp_free(self);
}

PyObject* Invocation_enter(InvocationObject* self, PyObject*) {
  if (self->entered) {
    PyErr_SetString(PyExc_RuntimeError, "spanring: this invocation is already entered");
    return nullptr;
  }
  self->thread = thread_serial();
  new (self->storage) spanring::Invocation(self->inv, self->hid);
  self->entered = true;
  Py_INCREF(self);
  return reinterpret_cast<PyObject*>(self);
}

PyObject* Invocation_exit(InvocationObject* self, PyObject* const*, Py_ssize_t) {
  if (self->entered) invocation_end(self);
  if (PyErr_Occurred()) return nullptr;
  Py_RETURN_FALSE;
}

PyMethodDef invocation_methods[] = {
    {"__enter__", reinterpret_cast<PyCFunction>(Invocation_enter), METH_NOARGS,
     "Sets inv and hid for the spans this thread begins until __exit__."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Invocation_exit)),
     METH_FASTCALL, "Restores the previous inv and hid."},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject InvocationType = [] {
  PyTypeObject t = new_type();
  t.tp_name = "spanring.invocation";
  t.tp_basicsize = sizeof(InvocationObject);
  t.tp_dealloc = reinterpret_cast<destructor>(Invocation_dealloc);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "invocation(inv, hid=0): a context manager; spans this thread begins inside it carry "
             "inv= and hid= (0..2**64-1). Nestable; thread-local.";
  t.tp_methods = invocation_methods;
  t.tp_new = Invocation_new;
  return t;
}();

// ---- module functions

PyObject* mod_now_ns(PyObject*, PyObject*) { return PyLong_FromLongLong(spanring::now_ns()); }

PyObject* mod_set_decorator(PyObject*, PyObject* f) {
  Py_INCREF(f);
  Py_XSETREF(g_decorate, f);
  Py_RETURN_NONE;
}

PyObject* mod_set_by_id(PyObject*, PyObject* flag) {
  const int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  g_by_id = on != 0;
  Py_RETURN_NONE;
}

PyObject* mod_path_counts(PyObject*, PyObject*) {
  return Py_BuildValue("{sKsKsK}", "by_span", g_count_by_span, "by_id", g_count_by_id,
                       "by_id_text", g_count_by_id_text);
}

PyMethodDef module_methods[] = {
    {"now_ns", mod_now_ns, METH_NOARGS,
     "now_ns() -> int: CLOCK_MONOTONIC in ns, the clock of every span's ts."},
    {"_set_by_id", mod_set_by_id, METH_O,
     "Internal, for tests: False records every span through the Span path (no ids)."},
    {"_path_counts", mod_path_counts, METH_NOARGS,
     "Internal, for tests: spans this process recorded by Span, by id, and by id ended as text."},
    {"_set_decorator", mod_set_decorator, METH_O, "Internal: the span decorator's builder."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "spanring._spanring",
                          "The C half of the spanring package (see spanring).", -1,
                          module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__spanring(void) {
  for (PyTypeObject* t : {&SpanType, &NoopSpanType, &ProducerType, &InvocationType, &BoundType,
                          &SpanMethodType})
    if (PyType_Ready(t) < 0) return nullptr;
  if (install_span_methods() < 0) return nullptr;
  // The one NoopSpan: a static object, never freed (its refcount starts at 1 and only rises and
  // falls around it).
  Py_SET_REFCNT(&g_noop_span, 1);
  Py_SET_TYPE(&g_noop_span, &NoopSpanType);
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) return nullptr;
  g_current_thread = PyObject_GetAttrString(threading, "current_thread");
  Py_DECREF(threading);
  if (g_current_thread == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  Py_INCREF(&g_noop_span);
  if (PyModule_AddObjectRef(m, "Producer", reinterpret_cast<PyObject*>(&ProducerType)) < 0 ||
      PyModule_AddObjectRef(m, "Span", reinterpret_cast<PyObject*>(&SpanType)) < 0 ||
      PyModule_AddObjectRef(m, "NoopSpan", reinterpret_cast<PyObject*>(&NoopSpanType)) < 0 ||
      PyModule_AddObjectRef(m, "invocation", reinterpret_cast<PyObject*>(&InvocationType)) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
