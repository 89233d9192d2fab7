#!/usr/bin/env bash
# The install tests (suite `install`, tests/install/meson.build): what `meson install` gives a
# consumer, checked with the real tools a consumer uses. Each test installs this build into its
# own temporary directory (`meson install --destdir D --no-rebuild`; spanring.pc and
# spanringConfig.cmake are relocatable, so D/<prefix> works as a prefix of its own), then uses
# that prefix ONLY: no include directory, library or program of the build tree.
#
#   check_install.sh layout            the installed files are exactly the consumer's set; the
#                                      soname; the installed `spanring` starts with no env
#   check_install.sh header NAME       include/spanring/NAME compiles alone, -Wall -Wextra -Werror -Wconversion (g++, clang++)
#                                      -pedantic, in C++17 and C++20 (spanring.h also in C99)
#   check_install.sh pkgconfig_c       a C99 program: cc app.c $(pkg-config --cflags --libs spanring)
#   check_install.sh pkgconfig_cxx_clang  the C++ app (cxx/app.cpp) built with clang++ (C++17 and C++20,
#                                      -O0 and -O2) against the installed shared library; skip without clang++
#   check_install.sh pkgconfig_static_c  the same linked with libspanring.a (pkg-config --static)
#   check_install.sh cmake_cxx17       a C++17 program: CMake find_package(spanring CONFIG),
#                                      spanring::spanring and spanring::spanring_static
#   check_install.sh meson             a C++17 Meson project: dependency('spanring') (spanring.pc)
#   check_install.sh meson_subproject  the same with spanring as its subproject
#                                      (meson.override_dependency); the prefix gives `spanring`
#   check_install.sh adapter_pkgconfig_c  a C99 runtime using the host-span seam (c/runtime.c):
#                                      cc runtime.c $(pkg-config --cflags --libs spanring-simpler)
#   check_install.sh adapter_cmake_c   the same with CMake: spanring::spanring_simpler
#   check_install.sh adapter_uninstalled_pkgconfig_c  the same runtime against the build tree,
#                                      nothing installed: PKG_CONFIG_PATH=BUILD/meson-uninstalled
#                                      (spanring-simpler-uninstalled.pc), the build's `spanring run`
#
# Every program is run under the installed `spanring run`, and its spans must be in the trace.
#
# Environment (set by tests/install/meson.build): SPANRING_BUILD_DIR, SPANRING_SOURCE_DIR,
# SPANRING_PREFIX, SPANRING_BINDIR, SPANRING_LIBDIR, SPANRING_INCLUDEDIR (as configured),
# SPANRING_VERSION, SPANRING_SOVERSION, SPANRING_CMAKE_PACKAGE (1 when the CMake package was
# generated), SPANRING_CMAKEDIR (where it was installed), SPANRING_SANITIZE (b_sanitize), MESON,
# CC, CXX (the build's compilers).
#
# Under a sanitizer build (b_sanitize) libspanring and the installed `spanring` are sanitized; a
# program that loads a sanitized library must be built with the same -fsanitize (the ASan
# runtime has to come first), so every consumer here is built with it too.
#
# Exit 77 (skip) only when a tool a test needs is missing (cmake, pkg-config).
# SPANRING_KEEP_TMP=1 keeps the temporary directory.
set -euo pipefail

mode=${1:?usage: check_install.sh MODE [ARG]}
for v in SPANRING_BUILD_DIR SPANRING_SOURCE_DIR SPANRING_PREFIX SPANRING_BINDIR SPANRING_LIBDIR \
         SPANRING_INCLUDEDIR SPANRING_VERSION SPANRING_SOVERSION SPANRING_CMAKE_PACKAGE \
         SPANRING_SANITIZE MESON CC CXX; do
  if [ -z "${!v+x}" ]; then
    echo "check_install.sh: $v is not set (run through meson test)" >&2
    exit 1
  fi
done
here=$SPANRING_SOURCE_DIR/tests/install

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
# Prints a command, then runs it (so a failure's log shows what was run).
run() {
  echo "+ $*"
  "$@"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/spanring-install-$mode-XXXXXX")
cleanup() {
  if [ "${SPANRING_KEEP_TMP:-0}" = 1 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

# Absolute paths below the destdir. A relative libdir/includedir is relative to the prefix.
abs() { case $1 in /*) echo "$1" ;; *) echo "$SPANRING_PREFIX/$1" ;; esac; }
dest=$tmp/dest
prefix=$dest$SPANRING_PREFIX
bindir=$dest$(abs "$SPANRING_BINDIR")
libdir=$dest$(abs "$SPANRING_LIBDIR")
includedir=$dest$(abs "$SPANRING_INCLUDEDIR")
spanring=$bindir/spanring

# -fsanitize for consumers of a sanitized build (see the top of this file).
san_flags=()
meson_san_opts=()
if [ "$SPANRING_SANITIZE" != none ] && [ -n "$SPANRING_SANITIZE" ]; then
  san_flags=("-fsanitize=$SPANRING_SANITIZE")
  meson_san_opts=("-Db_sanitize=$SPANRING_SANITIZE" -Db_lundef=false)
fi
read -r -a cc <<<"$CC"
read -r -a cxx <<<"$CXX"
# The compiler itself, without a ccache launcher in front, for CMake and Meson consumers.
cxx_compiler=("${cxx[@]}")
[ "$(basename "${cxx_compiler[0]}")" = ccache ] && cxx_compiler=("${cxx_compiler[@]:1}")
warn_flags=(-Wall -Wextra -Werror -pedantic)
# A program's own warnings apply to the headers it includes (pkg-config's -I is not -isystem):
# each header alone must also compile with the conversion and shadowing warnings projects turn on.
header_warn_flags=("${warn_flags[@]}" -Wconversion -Wsign-conversion -Wshadow)

install_into_tmp() {
  # --no-rebuild: meson test has built everything; --quiet keeps the log to what matters.
  run "$MESON" install -C "$SPANRING_BUILD_DIR" --destdir "$dest" --no-rebuild --quiet \
    || fail "meson install --destdir $dest"
  [ -x "$spanring" ] || fail "no installed spanring at $spanring"
}

# Runs PROGRAM [ARGS] under the installed `spanring run` with a clean environment (no
# LD_LIBRARY_PATH, nothing from the build), writing the trace to $tmp/LABEL.strace; then checks
# that for each FIELDS given after `--expect` (consecutive [STRACE] fields ending with the span's
# name, e.g. "depth=1 name=ext.a.b") a span line holds them, and ATTRS after them when given.
# Usage:
#   trace_run LABEL PROGRAM [ARGS...] --expect FIELDS... [--attr ATTRS]
trace_run() {
  local label=$1
  shift
  local cmd=()
  while [ $# -gt 0 ] && [ "$1" != --expect ]; do
    cmd+=("$1")
    shift
  done
  shift
  local fields=() attr=
  while [ $# -gt 0 ]; do
    if [ "$1" = --attr ]; then
      attr=$2
      shift 2
    else
      fields+=("$1")
      shift
    fi
  done
  local trace=$tmp/$label.strace
  # env -i: the program and spanring find their libraries on their own (rpath, runpath or the
  # standard directories), not through anything this shell has set. PATH for `spanring run`
  # to find nothing else; ASAN/UBSAN_OPTIONS pass through for sanitizer builds.
  local keep=(PATH=/usr/bin:/bin)
  [ -n "${ASAN_OPTIONS:-}" ] && keep+=("ASAN_OPTIONS=$ASAN_OPTIONS")
  [ -n "${UBSAN_OPTIONS:-}" ] && keep+=("UBSAN_OPTIONS=$UBSAN_OPTIONS")
  run env -i "${keep[@]}" "$spanring" run -o "$trace" -- "${cmd[@]}" \
    || fail "$label: spanring run -- ${cmd[*]} exited $?"
  local f line
  for f in "${fields[@]}"; do
    line=$(grep -F "[STRACE] " "$trace" | grep -F " $f " || true)
    if [ -z "$line" ]; then
      echo "--- $trace:" >&2
      cat "$trace" >&2
      fail "$label: no span with '$f' in the trace"
    fi
    if [ -n "$attr" ] && ! grep -qE " dur=[0-9]+ $attr( |\$)" <<<"$line"; then
      echo "--- $trace:" >&2
      cat "$trace" >&2
      fail "$label: the span with '$f' does not have the attributes '$attr'"
    fi
    echo "trace has: $line"
  done
}

# PROGRAM must load libspanring.so.SOVERSION from DIR (default: the prefix in $tmp), not from the
# build tree or a system-wide install.
check_loads_lib() {
  local program=$1 dir=${2:-$libdir} want got
  want=$(realpath "$dir/libspanring.so.$SPANRING_SOVERSION")
  got=$(env -i PATH=/usr/bin:/bin ldd "$program" | awk '$1 == "libspanring.so.'"$SPANRING_SOVERSION"'" { print $3 }')
  [ -n "$got" ] || fail "$program does not need libspanring.so.$SPANRING_SOVERSION (ldd: $(ldd "$program"))"
  [ "$(realpath "$got")" = "$want" ] || fail "$program loads $got, not $want"
  echo "$program loads $got"
}

# PROGRAM must not need libspanring.so at all (linked with libspanring.a).
check_static() {
  if readelf -d "$1" | grep -q 'NEEDED.*libspanring'; then
    fail "$1 needs libspanring.so, but was linked with libspanring.a"
  fi
}

# What cxx/app.cpp emits: two nested Spans and an emit inside the outer one, all under
# Invocation{42, 0x9f3c}; every one starts its attributes with built_with=<how it was built>.
cxx_spans=("inv=42 hid=9f3c depth=0 name=ext.install_cxx.outer"
           "inv=42 hid=9f3c depth=1 name=ext.install_cxx.inner"
           "inv=42 hid=9f3c depth=1 name=ext.install_cxx.emitted")

case $mode in
layout)
  install_into_tmp
  expected=(
    "$bindir/spanring"
    "$includedir/spanring/encode.h" "$includedir/spanring/error.h"
    "$includedir/spanring/packed_attrs.h" "$includedir/spanring/segment.h"
    "$includedir/spanring/segment_layout.h" "$includedir/spanring/segment_view.h"
    "$includedir/spanring/span.h" "$includedir/spanring/spanring.h"
    "$includedir/spanring/ring_writer.h" "$includedir/spanring/thread_state.h"
    "$libdir/libspanring.so" "$libdir/libspanring.so.$SPANRING_SOVERSION"
    "$libdir/libspanring.so.$SPANRING_VERSION" "$libdir/libspanring.a"
    "$libdir/pkgconfig/spanring.pc"
    "$includedir/spanring/simpler_host_span.h"
    "$libdir/libspanring-simpler.so" "$libdir/libspanring-simpler.so.$SPANRING_SOVERSION"
    "$libdir/libspanring-simpler.so.$SPANRING_VERSION" "$libdir/pkgconfig/spanring-simpler.pc"
  )
  if [ "$SPANRING_CMAKE_PACKAGE" = 1 ]; then
    cmakedir=$dest$(abs "${SPANRING_CMAKEDIR:?SPANRING_CMAKEDIR is not set}")
    expected+=("$cmakedir/spanringConfig.cmake" "$cmakedir/spanringConfigVersion.cmake")
  fi
  # The bash completion, and the man page when scdoc built it (docs/meson.build).
  expected+=("$dest$(abs "$SPANRING_DATADIR")/bash-completion/completions/spanring")
  if [ "${SPANRING_MAN_PAGE:-0}" = 1 ]; then
    expected+=("$dest$(abs "$SPANRING_MANDIR")/man1/spanring.1")
  fi
  if [ -n "${SPANRING_PYTHON_DIR:-}" ]; then
    # The Python package: its pure-Python part and the one extension module (its file name
    # carries the interpreter's ABI tag, e.g. _spanring.cpython-311-x86_64-linux-gnu.so).
    pydir=$dest$(abs "${SPANRING_PYTHON_DIR%/}")/spanring
    expected+=("$pydir/__init__.py")
    ext=("$pydir"/_spanring*.so)
    [ ${#ext[@]} = 1 ] && [ -f "${ext[0]}" ] || fail "no single _spanring extension in $pydir"
    expected+=("${ext[0]}")
  fi
  printf '%s\n' "${expected[@]}" | sort >"$tmp/expected"
  find "$dest" \( -type f -o -type l \) | sort >"$tmp/installed"
  if ! diff -u "$tmp/expected" "$tmp/installed"; then
    fail "the installed files (+) differ from the consumer's set (-)"
  fi
  echo "installed: $(wc -l <"$tmp/installed") files, the expected set"

  # Every <spanring/...> an installed header includes is installed too.
  for h in "$includedir"/spanring/*.h; do
    # shellcheck disable=SC2013 # header names hold no spaces
    for inc in $(sed -n 's/^#include <spanring\/\([^>]*\)>.*/\1/p' "$h"); do
      [ -f "$includedir/spanring/$inc" ] || fail "$(basename "$h") includes spanring/$inc, which is not installed"
    done
  done

  soname=$(readelf -d "$libdir/libspanring.so.$SPANRING_VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libspanring.so.$SPANRING_SOVERSION" ] \
    || fail "libspanring.so.$SPANRING_VERSION has soname '$soname', want libspanring.so.$SPANRING_SOVERSION"
  [ "$(readlink "$libdir/libspanring.so")" = "libspanring.so.$SPANRING_SOVERSION" ] \
    || fail "libspanring.so links to $(readlink "$libdir/libspanring.so")"
  echo "soname: $soname"

  # Nothing installed may point into the build tree (Meson strips its build rpath on install).
  for f in "$spanring" "$libdir/libspanring.so.$SPANRING_VERSION"; do
    if readelf -d "$f" | grep -E '(RPATH|RUNPATH)' | grep -qF "$SPANRING_BUILD_DIR"; then
      fail "$f keeps an rpath into the build tree: $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')"
    fi
  done
  if env -i PATH=/usr/bin:/bin ldd "$spanring" | grep -q 'not found'; then
    fail "the installed spanring cannot find a library: $(ldd "$spanring")"
  fi
  run env -i PATH=/usr/bin:/bin "$spanring" --help >"$tmp/help" || fail "installed spanring --help"
  grep -q 'run' "$tmp/help" || fail "installed spanring --help does not list run"
  echo "the installed spanring starts with an empty environment"
  ;;

header)
  name=${2:?usage: check_install.sh header NAME}
  install_into_tmp
  [ -f "$includedir/spanring/$name" ] || fail "spanring/$name is not installed"
  # Only the prefix's include directory; nothing of the source tree.
  printf '#include <spanring/%s>\n' "$name" >"$tmp/alone.cpp"
  for std in c++17 c++20; do
    run "${cxx[@]}" "-std=$std" "${header_warn_flags[@]}" -I"$includedir" -c "$tmp/alone.cpp" \
      -o "$tmp/alone-$std.o" || fail "spanring/$name does not compile alone in $std"
  done
  # clang's -Wconversion covers what GCC's does not (sign changes in shifts of promoted bytes).
  if command -v clang++ >/dev/null; then
    run clang++ -std=c++17 "${header_warn_flags[@]}" -I"$includedir" -c "$tmp/alone.cpp" \
      -o "$tmp/alone-clang.o" || fail "spanring/$name does not compile alone with clang++"
  fi
  if [ "$name" = spanring.h ] || [ "$name" = simpler_host_span.h ]; then
    printf '#include <spanring/%s>\n' "$name" >"$tmp/alone.c"
    run "${cc[@]}" -std=c99 "${header_warn_flags[@]}" -I"$includedir" -c "$tmp/alone.c" \
      -o "$tmp/alone-c99.o" || fail "spanring/$name does not compile alone in C99"
  fi
  echo "spanring/$name compiles alone"
  ;;

pkgconfig_c | pkgconfig_static_c)
  command -v pkg-config >/dev/null || skip "pkg-config is not installed (apt-get install pkg-config)"
  install_into_tmp
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  run pkg-config --modversion spanring
  [ "$(pkg-config --modversion spanring)" = "$SPANRING_VERSION" ] || fail "spanring.pc has the wrong version"
  # shellcheck disable=SC2207 # pkg-config's output is a list of words
  cflags=($(pkg-config --cflags spanring))
  lib_path=$(pkg-config --variable=libdir spanring)
  if [ "$mode" = pkgconfig_c ]; then
    # shellcheck disable=SC2207
    libs=($(pkg-config --libs spanring))
    # -rpath: the prefix is not one the dynamic loader searches (README, "Use spanring").
    run "${cc[@]}" -std=c99 "${warn_flags[@]}" "${san_flags[@]}" "${cflags[@]}" "$here/c/app.c" \
      -o "$tmp/app" "${libs[@]}" "-Wl,-rpath,$lib_path" || fail "cc with pkg-config's flags"
    check_loads_lib "$tmp/app"
  else
    # --static gives what libspanring.a needs (the C++ runtime, threads); -l:libspanring.a picks
    # the archive where -lspanring would pick the shared library beside it.
    # shellcheck disable=SC2207
    libs=($(pkg-config --static --libs spanring | sed 's/-lspanring\b/-l:libspanring.a/'))
    run "${cc[@]}" -std=c99 "${warn_flags[@]}" "${san_flags[@]}" "${cflags[@]}" "$here/c/app.c" \
      -o "$tmp/app" "${libs[@]}" || fail "cc with pkg-config --static's flags"
    check_static "$tmp/app"
  fi
  trace_run c "$tmp/app" --expect "inv=7 hid=c0de depth=0 name=ext.install_c.step" --attr "lang=c batch=16"
  ;;

adapter_pkgconfig_c)
  command -v pkg-config >/dev/null || skip "pkg-config is not installed (apt-get install pkg-config)"
  install_into_tmp
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  [ "$(pkg-config --modversion spanring-simpler)" = "$SPANRING_VERSION" ] \
    || fail "spanring-simpler.pc has the wrong version"
  # shellcheck disable=SC2207 # pkg-config's output is a list of words
  cflags=($(pkg-config --cflags spanring-simpler))
  # shellcheck disable=SC2207
  libs=($(pkg-config --libs spanring-simpler))
  run "${cc[@]}" -std=c99 "${warn_flags[@]}" "${san_flags[@]}" "${cflags[@]}" "$here/c/runtime.c" \
    -o "$tmp/runtime" "${libs[@]}" "-Wl,-rpath,$(pkg-config --variable=libdir spanring-simpler)" \
    || fail "cc with pkg-config spanring-simpler's flags"
  trace_run adapter "$tmp/runtime" --expect "inv=11 hid=5eed depth=1 name=chip.run.bind" \
    --attr "run_id=3 task_slot=5"
  ;;

adapter_uninstalled_pkgconfig_c)
  command -v pkg-config >/dev/null || skip "pkg-config is not installed (apt-get install pkg-config)"
  uninstalled=$SPANRING_BUILD_DIR/meson-uninstalled
  [ -f "$uninstalled/spanring-simpler-uninstalled.pc" ] \
    || fail "no $uninstalled/spanring-simpler-uninstalled.pc"
  # pkg-config prefers NAME-uninstalled.pc when it is on the path.
  export PKG_CONFIG_PATH=$uninstalled
  # shellcheck disable=SC2207 # pkg-config's output is a list of words
  cflags=($(pkg-config --cflags spanring-simpler))
  # shellcheck disable=SC2207
  libs=($(pkg-config --libs spanring-simpler))
  run "${cc[@]}" -std=c99 "${warn_flags[@]}" "${san_flags[@]}" "${cflags[@]}" "$here/c/runtime.c" \
    -o "$tmp/runtime" "${libs[@]}" "-Wl,-rpath,$SPANRING_BUILD_DIR/adapter" \
    || fail "cc with the build tree's spanring-simpler-uninstalled.pc flags"
  spanring=$SPANRING_BUILD_DIR/cli/spanring
  trace_run adapter "$tmp/runtime" --expect "inv=11 hid=5eed depth=1 name=chip.run.bind" \
    --attr "run_id=3 task_slot=5"
  ;;

adapter_cmake_c)
  command -v cmake >/dev/null || skip "cmake is not installed (apt-get install cmake)"
  [ "$SPANRING_CMAKE_PACKAGE" = 1 ] || fail "cmake is installed but this build made no CMake package"
  install_into_tmp
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cc_compiler=("${cc[@]}")
  [ "$(basename "${cc_compiler[0]}")" = ccache ] && cc_compiler=("${cc_compiler[@]:1}")
  run cmake -S "$here/c" -B "$tmp/cmake-build" "${generator[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_COMPILER="${cc_compiler[0]}" -DCMAKE_C_FLAGS="${cc_compiler[*]:1} ${san_flags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${san_flags[*]}" \
    || fail "cmake configure with find_package(spanring CONFIG), spanring::spanring_simpler"
  run cmake --build "$tmp/cmake-build" || fail "cmake --build"
  trace_run adapter_cmake "$tmp/cmake-build/runtime" \
    --expect "inv=11 hid=5eed depth=1 name=chip.run.bind" --attr "run_id=3 task_slot=5"
  ;;

cmake_cxx17)
  command -v cmake >/dev/null || skip "cmake is not installed (apt-get install cmake)"
  [ "$SPANRING_CMAKE_PACKAGE" = 1 ] \
    || fail "cmake is installed but this build made no CMake package (cmake was missing at meson setup: run meson setup --reconfigure)"
  install_into_tmp
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cxx_flags="${san_flags[*]}"
  run cmake -S "$here/cxx" -B "$tmp/cmake-build" "${generator[@]}" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_CXX_COMPILER="${cxx_compiler[0]}" -DCMAKE_CXX_FLAGS="${cxx_compiler[*]:1} $cxx_flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$cxx_flags" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    || fail "cmake configure with find_package(spanring CONFIG)"
  run cmake --build "$tmp/cmake-build" || fail "cmake --build"
  check_loads_lib "$tmp/cmake-build/app"
  check_static "$tmp/cmake-build/app_static"
  trace_run cmake "$tmp/cmake-build/app" cmake \
    --expect "${cxx_spans[@]}" --attr "built_with=cmake"
  trace_run cmake_static "$tmp/cmake-build/app_static" cmake_static \
    --expect "${cxx_spans[@]}" --attr "built_with=cmake_static"
  ;;

pkgconfig_cxx_clang)
  # The C++ API from a program built with clang++ (each standard the headers support), linked
  # to the installed shared library: clang gives an extern variable the visibility of its type
  # unless the declaration names one, and the inline record path refers to t_self.
  command -v clang++ >/dev/null || skip "clang++ is not installed (apt-get install clang)"
  command -v pkg-config >/dev/null || skip "pkg-config is not installed (apt-get install pkg-config)"
  [ "$SPANRING_SANITIZE" = none ] \
    || skip "a sanitized libspanring needs its consumer built with the same compiler's runtime"
  install_into_tmp
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  # shellcheck disable=SC2207 # pkg-config's output is a list of words
  cflags=($(pkg-config --cflags spanring))
  # shellcheck disable=SC2207
  libs=($(pkg-config --libs spanring))
  lib_path=$(pkg-config --variable=libdir spanring)
  for std in c++17 c++20; do
    for opt in -O0 -O2; do
      run clang++ "-std=$std" "$opt" "${warn_flags[@]}" "${cflags[@]}" "$here/cxx/app.cpp" \
        -o "$tmp/app-$std$opt" "${libs[@]}" "-Wl,-rpath,$lib_path" \
        || fail "clang++ -std=$std $opt with pkg-config's flags"
    done
  done
  check_loads_lib "$tmp/app-c++17-O2"
  trace_run clang17 "$tmp/app-c++17-O2" clang17 --expect "${cxx_spans[@]}" --attr "built_with=clang17"
  trace_run clang20 "$tmp/app-c++20-O0" clang20 --expect "${cxx_spans[@]}" --attr "built_with=clang20"
  ;;

meson | meson_subproject)
  install_into_tmp
  proj=$tmp/proj
  mkdir -p "$proj"
  cp "$here/cxx/meson.build" "$here/cxx/app.cpp" "$proj/"
  setup_opts=(--buildtype=debugoptimized "${meson_san_opts[@]}")
  if [ "$mode" = meson ]; then
    # From the prefix: spanring.pc on the pkg-config path; no subprojects/ to fall back to.
    setup_opts+=("-Dpkg_config_path=$libdir/pkgconfig" --wrap-mode=nofallback)
    target=app
  else
    # spanring's source tree as the subproject: dependency('spanring') is what its
    # meson.override_dependency gives, never a pkg-config file (--force-fallback-for).
    mkdir -p "$proj/subprojects"
    ln -s "$SPANRING_SOURCE_DIR" "$proj/subprojects/spanring"
    setup_opts+=(--force-fallback-for=spanring)
    target=app
  fi
  # The consumer uses the build's C++ compiler.
  run env CXX="${cxx_compiler[*]}" "$MESON" setup "${setup_opts[@]}" "$proj/build" "$proj" \
    || fail "meson setup of the consumer project"
  if [ "$mode" = meson ]; then
    grep -q "Run-time dependency spanring found: YES" "$proj/build/meson-logs/meson-log.txt" \
      || fail "the consumer did not find spanring through pkg-config"
  fi
  # Only the consumer and what it links (as a subproject: libspanring, not spanring's CLI).
  run ninja -C "$proj/build" "$target" || fail "building the consumer project"
  if [ "$mode" = meson ]; then
    check_loads_lib "$proj/build/app"
  else
    # The subproject's own libspanring (through the build rpath), not the prefix's.
    check_loads_lib "$proj/build/app" "$proj/build/subprojects/spanring/src"
  fi
  trace_run "$mode" "$proj/build/app" "$mode" \
    --expect "${cxx_spans[@]}" --attr "built_with=$mode"
  ;;

*)
  fail "unknown mode $mode"
  ;;
esac
echo "PASS: $mode"
