#pragma once
// Where a compiled program's time goes, per equation. With the environment variable
// DRX_PROFILE=PATH (or after exec::profile::enable(PATH)), every kernel that compiled
// programs run is timed and its time added to its equation's line (primitive, parameters,
// result type; the label is fixed when the program is compiled); at exit, or on write(),
// PATH gets the totals per kernel kind, per primitive and per equation, largest first. Equations
// that run sub-programs (map_fn, scan, while, cond) are not timed themselves: their bodies'
// equations are. Timing costs a clock read per kernel; when profiling is off it costs one branch.
#include <string>

namespace drx::exec::profile {

// Whether kernels are being timed (decided once, from DRX_PROFILE, unless enable() is called
// before any program is compiled).
bool enabled();
// Starts timing into `path` (replacing an earlier path). Programs compiled before this
// carry no labels and are not timed.
void enable(const std::string& path);
// Stops timing (the totals are kept until reset()); programs compiled while on keep their labels.
void disable();
// Adds one run of an equation, whose kernel is of `kind` ("gemm", "elementwise", "reduction",
// "copy", "interpreted", "other": a product fused with its bias or transpose counts as a gemm,
// whatever its equation's primitive).
void record(const std::string& label, const char* kind, double seconds);
// Writes the report now (atomically: PATH.tmp, then renamed); throws drx::Error when the file
// cannot be written. Also runs at exit, where a failure is reported on stderr.
void write();
// Forgets the totals so far.
void reset();

}  // namespace drx::exec::profile
