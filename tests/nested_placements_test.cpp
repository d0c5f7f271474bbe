// Nested placements: clients inside groups. Hierarchical FedAvg and its
// gradient against a flat-loop reference without placements (in f64, by hand
// and as a drx program), under jit, vmap, loops and the mesh; the typing
// rules and their errors; the text form.
#include <cmath>
#include <optional>

#include "../examples/hierarchical_fedavg_lib.h"
#include "drx/exec/executable.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

hfl::Config small() {
  hfl::Config c;
  c.groups = 3;
  c.clients = 4;
  c.examples = 5;
  c.dim = 3;
  c.local_steps = 2;
  c.edge_rounds = 2;
  return c;
}

Array start_weights(const hfl::Config& c, DType dtype = DType::f64) {
  Array w(DType::f64, {c.dim});
  for (int64_t j = 0; j < c.dim; ++j) w.data<double>()[j] = 0.3 - 0.2 * static_cast<double>(j);
  return convert_array(w, dtype);
}

std::vector<Array> round_args(const hfl::Config& c, DType dtype = DType::f64) {
  hfl::Data d = hfl::make_data(c, dtype);
  return {start_weights(c, dtype), convert_array(Array::scalar(c.client_lr), dtype), d.x, d.y};
}

// ---- the flat-loop reference, by hand in double --------------------------------
using Vec = std::vector<double>;

struct HandReference {
  hfl::Config c;
  Vec x, y;  // [groups, clients, examples, dim], [groups, clients, examples]

  const double* xs(int64_t g, int64_t k) const {
    return x.data() + ((g * c.clients + k) * c.examples) * c.dim;
  }
  const double* ys(int64_t g, int64_t k) const {
    return y.data() + (g * c.clients + k) * c.examples;
  }
  double loss(const Vec& w, int64_t g, int64_t k) const {
    double s = 0;
    for (int64_t i = 0; i < c.examples; ++i) {
      double r = -ys(g, k)[i];
      for (int64_t j = 0; j < c.dim; ++j) r += xs(g, k)[i * c.dim + j] * w[static_cast<size_t>(j)];
      s += r * r;
    }
    return s / static_cast<double>(c.examples);
  }
  Vec local_sgd(Vec w, double lr, int64_t g, int64_t k) const {
    for (int s = 0; s < c.local_steps; ++s) {
      Vec grad(static_cast<size_t>(c.dim), 0.0);
      for (int64_t i = 0; i < c.examples; ++i) {
        double r = -ys(g, k)[i];
        for (int64_t j = 0; j < c.dim; ++j)
          r += xs(g, k)[i * c.dim + j] * w[static_cast<size_t>(j)];
        for (int64_t j = 0; j < c.dim; ++j)
          grad[static_cast<size_t>(j)] +=
              2 * r * xs(g, k)[i * c.dim + j] / static_cast<double>(c.examples);
      }
      for (int64_t j = 0; j < c.dim; ++j)
        w[static_cast<size_t>(j)] -= lr * grad[static_cast<size_t>(j)];
    }
    return w;
  }
  Vec server_round(const Vec& w, double lr) const {
    Vec server(w.size(), 0.0);
    for (int64_t g = 0; g < c.groups; ++g) {
      Vec wg = w;
      for (int r = 0; r < c.edge_rounds; ++r) {
        Vec mean(w.size(), 0.0);
        for (int64_t k = 0; k < c.clients; ++k) {
          Vec local = local_sgd(wg, lr, g, k);
          for (size_t j = 0; j < w.size(); ++j)
            mean[j] += local[j] / static_cast<double>(c.clients);
        }
        wg = mean;
      }
      for (size_t j = 0; j < w.size(); ++j) server[j] += wg[j] / static_cast<double>(c.groups);
    }
    return server;
  }
  double global_loss(const Vec& w) const {
    double s = 0;
    for (int64_t g = 0; g < c.groups; ++g)
      for (int64_t k = 0; k < c.clients; ++k)
        s += loss(w, g, k) / static_cast<double>(c.groups * c.clients);
    return s;
  }
  double loss_after(Vec w, double lr, int rounds) const {
    for (int r = 0; r < rounds; ++r) w = server_round(w, lr);
    return global_loss(w);
  }
};

HandReference hand_reference(const hfl::Config& c, const std::vector<Array>& args) {
  return {c, to_doubles(args[2]), to_doubles(args[3])};
}

// ---- the flat-loop reference as a drx program without placements ---------------
Value row(const Value& x, int64_t i) {
  Shape lo(static_cast<size_t>(x.ndim()), 0), hi = x.shape();
  lo[0] = i;
  hi[0] = i + 1;
  Shape rest(x.shape().begin() + 1, x.shape().end());
  return reshape(slice(x, lo, hi), rest);
}

Value flat_rounds(const hfl::Config& c, Value w, Value lr, Value x, Value y, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    Value server = zeros_like(w);
    for (int64_t g = 0; g < c.groups; ++g) {
      Value wg = w;
      for (int e = 0; e < c.edge_rounds; ++e) {
        Value mean = zeros_like(w);
        for (int64_t k = 0; k < c.clients; ++k)
          mean = mean + hfl::local_sgd(c, wg, lr, row(row(x, g), k), row(row(y, g), k));
        wg = mean / static_cast<double>(c.clients);
      }
      server = server + wg;
    }
    w = server / static_cast<double>(c.groups);
  }
  return w;
}

Value flat_loss(const hfl::Config& c, Value w, Value x, Value y) {
  Value s = zeros_like(sum(w));
  for (int64_t g = 0; g < c.groups; ++g)
    for (int64_t k = 0; k < c.clients; ++k)
      s = s + hfl::client_loss(w, row(row(x, g), k), row(row(y, g), k));
  return s / static_cast<double>(c.groups * c.clients);
}

Program flat_program(const hfl::Config& c, int rounds = 1) {
  auto f = [c, rounds](Value w, Value lr, Value x, Value y) -> std::vector<Value> {
    auto loss_after = [&](Value v, Value r) {
      return flat_loss(c, flat_rounds(c, v, r, x, y, rounds), x, y);
    };
    std::vector<Value> grads = grad(loss_after, {0, 1})(w, lr);
    Value next = flat_rounds(c, w, lr, x, y, rounds);
    return {next, flat_loss(c, next, x, y), grads[0], grads[1]};
  };
  return trace(f, hfl::round_types(c));
}

// ---- hierarchical FedAvg against the references ---------------------------------
TEST(NestedPlacements, HierarchicalFedAvgAndItsGradientEqualTheFlatLoopReference) {
  for (int rounds : {1, 2}) {
    hfl::Config c = small();
    Program p = hfl::round_program(c, DType::f64, rounds);
    std::vector<Array> args = round_args(c);
    std::vector<Array> got = interpret(p, args);
    ASSERT_EQ(got.size(), 4u);

    // By hand: the round's result and loss, and central differences of the loss.
    HandReference ref = hand_reference(c, args);
    Vec w0 = to_doubles(args[0]);
    Vec w = w0;
    for (int r = 0; r < rounds; ++r) w = ref.server_round(w, c.client_lr);
    EXPECT_TRUE(ArrayNear(got[0], w, 1e-12));
    EXPECT_NEAR(got[1].element_as_double(0), ref.global_loss(w), 1e-12);
    const double h = 1e-6;
    Vec dw;
    for (size_t j = 0; j < w0.size(); ++j) {
      Vec up = w0, down = w0;
      up[j] += h;
      down[j] -= h;
      dw.push_back(
          (ref.loss_after(up, c.client_lr, rounds) - ref.loss_after(down, c.client_lr, rounds)) /
          (2 * h));
    }
    EXPECT_TRUE(ArrayNear(got[2], dw, 1e-7));
    const double dlr = (ref.loss_after(w0, c.client_lr + h, rounds) -
                        ref.loss_after(w0, c.client_lr - h, rounds)) /
                       (2 * h);
    EXPECT_NEAR(got[3].element_as_double(0), dlr, 1e-6 * std::max(1.0, std::abs(dlr)));

    // The same computation as a drx program with plain loops and no placements.
    std::vector<Array> flat = interpret(flat_program(c, rounds), args);
    EXPECT_LT(max_abs_diff(got, flat), 1e-12) << rounds << " rounds";
    // Compiled, the same to rounding.
    EXPECT_LT(max_abs_diff(compile(p).run(args), flat), 1e-12);
    EXPECT_LT(max_abs_diff(jit(hfl::round_fn(c, rounds))(args[0], args[1], args[2], args[3]), flat),
              1e-12);
  }
}

// Forward mode through both levels: the directional derivative of the loss
// after a round equals the reverse-mode gradient's dot product with the direction.
TEST(NestedPlacements, ForwardModeAgreesWithReverseMode) {
  hfl::Config c = small();
  std::vector<Array> args = round_args(c);
  auto directional =
      program(hfl::placements(c),
              [c](Value w, Value lr, Value x, Value y, Value dw, Value dlr) {
                auto loss_after = [&](Value v, Value r) {
                  return hfl::global_loss(hfl::server_round(c, v, r, x, y), x, y);
                };
                auto [value, tangent] = jvp(loss_after, {Tree(w), Tree(lr)}, {Tree(dw), Tree(dlr)});
                return tangent;
              },
              {"", "", "groups.clients", "groups.clients", "", ""});
  Array dw = random_array({c.dim}, DType::f64, 12);
  Array dlr = Array::scalar(0.7);
  double got = jit(directional)(args[0], args[1], args[2], args[3], dw, dlr).item<double>();
  std::vector<Array> rev = interpret(hfl::round_program(c), args);
  double want = 0.7 * rev[3].element_as_double(0);
  for (int64_t j = 0; j < c.dim; ++j) want += dw.element_as_double(j) * rev[2].element_as_double(j);
  EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::abs(want)));
}

// Walks p and its sub-programs.
void each_program(const Program& p, const std::function<void(const Program&)>& fn) {
  fn(p);
  for (const Eqn& e : p.eqns)
    for (const auto& [key, value] : e.params.items())
      if (auto* sub = std::get_if<std::shared_ptr<const Program>>(&value)) each_program(**sub, fn);
}

TEST(NestedPlacements, TheGradientIsAMapReduceProgramAtBothLevels) {
  Program p = simplify(hfl::round_program(small()));
  // At top level: broadcast to and reduce_sum from groups; inside the groups'
  // bodies: broadcast to and reduce_sum from clients, including in the
  // bodies of the backward pass.
  std::set<std::string> top, in_vjp_bodies;
  for (const Eqn& e : p.eqns)
    if (e.params.has("placement"))
      top.insert(e.prim->name() + "@" + e.params.get_string("placement", "t"));
  EXPECT_TRUE(top.count("broadcast@groups") && top.count("reduce_sum@groups") &&
              top.count("map_fn@groups"));
  for (const Eqn& e : p.eqns) {
    if (e.prim->name() != "map_fn") continue;
    const Program& body = e.params.get_program("body", "t");
    if (body.name.find("vjp") == std::string::npos) continue;
    each_program(body, [&](const Program& q) {
      for (const Eqn& f : q.eqns)
        if (f.params.has("placement"))
          in_vjp_bodies.insert(f.prim->name() + "@" + f.params.get_string("placement", "t"));
    });
  }
  EXPECT_TRUE(in_vjp_bodies.count("broadcast@clients") &&
              in_vjp_bodies.count("reduce_sum@clients") && in_vjp_bodies.count("map_fn@clients"));
  // Never a plain sum over a placement axis, and no value leaves its placement
  // except through reduce_*: the program still splits into server and clients.
  each_program(p, [](const Program& q) {
    for (const Eqn& e : q.eqns) {
      // (A loop stacks a placed residual unplaced, and places its rows again.)
      if (e.prim->name() == "place" && q.name.find("scan_body") == std::string::npos) {
        EXPECT_NE(e.params.get_string("placement", "t"), "")
            << "a value was unplaced in @" << q.name;
      }
      if (e.prim->placement_aware()) continue;
      for (int v : e.ins) {
        if (q.type_of(v).placement.empty()) continue;
        EXPECT_FALSE(e.prim->reduction().has_value())
            << e.prim->name() << " reduces a placed value in @" << q.name;
      }
    }
  });
}

TEST(NestedPlacements, VmapOverServerWeightsAndOverDatasets) {
  hfl::Config c = small();
  c.groups = 2;
  c.clients = 3;
  std::vector<Array> args = round_args(c);
  Array ws(DType::f64, {3, c.dim});
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t j = 0; j < c.dim; ++j)
      ws.data<double>()[b * c.dim + j] =
          0.1 * static_cast<double>(b) - 0.3 * static_cast<double>(j);
  auto batched = jit(vmap(hfl::round_fn(c), {0, std::nullopt, std::nullopt, std::nullopt}));
  std::vector<Array> got = batched(ws, args[1], args[2], args[3]);
  ASSERT_EQ(got.size(), 4u);
  Program one = hfl::round_program(c);
  for (int64_t b = 0; b < 3; ++b) {
    Array wb(DType::f64, {c.dim});
    for (int64_t j = 0; j < c.dim; ++j) wb.data<double>()[j] = ws.data<double>()[b * c.dim + j];
    std::vector<Array> want = interpret(one, {wb, args[1], args[2], args[3]});
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(ArrayNear(batch_row(got[k], b), to_doubles(want[k]), 1e-12))
          << "output " << k << " batch " << b;
  }
  // Two datasets at once: the data are placed at groups.clients inside the
  // program, so the batch sits after both placement axes.
  hfl::Config c2 = c;
  c2.seed = 9;
  std::vector<Array> other = round_args(c2);
  auto stack = [](const Array& a, const Array& b) {
    Shape s = a.shape();
    s.insert(s.begin(), 2);
    Array out(a.dtype(), s);
    std::memcpy(out.raw(), a.raw(), a.nbytes());
    std::memcpy(static_cast<std::byte*>(out.raw()) + a.nbytes(), b.raw(), b.nbytes());
    return out;
  };
  auto over_data = jit(vmap(hfl::round_fn(c), {std::nullopt, std::nullopt, 0, 0}));
  std::vector<Array> both =
      over_data(args[0], args[1], stack(args[2], other[2]), stack(args[3], other[3]));
  for (int64_t b = 0; b < 2; ++b) {
    const std::vector<Array>& a = b == 0 ? args : other;
    std::vector<Array> want = interpret(one, {args[0], args[1], a[2], a[3]});
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_TRUE(ArrayNear(batch_row(both[k], b), to_doubles(want[k]), 1e-12))
          << "output " << k << " dataset " << b;
  }
}

TEST(NestedPlacements, BitwiseTheSameOnOneToFourDevicesAndChunkedAtBothLevels) {
  for (int64_t groups : {4, 3}) {
    hfl::Config c = small();
    c.groups = groups;
    c.clients = 5;
    // With three groups, two server rounds in a loop.
    Program p = hfl::round_program(c, DType::f32, groups == 3 ? 2 : 1);
    std::vector<Array> args = round_args(c, DType::f32);
    Executable single = compile(p, Mesh({{"groups", 1}}));
    std::vector<Array> one = single.run(args);
    EXPECT_LT(max_abs_diff(one, interpret(p, args)), 1e-4);
    // The round's and the loss's reductions at both levels run client by client.
    EXPECT_GE(single.stats().chunked_maps, 1u);
    EXPECT_GE(single.stats().nested_chunked_maps, 1u);
    for (int devices : {2, 3, 4})
      EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"groups", devices}})).run(args), one))
          << groups << " groups on " << devices << " devices";
    // Clients split too, and the path without chunking: the same bits.
    EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"groups", 2}, {"clients", 2}})).run(args), one));
    CompileOptions whole;
    whole.chunk_map_reduce = false;
    Executable unchunked = compile(p, Mesh({{"groups", 3}}), whole);
    EXPECT_EQ(unchunked.stats().chunked_maps, 0u);
    EXPECT_TRUE(BitwiseEqual(unchunked.run(args), one));
  }
}

// ---- typing -----------------------------------------------------------------------
TEST(NestedPlacements, ValuesPlacedWithinGroupsHaveNestedTypes) {
  auto f = program({{"groups", 4}, {"clients", 8}},
                   [](Value w, Value x) -> std::vector<Value> {
                     Value inner = map_fn(
                         [](Value wg, Value xg) {
                           Value wc = broadcast(wg);  // the only placement usable here: clients
                           EXPECT_EQ(wc.type().str(), "f32[8,10]@clients");
                           EXPECT_EQ(xg.type().str(), "f32[8,10]@clients");
                           return wc * xg;
                         },
                         broadcast(w, "groups"), x);
                     EXPECT_EQ(inner.type().str(), "f32[4,8,10]@groups.clients");
                     // At top level the placements are siblings: clients of size 8 alone.
                     Value sibling = broadcast(sum(w), "clients");
                     EXPECT_EQ(sibling.type().str(), "f32[8]@clients");
                     Value per_group = map_fn([](Value v) { return reduce_sum(v); }, inner);
                     EXPECT_EQ(per_group.type().str(), "f32[4,10]@groups");
                     return {inner, reduce_sum(per_group), reduce_sum(sibling)};
                   },
                   {"", "groups.clients"});
  Program p = trace(f, {Type(DType::f32, {10}), Type(DType::f32, {4, 8, 10})});
  EXPECT_EQ(p.type_of(p.outputs[0]).str(), "f32[4,8,10]@groups.clients");
  ASSERT_EQ(p.placements.size(), 2u);
  EXPECT_EQ(p.placements[0], (std::pair<std::string, int64_t>{"groups", 4}));
  EXPECT_EQ(p.placements[1], (std::pair<std::string, int64_t>{"clients", 8}));
  Array w = random_array({10}, DType::f32, 1), x = random_array({4, 8, 10}, DType::f32, 2);
  std::vector<Array> out = compile(p).run({w, x});
  Vec want_sum(10, 0.0);
  for (int64_t g = 0; g < 4; ++g)
    for (int64_t k = 0; k < 8; ++k)
      for (int64_t j = 0; j < 10; ++j) {
        double v = w.element_as_double(j) * x.element_as_double((g * 8 + k) * 10 + j);
        EXPECT_NEAR(out[0].element_as_double((g * 8 + k) * 10 + j), v, 1e-6);
        want_sum[static_cast<size_t>(j)] += v;
      }
  EXPECT_TRUE(ArrayNear(out[1], want_sum, 1e-4));
  double s = 0;
  for (int64_t j = 0; j < 10; ++j) s += w.element_as_double(j);
  EXPECT_NEAR(out[2].element_as_double(0), 8 * s, 1e-4);
}

TEST(NestedPlacements, ErrorsNameBothPlacementsAndTheFix) {
  const Placements both = {{"groups", 2}, {"clients", 3}};
  Array x = random_array({2, 3, 4}, DType::f32, 3), w = random_array({4}, DType::f32, 4);
  auto nested = [&](auto body) { return jit(program(both, body, {"groups.clients"}))(x); };
  // Reducing over clients outside the groups' map_fn.
  expect_error([&] { nested([](Value v) { return reduce_sum(v); }); },
               {"reduce_sum", "f32[2,3,4]@groups.clients", "'clients' nested in 'groups'",
                "inside a map_fn over 'groups'", "f32[2,4]@groups"});
  expect_error([&] { nested([](Value v) { return reduce_mean(v); }); },
               {"reduce_mean", "'clients' nested in 'groups'", "map_fn"});
  // A placed value broadcast again at top level: broadcast inside the map_fn.
  expect_error(
      [&] {
        jit(program(both, [](Value v) { return broadcast(broadcast(v, "groups"), "clients"); }))(w);
      },
      {"broadcast", "already placed at 'groups'", "inside a map_fn over 'groups'",
       "f32[2,3,4]@groups.clients"});
  // Inside the groups' body, groups itself cannot be used.
  expect_error(
      [&] {
        jit(program(both, [](Value v) {
          return reduce_sum(map_fn([](Value vg) { return reduce_sum(broadcast(vg, "groups")); },
                                   broadcast(v, "groups")));
        }))(w);
      },
      {"broadcast", "'groups'", "inside the body of a map_fn over 'groups'", "nest 'clients'"});
  // Clients within groups are not the top-level clients.
  expect_error(
      [&] {
        jit(program(both,
                    [](Value v, Value u) {
                      return map_fn([](Value a, Value b) { return a + sum(b); }, v, u);
                    },
                    {"groups.clients", "clients"}))(x, random_array({3, 4}, DType::f32, 5));
      },
      {"map_fn", "different placements", "'groups'", "'clients'", "@groups.clients"});
  expect_error(
      [&] {
        jit(program(both, [](Value v, Value u) { return v + u; }, {"groups.clients", "groups"}))(
            x, random_array({2, 3, 4}, DType::f32, 6));
      },
      {"add", "different placements", "@groups.clients", "@groups"});
  // in_placements.
  expect_error([&] { jit(program(both, [](Value v) { return v; }, {"clients.groups"}))(x); },
               {"program", "placed at 'clients.groups'", "[3,2]", "outermost first"});
  expect_error([&] { jit(program(both, [](Value v) { return v; }, {"groups.groups"}))(x); },
               {"program", "nests 'groups' inside itself"});
  expect_error([&] { jit(program(both, [](Value v) { return v; }, {"groups."}))(x); },
               {"program", "empty level"});
  expect_error([&] { jit(program(both, [](Value v) { return v; }, {"groups.devices"}))(x); },
               {"program", "'devices' is not declared"});
  expect_error(
      [&] {
        jit(program({{"a.b", 2}}, [](Value v) { return v; }))(w);
      },
      {"program", "'a.b'", "contains '.'"});
  // A map_fn body declaring the placement it is in.
  expect_error(
      [&] {
        jit(program(both, [](Value v) {
          return reduce_sum(map_fn(
              [](Value vg) {
                return program({{"groups", 2}}, [](Value u) { return u; })(vg);
              },
              broadcast(v, "groups")));
        }))(w);
      },
      {"program", "'groups' is declared inside the body of a map_fn over 'groups'"});
}

// A program over clients, written once, used per group inside a map_fn over
// groups: composing programs is another way to nest placements.
TEST(NestedPlacements, AFlatProgramRunsPerGroupInsideAMapFn) {
  auto client_mean = program({{"clients", 3}}, [](Value w, Value x) {
    return reduce_mean(map_fn([](Value wi, Value xi) { return wi * xi; }, broadcast(w), x));
  });
  auto hier = program(
      {{"groups", 2}, {"clients", 3}},
      [&](Value w, Value x) { return reduce_sum(map_fn(client_mean, broadcast(w, "groups"), x)); },
      {"", "groups.clients"});
  Array w = random_array({4}, DType::f64, 7), x = random_array({2, 3, 4}, DType::f64, 8);
  Array got = jit(hier)(w, x);
  Vec want(4, 0.0);
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 4; ++j)
        want[static_cast<size_t>(j)] +=
            w.element_as_double(j) * x.element_as_double((g * 3 + k) * 4 + j) / 3;
  EXPECT_TRUE(ArrayNear(got, want, 1e-12));
}

// ---- text ----------------------------------------------------------------------
TEST(NestedPlacements, PrintParsePrintIsTheIdentity) {
  hfl::Config c = small();
  for (const Program& p : {hfl::round_program(c), simplify(hfl::round_program(c))}) {
    std::string text = to_string(p);
    EXPECT_NE(text.find("@groups.clients"), std::string::npos);
    Program q = parse_program(text);
    EXPECT_EQ(to_string(q), text);
    std::vector<Array> args = round_args(c);
    EXPECT_TRUE(BitwiseEqual(interpret(q, args), interpret(p, args)));
  }
}

TEST(NestedPlacements, MalformedNestedTextIsAnError) {
  const std::string good =
      "program @main [groups=2, clients=3] (%0: f32[2,3,4]@groups.clients) -> (f32[2,4]@groups) {\n"
      "  %1 = map_fn[body=@body, placement=\"groups\"] %0 : f32[2,4]@groups\n"
      "  return %1\n"
      "}\n\n"
      "program @body [clients=3] (%0: f32[3,4]@clients) -> (f32[4]) {\n"
      "  %1 = reduce_sum[placement=\"clients\"] %0 : f32[4]\n"
      "  return %1\n"
      "}\n";
  Program p = parse_program(good);
  EXPECT_EQ(to_string(p), good);
  Array x = random_array({2, 3, 4}, DType::f32, 9);
  Array got = interpret(p, {x})[0];
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t j = 0; j < 4; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 3; ++k) s += x.element_as_double((g * 3 + k) * 4 + j);
      EXPECT_NEAR(got.element_as_double(g * 4 + j), s, 1e-5);
    }
  auto bad = [&](const std::string& from, const std::string& to, std::vector<std::string> words) {
    std::string text = good;
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    expect_error([&] { verify(parse_program(text)); }, words);
  };
  bad("(%0: f32[2,3,4]@groups.clients)", "(%0: f32[2]@groups.clients)",
      {"f32[2]@groups.clients", "one leading axis per placement"});
  bad("(%0: f32[2,3,4]@groups.clients)", "(%0: f32[2,3,4]@groups..clients)", {"empty level"});
  bad("(%0: f32[2,3,4]@groups.clients)", "(%0: f32[2,3,4]@groups.groups)", {"inside itself"});
  bad("(%0: f32[2,3,4]@groups.clients)", "(%0: f32[2,5,4]@groups.clients)",
      {"map_fn", "f32[5,4]@clients", "f32[3,4]@clients"});
  bad("(%0: f32[2,3,4]@groups.clients)", "(%0: f32[2,3,4]@groups)",
      {"map_fn", "f32[3,4]", "f32[3,4]@clients"});
  bad("[groups=2, clients=3]", "[groups=2, \"a.b\"=3]", {"contains '.'"});
  bad("map_fn[body=@body, placement=\"groups\"]",
      "map_fn[body=@body, placement=\"groups.clients\"]", {"map_fn", "names nested placements"});
  bad("reduce_sum[placement=\"clients\"] %0 : f32[4]",
      "reduce_sum[placement=\"groups\"] %0 : f32[4]", {"reduce_sum", "placed at 'clients'"});
}

}  // namespace
}  // namespace drx::testing
