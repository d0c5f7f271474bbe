#pragma once
// A MapReduce form on disk (drx split writes it, drx aggregate reads it): one
// drx program file per part, stageN.<part>.drx, the names of each part's
// inputs and outputs one per line beside it (stageN.<part>.inputs,
// .outputs: what a shell script needs to build a `drx run` command line), and
// plan.json, the whole form: stages, parts, broadcasts, client data and
// state, aggregations and the type of every named value.
#include <string>

#include "drx/export/mapreduce_form.h"

namespace drx::tool {

// Writes the form's files into `dir` (created if missing), each atomically;
// with `stablehlo`, each client work also as stageN.client_work.mlir.
void write_mapreduce_plan(const MapReduceForm& form, const std::string& dir, bool stablehlo);

// Reads plan.json and the part files it names (beside it). drx::Error
// "<cmd>: '<path>': ..." for a missing or malformed file.
MapReduceForm read_mapreduce_plan(const std::string& plan_path, const char* cmd);

}  // namespace drx::tool
