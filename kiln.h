// Kiln's public API in one include. See README.md for a tour and DESIGN.md for the contract.
#pragma once

#include "backends/registry.h"
#include "compile/aot.h"
#include "compile/compile.h"
#include "compile/eval.h"
#include "compile/jobs.h"
#include "graph/array.h"
#include "graph/device.h"
#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "graph/ops.h"
#include "graph/random.h"
#include "graph/shape.h"
#include "scheduler/profile.h"
