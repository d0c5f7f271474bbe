#pragma once
// Program surgery for the rules of loops: which results depend on which
// inputs, and the split of a program into stages (what a loop computes once,
// what it computes per iteration, what its backward pass computes).
#include <cstdint>
#include <vector>

#include "drx/ir/program.h"

namespace drx {

// For each output of p: whether it depends on an input flagged in `from`
// (conservatively: every result of an equation with a dependent operand is).
std::vector<bool> outputs_depending_on(const Program& p, const std::vector<bool>& from);

// For a loop body whose inputs from `first` on include its carries (carry j is
// input first + j and output j): flags each carry j with can_flag[j] whose
// output depends on a flagged input, until nothing changes, since a carry fed
// by a flagged value (a tangent, a batch) is flagged itself in the next
// iteration. Returns outputs_depending_on(body, flags) at the fixpoint.
std::vector<bool> flag_carries(const Program& body, std::vector<bool>& flags, size_t first,
                               const std::vector<bool>& can_flag);

// p split into programs run one after the other. Each input has a stage; each
// equation runs in the latest stage of its operands (stage 0 if it has none).
// Program s takes p's inputs of stage s (in order), then `imports[s]`: values
// of earlier stages it reads. It returns p's outputs assigned to stage s (in
// order), then `exports[s]`: values it computes that later stages import.
// An output assigned to stage s may be a value of an earlier stage (it is
// then imported). Variables are p's numbering in imports and exports.
struct StageSplit {
  std::vector<Program> programs;
  std::vector<std::vector<int>> imports;
  std::vector<std::vector<int>> exports;
  std::vector<int> stage;  // of each of p's variables
};
StageSplit split_stages(const Program& p, const std::vector<int>& input_stage,
                        const std::vector<int>& output_stage, int stages);

// vmap_program with the batch flags of the outputs given: inputs flagged in
// `in` and outputs flagged in `out` carry the batch (placed ones at axis 1);
// the other outputs must come out unbatched (outputs_depending_on says which
// can).
Program batched_program(const Program& body, const std::vector<bool>& in,
                        const std::vector<bool>& out, int64_t batch_size);

// p with its inputs and outputs reordered: input i of the result is
// p.inputs[inputs[i]], output k is p.outputs[outputs[k]] (outputs may repeat
// or drop; inputs must be a permutation).
Program reordered(Program p, const std::vector<size_t>& inputs, const std::vector<size_t>& outputs);
// p with its inputs from `first` on moved to the front (a traced body's
// captures, which come last, become the loop's leading consts).
Program inputs_rotated(Program p, size_t first);

}  // namespace drx
