// Kiln's public API in one include: arrays, ops, dtypes, devices and streams, compile, random,
// .npy I/O and profiling. See README.md for a tour and DESIGN.md for the contract. Backend
// authors include backends/extension.h as well; the library's internals are in neither.
#pragma once

#include "backends/devices.h"
#include "compile/aot.h"
#include "compile/compile.h"
#include "compile/eval.h"
#include "distributed/group.h"
#include "distributed/ops.h"
#include "executor/pending_work.h"
#include "executor/profile.h"
#include "graph/array.h"
#include "graph/device.h"
#include "graph/dtype.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "graph/ops.h"
#include "graph/random.h"
#include "graph/shape.h"
#include "nn/nn.h"
#include "nn/optimizers.h"
#include "scheduler/jobs.h"
#include "transforms/transforms.h"
