#pragma once
// What every training command's summary says of its run (tools/training/run_loop.h fills it).
#include <cstdint>

namespace drx::tool::training {

struct RunOutcome {
  int64_t rounds_done = 0;     // rounds completed, including those before a resume
  bool stopped_early = false;  // --max-seconds ended the run before --rounds
  bool diverged = false;       // stopped at a round that was not finite (exit code 3)
  double seconds = 0;          // wall clock of the run, summed over resumes
  int ranks = 1;               // processes of the run (mpirun -np)
};

}  // namespace drx::tool::training
