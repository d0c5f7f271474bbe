#pragma once
// Arithmetic on whole trees (pytrees of parameters, gradients, optimizer moments), leaf by leaf.
//
// Each function works on two kinds of tree:
//  - Values, inside a trace (jit, program, map_fn bodies, loop bodies): the result is traced
//    with the public ops. An Array leaf mixed into such a tree becomes a constant.
//  - Arrays only, on the host (finite differences, diagnostics, checkpoints): plain loops.
// Trees combined leaf by leaf must have one structure, and matching leaves one dtype and
// shape; otherwise drx::Error names the function, both structures or the leaf (by its path,
// e.g. ["layer0"]["w"]) and both types.
#include <cstdint>
#include <string>

#include "drx/trace/tree.h"

namespace drx {

// The tree with every Array leaf made a constant of the current trace (Value leaves stay).
Tree tree_values(const Tree& t);

Tree tree_add(const Tree& a, const Tree& b);  // a + b
Tree tree_sub(const Tree& a, const Tree& b);  // a - b
// s * t; floating-point leaves only.
Tree tree_scale(const Tree& t, double s);
// a * x + y; floating-point leaves only.
Tree tree_axpy(double a, const Tree& x, const Tree& y);

// Leaves of t's dtypes and shapes (placements too) filled with 0, 1 or `value`.
Tree tree_zeros_like(const Tree& t);
Tree tree_ones_like(const Tree& t);
Tree tree_full_like(const Tree& t, double value);

// The sum over leaves of sum(a * b), as a scalar leaf: a Value of the leaves' (common) dtype
// inside a trace, an f64 Array accumulated in double on the host. Throws for trees without
// leaves (there is no dtype to give the 0).
Tree tree_vdot(const Tree& a, const Tree& b);
// sqrt(tree_vdot(t, t)): the global L2 norm (floating-point leaves only).
Tree tree_l2_norm(const Tree& t);
// The total number of elements over all leaves.
int64_t tree_size(const Tree& t);

// A leaf's type, whether it holds a Value or an Array ("f32[2,3]@clients").
std::string leaf_type_str(const Tree& leaf);
DType leaf_dtype(const Tree& leaf);
const Shape& leaf_shape(const Tree& leaf);
std::string leaf_placement(const Tree& leaf);  // "" for an Array

}  // namespace drx
