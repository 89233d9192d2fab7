// The progress bar of `spanring convert` on stderr: a 30-column bar with percent and MiB read,
// redrawn at most every 200 ms and erased once the input is read.
#pragma once

#include "format/convert_io.h"

#include <cstdint>

namespace spanring {

// Inputs at least this large get a progress bar.
inline constexpr uint64_t kProgressMinBytes = 64u << 20;

// Hooks a progress bar to `in` (TraceInput::on_progress), only when stderr is a terminal and
// the input is a file of at least `min_bytes` (kProgressMinBytes: smaller ones convert in well
// under a second; `spanring export` passes 0, as sending is slower). The bar is drawn from the
// reading thread; it never throws.
void show_progress(TraceInput& in, uint64_t min_bytes = kProgressMinBytes);

}  // namespace spanring
