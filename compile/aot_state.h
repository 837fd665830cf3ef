// What a Lowered and an Executable hold (internal to compile/): the trace cache entry and plan of
// a lowered function, or, for an executable loaded from an artifact, the plan and constants read
// back from the file (no entry, no user function).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compile/trace_cache.h"

namespace kiln {

struct AotState {
  std::shared_ptr<const CompiledFunction::Impl> impl;  // null when loaded from an artifact
  std::shared_ptr<Entry> entry;                        // null when loaded
  std::shared_ptr<ShapePlan> plan;  // the lowering for the example arguments' shapes
  std::vector<Dtype> dtypes;        // of the example arguments
  std::vector<Shape> shapes;
  bool shapeless = false;
  std::string graph;  // the graph section of the text form
};

// The text form (DESIGN.md has its grammar).
std::string lowered_text(const AotState& s);
// The artifact: "kiln artifact 1", the text form, the data the plan needs beyond it, a checksum.
std::string artifact_text(const AotState& s);
// Reads an artifact; `remap` replaces devices named in it (placements and explicit streams).
// Every malformed input raises kiln::Error with line:column. `verify_checksum` is off only for the
// fuzzer, which must reach the parser behind the checksum.
std::shared_ptr<AotState> read_artifact(std::string_view text, const std::string& source,
                                        const std::map<std::string, std::string>& remap,
                                        bool verify_checksum = true);

}  // namespace kiln
