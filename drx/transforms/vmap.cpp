#include "drx/core/trace.h"
#include "drx/core/walk.h"
#include "drx/ops/ops.h"
#include "drx/transforms/transforms.h"

namespace drx {

Value broadcast_batch(const Value& v, int64_t batch_size) {
  // Placed values keep their placement axes first and take the batch after them.
  int64_t at = placement_depth(v.type().placement);
  Shape shape = v.shape();
  shape.insert(shape.begin() + at, batch_size);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < v.ndim(); ++i) dims.push_back(i < at ? i : i + 1);
  return broadcast_in_dim(v, shape, dims);
}

namespace {
// A placement-unaware primitive on placed operands (one placement, whose
// leading axes it keeps): its rule batches unplaced values at axis 0, so the
// operands leave the placement with the batch moved first, and the results
// go back with the batch after the placement axes.
std::vector<Batched> vmap_on_placed(const Primitive& prim, const std::vector<Batched>& args,
                                    int64_t batch_size, const Params& params) {
  std::string placement;
  std::vector<Batched> unplaced;
  for (const Batched& b : args) {
    const std::string& at = b.value.type().placement;
    if (!at.empty()) placement = at;
    Value v = at.empty() ? b.value : place(b.value, "");
    unplaced.push_back({b.batched ? move_axis(v, placement_depth(at), 0) : v, b.batched});
  }
  const int64_t depth = placement_depth(placement);
  std::vector<Batched> outs;
  for (Batched& r : prim.vmap(unplaced, batch_size, params)) {
    Value v = r.batched ? move_axis(r.value, 0, depth) : r.value;
    outs.push_back({place(v, placement), r.batched});
  }
  return outs;
}
}  // namespace

std::vector<Batched> vmap_emit(const Program& p, const std::vector<Batched>& ins,
                               int64_t batch_size) {
  return walk_program(p, ins, [&](size_t, const Eqn& e, const std::vector<Batched>& args) {
    bool any = false;
    for (const Batched& b : args) any = any || b.batched;
    std::vector<Batched> outs;
    if (!any) {
      Values plain;
      for (const Batched& b : args) plain.push_back(b.value);
      for (const Value& v : emit(*e.prim, plain, e.params)) outs.push_back({v, false});
      return outs;
    }
    if (!e.prim->placement_aware())
      for (const Batched& b : args)
        if (!b.value.type().placement.empty())
          return vmap_on_placed(*e.prim, args, batch_size, e.params);
    return e.prim->vmap(args, batch_size, e.params);
  });
}

Program vmap_program(const Program& p, const std::vector<bool>& batched, int64_t batch_size) {
  if (batched.size() != p.inputs.size())
    throw Error("vmap_program: " + std::to_string(batched.size()) + " batch flags for " +
                std::to_string(p.inputs.size()) + " inputs");
  TraceScope scope;
  std::vector<Batched> ins;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    Type t = p.type_of(p.inputs[i]);
    if (batched[i]) t.shape.insert(t.shape.begin() + placement_depth(t.placement), batch_size);
    ins.push_back({scope.add_input(t), batched[i]});
  }
  Values outs;
  for (const Batched& b : vmap_emit(p, ins, batch_size))
    outs.push_back(b.batched ? b.value : broadcast_batch(b.value, batch_size));
  Program r = scope.finish(outs);
  r.name = p.name + "_vmap";
  r.placements = p.placements;
  return r;
}

}  // namespace drx
