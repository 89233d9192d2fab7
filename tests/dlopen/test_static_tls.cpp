// Static TLS: libspanring.so, and a plugin that links libspanring.a and records through the
// public headers, each hold at most 16 bytes of initial-exec TLS (their PT_TLS program header),
// because every library loaded with dlopen shares glibc's small static-TLS surplus.
#include <doctest/doctest.h>

#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

// The PT_TLS header's p_memsz of ELF64 file `path`; 0 when it has none. Fails the test when
// the file cannot be read as a little-endian ELF64 file.
uint64_t tls_memsz(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  Elf64_Ehdr eh;
  REQUIRE(bytes.size() >= sizeof eh);
  std::memcpy(&eh, bytes.data(), sizeof eh);
  REQUIRE(std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0);
  REQUIRE(eh.e_ident[EI_CLASS] == ELFCLASS64);
  REQUIRE(eh.e_phentsize == sizeof(Elf64_Phdr));
  REQUIRE(eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) <= bytes.size());
  uint64_t memsz = 0;
  int tls_headers = 0;
  for (uint32_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_TLS) {
      memsz = ph.p_memsz;
      ++tls_headers;
    }
  }
  CHECK(tls_headers <= 1);
  return memsz;
}

std::string path_from_env(const char* var) {
  const char* p = std::getenv(var);
  REQUIRE_MESSAGE(p != nullptr, var, " is not set (tests/dlopen/meson.build sets it)");
  return p;
}

}  // namespace

TEST_CASE("libspanring.so holds at most 16 bytes of static TLS") {
  const uint64_t n = tls_memsz(path_from_env("LIBSPANRING_SO"));
  MESSAGE("libspanring.so PT_TLS p_memsz = ", n);
  CHECK(n > 0);  // the one pointer (and the vfork flag): a build without it is not this design
  CHECK(n <= 16);
}

TEST_CASE("a plugin linked with libspanring.a holds at most 16 bytes of static TLS") {
  const uint64_t n = tls_memsz(path_from_env("DLOPEN_PLUGIN_STATIC"));
  MESSAGE("static plugin PT_TLS p_memsz = ", n);
  CHECK(n <= 16);
}
