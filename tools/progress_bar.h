// The progress bar of `spanring convert` on stderr: a 30-column bar with percent and MiB read,
// redrawn at most every 200 ms and erased once the input is read.
#pragma once

#include "format/convert_io.h"

#include <cstdint>

namespace spanring {

// Inputs at least this large get a progress bar.
inline constexpr uint64_t kProgressMinBytes = 64u << 20;

// Hooks a progress bar to `in` (TraceInput::on_progress), only when stderr is a terminal and
// the input is a file of at least kProgressMinBytes: smaller ones convert in well under a
// second. The bar is drawn from the reading thread; it never throws.
void show_progress(TraceInput& in);

}  // namespace spanring
