#pragma once
// drx: differentiable MapReduce programs in C++. One header brings everything.
#include "drx/array/array.h"
#include "drx/array/dtype.h"
#include "drx/array/error.h"
#include "drx/ir/program.h"
#include "drx/ir/type.h"
#include "drx/ops/ops.h"
#include "drx/trace/function.h"
#include "drx/trace/jit.h"
#include "drx/trace/tree.h"
#include "drx/trace/value.h"
#include "drx/transforms/simplify.h"
