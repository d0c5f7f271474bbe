// Exported shardings follow DrJAX, checked by an independent dataflow over
// the emitted MLIR (parsed by drx's generic MLIR syntax parser, a syntax tree
// that knows nothing of drx's Types): each placed argument dimension is
// followed through broadcast_in_dim, transpose, reshape, dot_general batch
// dimensions, reductions and while/if carries, and every sharding constraint
// and result sharding is checked against it. A constraint names the
// placement's axis on every placed dimension and leaves every other one open;
// a dimension a broadcast creates is placed by the constraint DrJAX writes on
// it, and that claim is followed from there.
//
// Also: a mesh must name a placement of the program (jit and export), and an
// export refuses a mesh axis larger than its placement unless allowed.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../examples/fed_hypergradient_lib.h"
#include "../examples/hierarchical_fedavg_lib.h"
#include "drx/export/stablehlo.h"
#include "drx/stablehlo/mlir_ast.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace drx::testing {

std::vector<Program> ir_text_coverage_programs();  // tests/ir_text_test.cpp

namespace {

namespace mlir = drx::stablehlo;

// ---- the independent checker ---------------------------------------------

// Per dimension of a value: a mesh axis name, kNone (known not placed on a
// mesh axis) or kUnknown (created by an op the checker does not follow).
using Dims = std::vector<std::string>;
const std::string kUnknown = "";
const std::string kNone = "-";

bool is_axis(const std::string& s) { return s != kUnknown && s != kNone; }

using MeshAxes = std::vector<std::pair<std::string, int>>;

int axis_size(const MeshAxes& mesh, const std::string& name) {
  for (const auto& [n, s] : mesh)
    if (n == name) return s;
  return 0;
}

// A sharding as written, per dimension: an axis name, "?" (open) or ""
// (closed, unsharded).
using Written = std::vector<std::string>;

std::vector<int64_t> ints_in(const std::string& s) {
  std::vector<int64_t> v;
  size_t at = 0;
  while (at < s.size()) {
    if (std::isdigit(static_cast<unsigned char>(s[at]))) {
      size_t end = at;
      while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
      v.push_back(std::stoll(s.substr(at, end - at)));
      at = end;
    } else {
      ++at;
    }
  }
  return v;
}

// #sdy.sharding<@mesh, [{"clients"}, {?}, {}]> (or the constraint's <@mesh, [...]>).
Written parse_sdy(const std::string& text) {
  Written w;
  const size_t open = text.find('[');
  for (size_t at = text.find('{', open); at != std::string::npos; at = text.find('{', at + 1)) {
    const size_t end = text.find('}', at);
    const std::string inside = text.substr(at + 1, end - at - 1);
    if (inside.empty())
      w.push_back("");
    else if (inside == "?")
      w.push_back("?");
    else if (inside.front() == '"' && inside.find('"', 1) == inside.size() - 1)
      w.push_back(inside.substr(1, inside.size() - 2));
    else
      w.push_back("<unreadable " + inside + ">");
    at = end;
  }
  return w;
}

// {devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate} or {replicated},
// with the dimensions `unspecified` open.
Written parse_gspmd(const std::string& text, size_t rank, const std::vector<int64_t>& unspecified,
                    const MeshAxes& mesh, std::vector<std::string>& errors) {
  Written w(rank, "");
  for (int64_t d : unspecified) w.at(static_cast<size_t>(d)) = "?";
  if (text == "{replicated}") return w;
  const size_t lb = text.find('['), rb = text.find(']');
  const std::vector<int64_t> tiles = ints_in(text.substr(lb, rb - lb));
  std::vector<size_t> order;
  if (const size_t t = text.find("T("); t != std::string::npos)
    for (int64_t i : ints_in(text.substr(t, text.find(')', t) - t))) order.push_back(size_t(i));
  else
    for (size_t i = 0; i < mesh.size(); ++i) order.push_back(i);
  // The split dimensions take the mesh axes in the device order (axes of one
  // device split nothing and are skipped). A dimension of one tile is unsplit
  // or split over a one-device axis, which GSPMD cannot tell apart: "1".
  bool one_device_axis = false;
  for (const auto& a : mesh) one_device_axis = one_device_axis || a.second == 1;
  size_t next = 0;
  for (size_t d = 0; d < rank && d < tiles.size(); ++d) {
    if (tiles[d] == 1) {
      if (w[d] != "?" && one_device_axis) w[d] = "1";
      continue;
    }
    while (next < order.size() && mesh[order[next]].second == 1) ++next;
    if (next == order.size() || mesh[order[next]].second != tiles[d]) {
      errors.push_back("GSPMD sharding " + text + ": tile " + std::to_string(tiles[d]) +
                       " of dimension " + std::to_string(d) + " matches no mesh axis in order");
      continue;
    }
    w[d] = mesh[order[next++]].first;
  }
  return w;
}

std::vector<int64_t> int_list(const mlir::Attribute* a) {
  std::vector<int64_t> v;
  if (a)
    for (const mlir::Attribute& e : a->list) v.push_back(e.i);
  return v;
}

const mlir::Attribute* dict_entry(const mlir::Attribute& a, const std::string& name) {
  for (const auto& [k, v] : a.dict)
    if (k == name) return &v;
  return nullptr;
}

std::string merge(const std::string& a, const std::string& b) {
  if (is_axis(a)) return a;
  if (is_axis(b)) return b;
  return a == kNone || b == kNone ? kNone : kUnknown;
}

class ShardingChecker {
 public:
  ShardingChecker(MeshAxes mesh, bool gspmd) : mesh_(std::move(mesh)), gspmd_(gspmd) {}

  // Checks `text`'s @main; `seeds` are the placed argument dimensions.
  void check(const std::string& text, const std::vector<Dims>& seeds) {
    const mlir::Module m = mlir::parse_mlir(text);
    const mlir::Function* main = nullptr;
    for (const mlir::Function& f : m.functions)
      if (f.name == "main") main = &f;
    if (!main) return fail("no @main");
    if (main->arguments.size() != seeds.size()) return fail("argument count differs");
    for (size_t i = 0; i < seeds.size(); ++i) {
      const auto& [name, type] = main->arguments[i];
      if (name != "%arg" + std::to_string(i)) fail("argument " + std::to_string(i) + " is " + name);
      env_[name] = seeds[i];
      check_declared("argument " + std::to_string(i), seeds[i], main->argument_attributes[i]);
    }
    const std::vector<Dims> results = block(main->body.blocks.at(0), true);
    for (size_t k = 0; k < results.size() && k < main->result_attributes.size(); ++k)
      check_declared("result " + std::to_string(k), results[k], main->result_attributes[k]);
  }

  const std::vector<std::string>& errors() const { return errors_; }
  int constraints() const { return constraints_; }
  int placed_constraints() const { return placed_constraints_; }

 private:
  void fail(const std::string& what) {
    if (recording_) errors_.push_back(what);
  }

  std::string describe(const Dims& d) const {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + (d[i].empty() ? "?" : d[i]);
    return s + "]";
  }

  // Whether a written dimension is what the dataflow requires; "" if so.
  std::string mismatch(const std::string& flow, const std::string& written, bool constraint) const {
    const bool one_device = is_axis(flow) && axis_size(mesh_, flow) == 1;
    if (written == "1") {  // GSPMD: unsplit or on a one-device axis
      if (is_axis(flow) && !one_device) return "leaves placed '" + flow + "' unsharded";
      if (constraint && flow == kNone) return "closes the dimension";
      return "";
    }
    if (written.empty()) {  // closed
      if (constraint && !(gspmd_ && one_device)) return "closes the dimension";
      if (is_axis(flow) && !(gspmd_ && one_device)) return "leaves placed '" + flow + "' unsharded";
      return "";
    }
    if (written == "?") {
      if (is_axis(flow) && !(gspmd_ && one_device)) return "leaves placed '" + flow + "' open";
      return "";
    }
    if (flow == kNone) return "names '" + written + "' on a dimension no placement reaches";
    if (is_axis(flow) && flow != written) return "names '" + written + "' on '" + flow + "'";
    return "";
  }

  Written read_sharding(const mlir::AttributeList& attrs, size_t rank, bool* found) {
    *found = false;
    if (const mlir::Attribute* s = mlir::find_attribute(attrs, "sdy.sharding")) {
      *found = true;
      return parse_sdy(s->text);
    }
    if (const mlir::Attribute* s = mlir::find_attribute(attrs, "mhlo.sharding")) {
      *found = true;
      return parse_gspmd(s->text, rank, {}, mesh_, errors_);
    }
    return {};
  }

  // A function argument or result: fully specified (JAX's in/out shardings).
  void check_declared(const std::string& what, const Dims& flow, const mlir::AttributeList& attrs) {
    bool found = false;
    const Written w = read_sharding(attrs, flow.size(), &found);
    if (!found) return fail(what + " has no sharding");
    if (w.size() != flow.size())
      return fail(what + ": sharding of rank " + std::to_string(w.size()) + " for " +
                  describe(flow));
    for (size_t d = 0; d < flow.size(); ++d)
      if (std::string why = mismatch(flow[d], w[d], false); !why.empty())
        fail(what + " dimension " + std::to_string(d) + ": " + why + " (flow " + describe(flow) +
             ")");
  }

  Dims get(const std::string& name, size_t rank) {
    auto it = env_.find(name);
    if (it == env_.end() || it->second.size() != rank) return Dims(rank, kUnknown);
    return it->second;
  }

  // Runs a block's ops; returns what its terminator returns.
  std::vector<Dims> block(const mlir::Block& b, bool top) {
    for (const mlir::Operation& op : b.ops) {
      if (op.name == "func.return" || op.name == "stablehlo.return") {
        std::vector<Dims> r;
        for (size_t i = 0; i < op.operands.size(); ++i)
          r.push_back(get(op.operands[i], op.operand_types[i].shape.size()));
        return r;
      }
      const std::vector<Dims> outs = operation(op);
      for (size_t k = 0; k < op.results.size() && k < outs.size(); ++k)
        env_[op.results[k]] = outs[k];
    }
    if (top) fail("no return");
    return {};
  }

  Dims operand(const mlir::Operation& op, size_t i) {
    return get(op.operands.at(i), op.operand_types.at(i).shape.size());
  }

  // `placing`: the constraint splits some dimension over a mesh axis (for
  // GSPMD, any tiled sharding: a one-device tile names no axis).
  Dims constraint(const mlir::Operation& op, const Written& w, bool placing) {
    Dims flow = operand(op, 0);
    const std::string where = op.name + " at line " + std::to_string(op.line);
    if (recording_) {
      ++constraints_;
      placed_constraints_ += placing;
    }
    if (w.size() != flow.size()) {
      fail(where + ": sharding of rank " + std::to_string(w.size()));
      return flow;
    }
    for (size_t d = 0; d < flow.size(); ++d) {
      if (std::string why = mismatch(flow[d], w[d], true); !why.empty())
        fail(where + " dimension " + std::to_string(d) + ": " + why + " (flow " + describe(flow) +
             ")");
      // Where DrJAX places a new dimension (a broadcast), the claim is followed.
      if (flow[d] == kUnknown && w[d] != "" && w[d] != "?" && w[d] != "1") flow[d] = w[d];
    }
    return flow;
  }

  std::vector<Dims> operation(const mlir::Operation& op) {
    const auto& rt = op.result_types;
    auto unknown = [&] {
      std::vector<Dims> r;
      for (const mlir::TensorType& t : rt) r.emplace_back(t.shape.size(), kUnknown);
      return r;
    };
    if (op.name == "sdy.sharding_constraint") {
      const mlir::Attribute* s = mlir::find_attribute(op.attributes, "sharding");
      const Written w = s ? parse_sdy(s->text) : Written{};
      bool placing = false;
      for (const std::string& a : w) placing = placing || (a != "" && a != "?" && a != "1");
      return {constraint(op, w, placing)};
    }
    if (op.name == "stablehlo.custom_call") {
      const mlir::Attribute* target = mlir::find_attribute(op.attributes, "call_target_name");
      if (!target || target->text != "Sharding") return unknown();
      const mlir::Attribute* s = mlir::find_attribute(op.attributes, "mhlo.sharding");
      const mlir::Attribute* config = mlir::find_attribute(op.attributes, "backend_config");
      std::vector<int64_t> open;
      if (config && config->text.starts_with("unspecified_dims=")) open = ints_in(config->text);
      const std::string text = s ? s->text : "";
      return {constraint(op, parse_gspmd(text, rt[0].shape.size(), open, mesh_, errors_),
                         text.starts_with("{devices=["))};
    }
    if (op.name == "stablehlo.broadcast_in_dim") {
      const Dims in = operand(op, 0);
      Dims out(rt[0].shape.size(), kUnknown);
      const std::vector<int64_t> bd =
          int_list(mlir::find_attribute(op.attributes, "broadcast_dimensions"));
      for (size_t i = 0; i < bd.size(); ++i)
        if (op.operand_types[0].shape[i] == rt[0].shape[static_cast<size_t>(bd[i])])
          out[static_cast<size_t>(bd[i])] = in[i];
      return {out};
    }
    if (op.name == "stablehlo.transpose") {
      const Dims in = operand(op, 0);
      Dims out;
      for (int64_t p : int_list(mlir::find_attribute(op.attributes, "permutation")))
        out.push_back(in.at(static_cast<size_t>(p)));
      return {out};
    }
    if (op.name == "stablehlo.reshape") return {reshape(op)};
    if (op.name == "stablehlo.dot_general") {
      const mlir::Attribute* dn = mlir::find_attribute(op.attributes, "dot_dimension_numbers");
      const Dims lhs = operand(op, 0), rhs = operand(op, 1);
      const auto lb = int_list(dict_entry(*dn, "lhs_batching_dimensions"));
      const auto rb = int_list(dict_entry(*dn, "rhs_batching_dimensions"));
      const auto lc = int_list(dict_entry(*dn, "lhs_contracting_dimensions"));
      const auto rc = int_list(dict_entry(*dn, "rhs_contracting_dimensions"));
      auto in = [](const std::vector<int64_t>& v, size_t d) {
        return std::find(v.begin(), v.end(), int64_t(d)) != v.end();
      };
      Dims out;
      for (size_t i = 0; i < lb.size(); ++i)
        out.push_back(merge(lhs[size_t(lb[i])], rhs[size_t(rb[i])]));
      for (size_t d = 0; d < lhs.size(); ++d)
        if (!in(lb, d) && !in(lc, d)) out.push_back(lhs[d]);
      for (size_t d = 0; d < rhs.size(); ++d)
        if (!in(rb, d) && !in(rc, d)) out.push_back(rhs[d]);
      return {out};
    }
    if (op.name == "stablehlo.reduce") {
      const std::vector<int64_t> dims = int_list(mlir::find_attribute(op.attributes, "dimensions"));
      std::vector<Dims> r;
      for (size_t k = 0; k < rt.size(); ++k) {
        const Dims in = operand(op, k);
        Dims out;
        for (size_t d = 0; d < in.size(); ++d)
          if (std::find(dims.begin(), dims.end(), int64_t(d)) == dims.end()) out.push_back(in[d]);
        r.push_back(out);
      }
      return r;
    }
    if (op.name == "stablehlo.while") return loop(op);
    if (op.name == "stablehlo.if" || op.name == "stablehlo.case") {
      std::vector<Dims> r = unknown();
      bool first = true;
      for (const mlir::Region& region : op.regions) {
        const std::vector<Dims> b = block(region.blocks.at(0), false);
        for (size_t k = 0; k < r.size() && k < b.size(); ++k)
          for (size_t d = 0; d < r[k].size() && d < b[k].size(); ++d)
            r[k][d] = first ? b[k][d] : merge(r[k][d], b[k][d]);
        first = false;
      }
      return r;
    }
    if (op.name == "stablehlo.gather" || op.name == "stablehlo.convolution" ||
        op.name == "stablehlo.reduce_window" || !op.regions.empty())
      return unknown();
    // Everything else keeps its operands' dimensions where ranks and sizes
    // agree (elementwise ops, select, slices, pads, concatenation, scatter's operand).
    std::vector<Dims> r = unknown();
    for (size_t k = 0; k < rt.size(); ++k)
      for (size_t i = 0; i < op.operands.size(); ++i) {
        if (op.operand_types[i].shape.size() != rt[k].shape.size()) continue;
        const Dims in = operand(op, i);
        for (size_t d = 0; d < in.size(); ++d)
          if (op.operand_types[i].shape[d] == rt[k].shape[d]) r[k][d] = merge(r[k][d], in[d]);
      }
    return r;
  }

  // Groups of dimensions with equal element counts; a placed dimension
  // survives as the major dimension of its group.
  Dims reshape(const mlir::Operation& op) {
    const Dims in = operand(op, 0);
    const auto& a = op.operand_types[0].shape;
    const auto& b = op.result_types[0].shape;
    Dims out(b.size(), kUnknown);
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (a[i] == 1 && b[j] != 1) {
        ++i;
        continue;
      }
      if (b[j] == 1 && a[i] != 1) {
        ++j;
        continue;
      }
      const size_t i0 = i, j0 = j;
      int64_t pa = a[i++], pb = b[j++];
      while (pa != pb) {
        if (pa < pb && i < a.size())
          pa *= a[i++];
        else if (pb < pa && j < b.size())
          pb *= b[j++];
        else
          break;
      }
      std::string s = in[i0];
      for (size_t k = i0 + 1; k < i; ++k)
        if (is_axis(in[k])) s = kUnknown;  // a minor placed dimension is not followed
      out[j0] = s;
      for (size_t k = j0 + 1; k < j; ++k) out[k] = s == kNone ? kNone : kUnknown;
    }
    return out;
  }

  // Carries: each block argument is its operand merged with what the body
  // returns, to a fixed point (constraints are recorded on the last pass).
  std::vector<Dims> loop(const mlir::Operation& op) {
    std::vector<Dims> carry;
    for (size_t i = 0; i < op.operands.size(); ++i) carry.push_back(operand(op, i));
    const bool was = recording_;
    recording_ = false;
    for (int pass = 0; pass < 8; ++pass) {
      const std::vector<Dims> before = carry;
      for (const mlir::Region& region : op.regions) {
        const mlir::Block& b = region.blocks.at(0);
        for (size_t i = 0; i < b.arguments.size() && i < carry.size(); ++i)
          env_[b.arguments[i].first] = carry[i];
        if (&region == &op.regions.back()) {
          const std::vector<Dims> r = block(b, false);
          for (size_t k = 0; k < r.size() && k < carry.size(); ++k)
            for (size_t d = 0; d < r[k].size() && d < carry[k].size(); ++d)
              carry[k][d] = merge(carry[k][d], r[k][d]);
        } else {
          block(b, false);
        }
      }
      if (carry == before) break;
    }
    recording_ = was;
    for (const mlir::Region& region : op.regions) {
      const mlir::Block& b = region.blocks.at(0);
      for (size_t i = 0; i < b.arguments.size() && i < carry.size(); ++i)
        env_[b.arguments[i].first] = carry[i];
      block(b, false);
    }
    return carry;
  }

  MeshAxes mesh_;
  bool gspmd_;
  bool recording_ = true;
  std::map<std::string, Dims> env_;
  std::vector<std::string> errors_;
  int constraints_ = 0, placed_constraints_ = 0;
};

// ---- seeds: the argument placements, from the program's own declaration ---

// Where input i enters a placement: its own type, or the `place` equation
// drx::program writes for it.
std::string argument_placement(const Program& p, int input) {
  if (!p.type_of(input).placement.empty()) return p.type_of(input).placement;
  for (const Eqn& e : p.eqns)
    if (e.prim->name() == "place" && e.ins.size() == 1 && e.ins[0] == input)
      return e.params.get_string("placement", "place");
  return "";
}

std::vector<Dims> seeds(const Program& p, const MeshAxes& mesh) {
  std::vector<Dims> s;
  for (int v : p.inputs) {
    Dims d(p.type_of(v).shape.size(), kNone);
    std::string rest = argument_placement(p, v);
    for (size_t k = 0; !rest.empty() && k < d.size(); ++k) {
      const size_t dot = rest.find('.');
      const std::string level = rest.substr(0, dot);
      if (axis_size(mesh, level) > 0) d[k] = level;
      rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    }
    s.push_back(d);
  }
  return s;
}

std::map<std::string, int64_t> placements_of(const Program& p) {
  std::map<std::string, int64_t> out(p.placements.begin(), p.placements.end());
  for (const Type& t : p.var_types) {
    std::string rest = t.placement;
    for (size_t k = 0; !rest.empty() && k < t.shape.size(); ++k) {
      const size_t dot = rest.find('.');
      out.emplace(rest.substr(0, dot), t.shape[k]);
      rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    }
  }
  return out;
}

// FedAvg on a linear model with `steps` local steps (a fori_loop when more than one).
auto fedavg_fn(int64_t clients, int steps) {
  return program({{"clients", clients}},
                 [steps](Value w, Value lr, Value xs, Value ys) {
                   Value local = map_fn(
                       [steps](Value wi, Value lri, Value x, Value y) {
                         auto loss = [x, y](Value v) {
                           Value r = matmul(x, v) - y;
                           return mean(r * r);
                         };
                         Tree out = fori_loop(
                             0, steps,
                             [&](const Value&, const Tree& v) {
                               return Tree(v.value() - lri * grad(loss)(v.value()));
                             },
                             Tree(wi));
                         return out.value();
                       },
                       broadcast(w, "clients"), broadcast(lr, "clients"), xs, ys);
                   return reduce_mean(local);
                 },
                 {"", "", "clients", "clients"});
}

std::vector<Type> fedavg_types(int64_t clients) {
  return {Type(f32, {3}), Type(f32, {}), Type(f32, {clients, 5, 3}), Type(f32, {clients, 5})};
}

struct Case {
  std::string name;
  Program program;
};

std::vector<Case> placed_programs() {
  std::vector<Case> cases;
  for (const Program& p : ir_text_coverage_programs())
    if (!placements_of(p).empty()) cases.push_back({"coverage " + p.name, p});
  auto scan_round = fedavg_fn(8, 3);
  cases.push_back({"FedAvg, 3 local steps", trace(scan_round, fedavg_types(8))});
  cases.push_back({"hypergradient through the local steps",
                   trace(grad(
                             [scan_round](Value w, Value lr, Value xs, Value ys) {
                               Value next = scan_round(w, lr, xs, ys);
                               return sum(next * next);
                             },
                             1),
                         fedavg_types(8))});
  fedhg::Config fc;
  const fedhg::Data data = fedhg::make_data(fc);
  const std::vector<Type> ft = {Type(f64, {fc.dim}), Type(f64, {}), Type(f64, data.x.shape()),
                                Type(f64, data.y.shape())};
  cases.push_back({"export_fedavg's round", trace(fedhg::round_program(fc), ft)});
  cases.push_back(
      {"export_fedavg's hypergradient", trace(value_and_grad(fedhg::hyper_objective(fc), 1), ft)});
  hfl::Config hc;
  hc.groups = 2, hc.clients = 3, hc.examples = 4, hc.dim = 3, hc.local_steps = 2,
  hc.edge_rounds = 2;
  cases.push_back({"hierarchical round", hfl::round_program(hc)});
  return cases;
}

// 1-, 2- and 4-device meshes over the program's placements.
std::vector<MeshAxes> meshes_for(const Program& p) {
  std::vector<MeshAxes> meshes;
  const auto placements = placements_of(p);
  for (int n : {1, 2, 4})
    for (const auto& [name, size] : placements) meshes.push_back({{name, n}});
  if (placements.size() == 2) {
    auto it = placements.begin();
    const std::string a = it->first, b = (++it)->first;
    meshes.push_back({{a, 2}, {b, 2}});
    meshes.push_back({{b, 2}, {a, 2}, {"model", 2}});
  }
  return meshes;
}

std::string mesh_text(const MeshAxes& m) {
  std::string s;
  for (const auto& [n, k] : m) s += (s.empty() ? "" : ",") + n + "=" + std::to_string(k);
  return s;
}

TEST(StablehloSharding, ConstraintsAndResultShardingsFollowThePlacedDimensions) {
  int modules = 0, constraints = 0;
  for (const Case& c : placed_programs()) {
    for (const MeshAxes& axes : meshes_for(c.program)) {
      for (bool gspmd : {false, true}) {
        for (bool generic : {false, true}) {
          StableHloOptions o;
          o.gspmd = gspmd, o.generic = generic, o.allow_idle_devices = true;
          const std::string text = to_stablehlo(c.program, Mesh(axes), o);
          ShardingChecker checker(axes, gspmd);
          checker.check(text, seeds(c.program, axes));
          ++modules;
          constraints += checker.constraints();
          std::string all;
          for (const std::string& e : checker.errors()) all += "  " + e + "\n";
          EXPECT_TRUE(checker.errors().empty())
              << c.name << " on {" << mesh_text(axes) << "}" << (gspmd ? " GSPMD" : " Shardy")
              << (generic ? " generic" : "") << ":\n"
              << all << text;
          // DrJAX writes constraints at broadcasts and map_fns, each placing a dimension.
          EXPECT_GT(checker.placed_constraints(), 0) << c.name << "\n" << text;
          EXPECT_EQ(checker.placed_constraints(), checker.constraints()) << c.name << "\n" << text;
        }
      }
    }
  }
  std::cout << "[ StablehloSharding ] " << modules << " modules, " << constraints
            << " constraints checked\n";
}

// The checker itself rejects what the exporter used to write: a per-client
// model after the local-steps while constrained replicated (issue 27).
TEST(StablehloSharding, CheckerRejectsAReplicatedConstraintOnClientValues) {
  const std::string text = R"(module @m {
  sdy.mesh @mesh = <["clients"=2]>
  func.func public @main(%arg0: tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"clients"}, {}]>}) -> (tensor<4x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"clients"}, {}]>}) {
    %0 = stablehlo.constant dense<0> : tensor<i64>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %arg0) : tensor<i64>, tensor<4x3xf32>
     cond {
      %c = stablehlo.constant dense<2> : tensor<i64>
      %2 = stablehlo.compare  LT, %iterArg, %c,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c = stablehlo.constant dense<1> : tensor<i64>
      %2 = stablehlo.add %iterArg, %c : tensor<i64>
      %3 = stablehlo.multiply %iterArg_0, %iterArg_0 : tensor<4x3xf32>
      stablehlo.return %2, %3 : tensor<i64>, tensor<4x3xf32>
    }
    %4 = sdy.sharding_constraint %1#1 <@mesh, [{}, {}]> : tensor<4x3xf32>
    return %4 : tensor<4x3xf32>
  }
}
)";
  ShardingChecker checker({{"clients", 2}}, false);
  checker.check(text, {{"clients", kNone}});
  ASSERT_EQ(checker.errors().size(), 2u);
  EXPECT_NE(checker.errors()[0].find("dimension 0: closes the dimension"), std::string::npos)
      << checker.errors()[0];
  EXPECT_NE(checker.errors()[1].find("dimension 1: closes the dimension"), std::string::npos);
  // The open form passes.
  ShardingChecker ok({{"clients", 2}}, false);
  std::string fixed = text;
  fixed.replace(fixed.find("<@mesh, [{}, {}]>"), 17, "<@mesh, [{\"clients\"}, {?}]>");
  ok.check(fixed, {{"clients", kNone}});
  EXPECT_TRUE(ok.errors().empty()) << ok.errors().front();
}

// The issue's example, exactly: export_fedavg's round on 4 devices now
// constrains the clients' models after the local steps with the clients
// axis, and no constraint closes a dimension.
TEST(StablehloSharding, ExportFedavgConstrainsClientModelsOnTheClientsAxis) {
  fedhg::Config fc;
  const fedhg::Data data = fedhg::make_data(fc);
  const std::vector<Type> ft = {Type(f64, {fc.dim}), Type(f64, {}), Type(f64, data.x.shape()),
                                Type(f64, data.y.shape())};
  const std::string text =
      to_stablehlo(trace(fedhg::round_program(fc), ft), Mesh({{"clients", 4}}));
  int constraints = 0;
  for (size_t at = text.find("sdy.sharding_constraint"); at != std::string::npos;
       at = text.find("sdy.sharding_constraint", at + 1), ++constraints) {
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_EQ(line.find("{}"), std::string::npos) << line;
  }
  // The broadcast of the model, and the map_fn's result after the local steps.
  EXPECT_EQ(constraints, 2) << text;
  EXPECT_NE(text.find("<@mesh, [{\"clients\"}, {?}]> : tensor<8x5xf64>"), std::string::npos)
      << text;
  EXPECT_NE(text.find("func.func public @main(%arg0: "), std::string::npos);
  StableHloOptions o;
  o.gspmd = true;
  const std::string gspmd =
      to_stablehlo(trace(fedhg::round_program(fc), ft), Mesh({{"clients", 4}}), o);
  EXPECT_NE(gspmd.find("backend_config = \"unspecified_dims=[1]\""), std::string::npos) << gspmd;
  EXPECT_EQ(gspmd.find("call_target_name = \"Sharding\", mhlo.sharding = \"{replicated}\""),
            std::string::npos)
      << gspmd;
}

// Nested programs: the inner level's values, transposed to [clients, groups,
// ...] inside the groups body, carry both axes.
TEST(StablehloSharding, NestedInnerValuesCarryBothAxes) {
  hfl::Config hc;
  hc.groups = 2, hc.clients = 3, hc.examples = 4, hc.dim = 3, hc.local_steps = 1,
  hc.edge_rounds = 1;
  StableHloOptions o;
  o.allow_idle_devices = true;
  const std::string text =
      to_stablehlo(hfl::round_program(hc), Mesh({{"groups", 2}, {"clients", 4}}), o);
  EXPECT_NE(text.find("<@mesh, [{\"clients\"}, {\"groups\"}, {?}]>"), std::string::npos) << text;
  for (size_t at = text.find("sdy.sharding_constraint"); at != std::string::npos;
       at = text.find("sdy.sharding_constraint", at + 1)) {
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_EQ(line.find("{}"), std::string::npos) << line;
  }
}

// No dead code in exports: a value nothing returns is not lowered.
TEST(StablehloSharding, ExportsRemoveDeadCode) {
  const Program p = trace(
      [](Value x) {
        Value unused = exp(x) * 3.0;
        (void)unused;
        return x + 1.0;
      },
      {Type(f32, {2})});
  // The traced program keeps the dead equations (the old exporter lowered them).
  bool traced_dead = false;
  for (const Eqn& e : p.eqns) traced_dead = traced_dead || e.prim->name() == "exp";
  ASSERT_TRUE(traced_dead);
  const std::string text = to_stablehlo(p);
  EXPECT_EQ(text.find("stablehlo.exponential"), std::string::npos) << text;
  EXPECT_EQ(text.find("stablehlo.multiply"), std::string::npos) << text;
}

// ---- a mesh must mean something ------------------------------------------

auto clients_mean(int64_t clients) {
  return program({{"clients", clients}},
                 [](Value x) { return reduce_mean(map_fn([](Value v) { return v * 2.0; }, x)); },
                 {"clients"});
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no drx::Error";
  } catch (const Error& e) {
    for (const std::string& s : parts)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(MeshAxes, JitRefusesAMeshThatNamesNoPlacement) {
  const Array x = Array::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  expect_error(
      [&] {
        jit(clients_mean(4), Mesh({{"cleints", 2}}))(x);
      },
      {"jit", "{cleints: 2}", "names no placement", "clients (4)",
       "Did you mean 'clients' for mesh axis 'cleints'?"});
  // Far from any placement: no suggestion.
  expect_error(
      [&] {
        jit(clients_mean(4), Mesh({{"devices", 2}}))(x);
      },
      {"names no placement", "clients (4)"});
  // A program without placements.
  expect_error(
      [&] {
        jit([](Value v) { return v * 2.0; }, Mesh({{"clients", 2}}))(x);
      },
      {"it has no placements"});
  const Array want = run(trace(clients_mean(4), {Type(f32, {4, 2})}), {x}).at(0);
  // Extra axes are allowed (model axes), and values do not change.
  EXPECT_TRUE(jit(clients_mean(4), Mesh({{"clients", 2}, {"model", 2}}))(x).bitwise_equal(want));
  // An ambient MeshScope does not apply to a program without that placement.
  {
    MeshScope scope(Mesh({{"cleints", 2}}));
    EXPECT_TRUE(jit(clients_mean(4))(x).bitwise_equal(want));
  }
  // A mesh axis larger than its placement runs, with idle devices.
  EXPECT_TRUE(jit(clients_mean(4), Mesh({{"clients", 8}}))(x).bitwise_equal(want));
}

TEST(MeshAxes, ExportRefusesAMeshThatNamesNoPlacementAndIdleDevices) {
  const Program p = trace(clients_mean(4), {Type(f32, {4, 2})});
  expect_error(
      [&] {
        to_stablehlo(p, Mesh({{"cleints", 2}}));
      },
      {"to_stablehlo", "names no placement", "Did you mean 'clients'"});
  expect_error(
      [&] {
        to_stablehlo(p, Mesh({{"clients", 8}}));
      },
      {"to_stablehlo", "mesh axis 'clients' has 8 devices", "placement 'clients' has 4", "padding",
       "allow_idle_devices"});
  StableHloOptions o;
  o.allow_idle_devices = true;
  EXPECT_NE(to_stablehlo(p, Mesh({{"clients", 8}}), o).find("\"clients\"=8"), std::string::npos);
  EXPECT_NO_THROW(to_stablehlo(p, Mesh({{"clients", 4}, {"model", 2}})));
  // Every coverage program without placements refuses a mesh.
  for (const Program& q : ir_text_coverage_programs())
    if (placements_of(q).empty())
      expect_error([&] { to_stablehlo(q, Mesh({{"clients", 2}})); }, {"it has no placements"});
}

TEST(MeshAxes, ExportCommandChecksTheMesh) {
  const std::string path = ::testing::TempDir() + "drx_mesh_axes_" +
                           std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                           ".drx";
  std::ofstream(path) << to_string(trace(clients_mean(4), {Type(f32, {4, 2})}));
  CliResult r = cli({"export", path, "--mesh", "cleints=2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("Did you mean 'clients'"), std::string::npos) << r.err;
  r = cli({"export", path, "--mesh", "clients=8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--allow-idle-devices"), std::string::npos) << r.err;
  r = cli({"export", path, "--mesh", "clients=8", "--allow-idle-devices"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sdy.mesh @mesh = <[\"clients\"=8]>"), std::string::npos) << r.out;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace drx::testing
