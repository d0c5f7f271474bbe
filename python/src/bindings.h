#pragma once
// Shared pieces of the `_drx` extension module: how Python objects become drx leaves and
// how a Python callable becomes a drx::TreeFn.
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "drx/drx.h"

namespace drx::python {

namespace py = pybind11;

void bind_arrays(py::module_& m);
void bind_values(py::module_& m);
void bind_transforms(py::module_& m);
void bind_flatten(py::module_& m);
void bind_random(py::module_& m);
void bind_privacy(py::module_& m);
void bind_optim(py::module_& m);
void bind_nn(py::module_& m);
void bind_export(py::module_& m);
// drx::Mesh as `_drx.Mesh`, and drx.dist's World and rows over MPI (python/src/dist.cpp; built
// without MPI, `_drx.dist_init` raises drx.Error saying so).
void bind_dist(py::module_& m);

// A mesh as Python passes one (a binding including pybind11/stl.h reads it): drx.Mesh's axes as
// (axis, size) pairs, or a `_drx.Mesh` (one spanning processes, from drx.dist).
using MeshArg = std::variant<std::vector<std::pair<std::string, int>>, Mesh>;
Mesh mesh_from_arg(const MeshArg& mesh);

// A NumPy array (or anything with the buffer protocol) as a drx::Array: copied, or (copy =
// false) viewing the array's memory when it is C-contiguous, native-endian and aligned,
// keeping the Python object alive.
Array array_from_buffer(const py::buffer& b, bool copy);
// `a`, or a copy of it when its memory lies in one of `inputs` (a result that is an argument
// viewed in place must not be handed back as that argument's memory).
Array copy_unless_owned(const Array& a, const std::vector<Array>& inputs);
// A drx::Array as a read-only NumPy array sharing its memory (kept alive by the array).
py::object array_to_numpy(const Array& a);

// A leaf as Python sees it (a Value or an Array), and back: anything else is a drx::Error
// naming `what`.
py::object leaf_to_py(const Tree& leaf);
Tree py_to_leaf(py::handle h, const char* what);
// Nested Python dicts (string keys), lists and tuples (None: an empty list) of Values and
// Arrays as a Tree; anything else is a drx::Error naming `what` and where (`path`).
Tree nested_to_tree(py::handle h, const std::string& what, const std::string& path = "");
// A Tree as nested dicts and lists: Values as Values, Arrays as read-only NumPy arrays or (with
// arrays_as_numpy false) as Array objects.
py::object tree_to_nested(const Tree& t, bool arrays_as_numpy);
// `t` with every Array leaf whose memory lies in one of `inputs`' Arrays copied: a result must
// not be the caller's NumPy memory (arguments from NumPy are views of it).
Tree unalias(const Tree& t, const Tree& inputs);

// A function crossing the boundary: a TreeFn, callable from Python (`_drx.Fn`).
struct Fn {
  TreeFn fn;
  py::object call(py::object args) const;
};

// A Tree that is a list of leaves, as a Python list, and back.
py::list leaves_to_py(const Tree& list);
Tree py_to_leaves(py::handle seq, const char* what);

// The docstring of the public op `name` ("exp", "nn::relu"): its C++ signature and one-line doc
// from the public-op table (drx/ops/op_table.h), or "" when the table has no such op.
std::string op_doc(const char* name);

// drx.Error, the Python type of drx::Error (set when the module is made).
extern PyObject* drx_error_type;

// A Python callable over lists of leaves as a TreeFn: each argument of the TreeFn is a list of
// leaves (one positional argument of the Python function, flattened), the callable receives
// one Python list per argument and returns a list of leaves. The callable is held with the
// GIL taken whenever it is copied, called or dropped, since the TreeFn may outlive the call
// that made it or run on another thread. A drx.Error raised by the callable (an op's error,
// raised through Python) continues as the drx::Error it was, so that the C++ layers around
// the call add where it happened (the map_fn body, the function under grad) as they do for
// C++ functions; any other Python exception propagates unchanged.
TreeFn tree_fn(py::function f);

}  // namespace drx::python
