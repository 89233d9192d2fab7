#!/usr/bin/env bash
# The adapter library exports exactly the seam's two functions (simpler_host_span.map): no
# C++ symbol, no libstdc++ template instance a runtime could bind to by accident.
#   check_exports.sh LIB
set -euo pipefail
lib=${1:?usage: check_exports.sh LIB}
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
got=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwDdBbRrVviu]$/ { print $3 }' | sed 's/@.*//' | sort)
want=$(printf '%s\n' unified_log_host_span unified_log_host_span_enabled)
if [ "$got" != "$want" ]; then
  echo "FAIL: $lib exports:"
  echo "$got"
  echo "want exactly:"
  echo "$want"
  exit 1
fi
echo "$lib exports exactly: $(echo "$got" | tr '\n' ' ')"
