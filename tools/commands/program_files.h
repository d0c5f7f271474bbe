#pragma once
// The program files the commands read: drx program text, and StableHLO
// modules (a path ending in .mlir), imported with drx/stablehlo/import.h.
#include <iosfwd>
#include <string>
#include <vector>

#include "drx/drx.h"
#include "drx/stablehlo/import.h"

namespace drx::tool {

// The whole of the file at `path` ('-' reads standard input); drx::Error
// "<cmd>: cannot open program file '<path>'" when it cannot be read.
std::string read_text(const std::string& path, const char* cmd);

// A drx program file, parsed and verified.
Program load_program(const std::string& path, const char* cmd);

// The rule for program files: a path ending in ".mlir" is a StableHLO module.
bool names_mlir_file(const std::string& path);

// A StableHLO module parsed and imported; a parse or import error is a
// drx::Error "<cmd>: '<path>': line N: ...".
stablehlo::ImportedModule load_mlir(const std::string& path, const char* cmd);

// The module's @main alone: m.program with only its first num_results
// outputs (the checks' values and whatever computed only them dropped),
// verified.
Program results_only(const stablehlo::ImportedModule& m);

// Applies m's checks to `outputs`, those of running m.program. Returns "" when
// every check holds, else the first failure:
// "check.expect_close at line 12: element 3 is ..., expected ...".
std::string first_failed_check(const stablehlo::ImportedModule& m,
                               const std::vector<Array>& outputs);

// The text of results_only(m), as `drx import` and `drx check` print it; says
// on `err` what that program leaves out (checks, sharding annotations).
std::string import_text(const stablehlo::ImportedModule& m, const std::string& path,
                        const char* cmd, std::ostream& err);

}  // namespace drx::tool
