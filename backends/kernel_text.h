// Reading Kernel IR back from its listing (Kernel::str()), for AOT artifacts. The kernel read is
// validated (Kernel::validate) before it is returned, so a hand-edited listing can never reach a
// backend as an ill-formed kernel.
#pragma once

#include "backends/kernel_ir.h"
#include "graph/text_reader.h"

namespace kiln {

// Reads one kernel starting at the reader's current line ("kernel NAME domain(...)"), leaving the
// reader on the first line after it.
Kernel read_kernel(TextReader& r);

}  // namespace kiln
