#pragma once
// Loops with lax semantics, differentiable to any order: scan, fori_loop and
// while_loop. Each is one equation whose body is a sub-program (traced once,
// never unrolled), compiled once by the executor and run in a loop there.
//
//   auto [carry, ys] = drx::scan(f, init, xs);   // f(carry, x) -> {carry, y}
//   drx::Tree out = drx::fori_loop(0, 10, body, init);  // body(i, carry) -> carry
//   drx::Tree w = drx::while_loop(cond_fn, body_fn, init);
//
// scan's reverse mode saves what the body's backward pass needs from each
// iteration (the residuals); ScanOptions::remat saves only the carries and
// recomputes the rest, and checkpoint_every = k saves one carry per block of k
// iterations and recomputes within the block (a scan of scans).
#include <cstdint>
#include <functional>
#include <utility>

#include "drx/core/value.h"
#include "drx/trace/tree.h"

namespace drx {

struct ScanOptions {
  // Iterations; -1 takes the leading dimension shared by the leaves of xs
  // (required when xs has no leaves).
  int64_t length = -1;
  // Runs from the last x to the first; ys are still stacked in x order.
  bool reverse = false;
  // Reverse mode saves only the carry of each iteration and recomputes the
  // body's forward pass in the backward pass: memory O(length * |carry|).
  bool remat = false;
  // Reverse mode saves one carry per block of this many iterations and
  // recomputes each block's carries, then each iteration's residuals, in the
  // backward pass: about length / k + k carries at once (k near sqrt(length)
  // is least). 0: off. Takes precedence over remat.
  int64_t checkpoint_every = 0;
};

// f(carry, x) -> {new carry, y}. The new carry has the structure and types of
// `init`; x is one slice of xs (leading axis removed); each y leaf is stacked
// along a new leading axis of `length`.
using ScanFn = std::function<std::pair<Tree, Tree>(const Tree& carry, const Tree& x)>;

// Returns {final carry, stacked ys}. Throws drx::Error for xs leaves of
// different leading sizes, a carry whose structure or types change, or placed
// xs or ys (the placement axis must stay leading).
std::pair<Tree, Tree> scan(const ScanFn& f, const Tree& init, const Tree& xs,
                           const ScanOptions& options = {});
std::pair<Tree, Tree> scan(const ScanFn& f, const Tree& init, const Tree& xs, int64_t length);

// body(i, carry) -> carry for i = lo, ..., hi - 1 (i an i32 scalar Value); a
// scan with hi - lo iterations, so it is reverse-differentiable. hi < lo runs
// no iteration.
using ForiBody = std::function<Tree(const Value& i, const Tree& carry)>;
Tree fori_loop(int64_t lo, int64_t hi, const ForiBody& body, const Tree& init,
               const ScanOptions& options = {});

// Runs body while cond_fn(carry) (a bool scalar) holds. Differentiable in
// forward mode; reverse mode throws drx::Error (the trip count is not known
// when tracing: use scan or fori_loop). Under vmap with a batched predicate it
// runs until every lane is done, each lane keeping its own carry.
using LoopCondFn = std::function<Value(const Tree& carry)>;
using LoopBodyFn = std::function<Tree(const Tree& carry)>;
Tree while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn, const Tree& init);

class Primitive;
namespace prims {
// scan. Operands: consts (num_consts), initial carry (num_carry), xs (the rest;
// leading axis `length`). Params: body (inputs consts, carry, one slice of each
// x; outputs new carry, one slice of each y), length, num_consts, num_carry,
// reverse, remat, checkpoint_every. Results: final carry, then each y stacked
// to [length, ...] (in x order, also when reverse).
const Primitive& scan();
// while_loop. Operands: cond consts (num_cond_consts), body consts
// (num_body_consts), initial carry. Params: cond (inputs cond consts, carry;
// output a bool scalar), body (inputs body consts, carry; outputs the carry).
// Results: the final carry.
const Primitive& while_loop();
}  // namespace prims

}  // namespace drx
