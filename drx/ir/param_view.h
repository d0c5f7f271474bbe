#pragma once
// Building blocks of the typed parameter views (ScanParams, WhileParams,
// CondParams, MapFnParams, DotGeneralParams, ...): each view reads an
// equation's Params once, through these, so a missing, mistyped or unknown key
// is a drx::TypeError naming the primitive, the key and what was expected,
// never a silent fallback.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx::param_view {

// The sub-program parameter `key` of `op`: present, a program, not null.
std::shared_ptr<const Program> program(const Params& p, const char* key, const std::string& op);

// A non-negative integer parameter (a count, a length).
int64_t count(const Params& p, const char* key, const std::string& op);

// A flag, stored as the integer 0 or 1 (program text has no booleans).
bool flag(const Params& p, const char* key, const std::string& op);

// Throws unless every key of `p` is one of `keys`: a misspelt key is an error,
// not an ignored extra.
void only_keys(const Params& p, const std::string& op, std::initializer_list<const char*> keys);

// The params of `e`, after checking that it is an equation of `want` (a
// Primitive; a template because this layer sees primitives only by pointer).
template <class Prim>
const Params& params_of(const Eqn& e, const Prim& want) {
  const Prim* actual = e.prim;
  if (actual != &want)
    throw TypeError(want.name() + ": cannot read its parameters from a " +
                    (actual ? actual->name() : std::string("primitive-less")) + " equation");
  return e.params;
}

}  // namespace drx::param_view
