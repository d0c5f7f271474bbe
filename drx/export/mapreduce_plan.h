#pragma once
// A MapReduce form on disk, the plan: one drx program file per part,
// stageN.<part>.drx, the names of each part's inputs and outputs one per line
// beside it (stageN.<part>.inputs, .outputs: what a shell script needs to
// build a `drx run` command line), and plan.json, the whole form: stages,
// parts, broadcasts, client data and state, aggregations and the type of
// every named value. `drx split` writes it, `drx aggregate` and the MapReduce
// driver read it; so can any program, without the drx tool.
//
// plan.json carries "schema": kMapReducePlanSchema. Schema 1 is the plan of
// drx before named inputs and outputs: it has no "schema" field (its
// "format" is "drx-mapreduce-plan-1") and is read as schema 1. Schema 2 plans
// may name values with paths such as "params/dense0/w" (see
// mapreduce_form.h): a value's file is NAME.npy, so a '/' in NAME is a
// subfolder, which whoever writes the value creates. A reader of either
// schema gets the same MapReduceForm.
#include <string>

#include "drx/export/mapreduce_form.h"

namespace drx {

// The schema write_mapreduce_plan writes; read_mapreduce_plan reads 1 and 2.
inline constexpr int kMapReducePlanSchema = 2;

struct MapReducePlanOptions {
  // Each client work also as StableHLO, stageN.client_work.mlir.
  bool stablehlo = false;
  // Names the caller in errors ("split: cannot write ...").
  std::string op = "write_mapreduce_plan";
};

// Writes the form's files into `dir` (created if missing), each atomically
// (a reader sees a whole file or none).
void write_mapreduce_plan(const MapReduceForm& form, const std::string& dir,
                          const MapReducePlanOptions& options = {});

// Reads plan.json at `plan_path` and the part files it names (beside it).
// drx::Error "<op>: '<path>': ..." for a missing or malformed file, or a
// schema other than 1 and 2 (naming the schema found and those supported).
MapReduceForm read_mapreduce_plan(const std::string& plan_path,
                                  const std::string& op = "read_mapreduce_plan");

}  // namespace drx
