// What the layers above ask of the groups by id (a node records its group as Params::group):
// compile's shape rules, the transforms' rules and the artifact reader. Not for users.
#pragma once

#include <string>

#include "backends/backend.h"

namespace kiln::distributed::detail {

int world_group(bool strict, const std::string& backend);
int split_group(int parent, int color, int key);
int group_rank(int id);  // raises kiln::Error for an id no group has in this process
int group_size(int id);
// Raises kiln::Error unless a collective's extents (n in, m out) fit a group of `size` ranks.
void check_extents(const NativeArgs& a, int size);

}  // namespace kiln::distributed::detail
