// Writes the seed corpora under fuzz/corpus/ (run: build-fuzz/make_seeds fuzz/corpus).
// Seeds are generated rather than hand-written so that they stay valid as the printed syntax
// and the checkpoint layout evolve: re-run this after such a change and commit the result.
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "drx/drx.h"
#include "tools/fedavg/checkpoint.h"

namespace {

using drx::Array;
using drx::Type;
using drx::Value;
using Values = std::vector<Value>;

Type f32t(drx::Shape s) { return Type(drx::f32, std::move(s)); }

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) throw drx::Error("make_seeds: cannot write " + path);
  std::cout << path << " (" << bytes.size() << " bytes)\n";
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb9");
  if (!f ||
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
          static_cast<int>(bytes.size()) ||
      gzclose(f) != Z_OK)
    throw drx::Error("make_seeds: cannot write " + path);
  std::cout << path << " (gzip)\n";
}

// Small programs that together use every family of primitives, so the fuzzer starts from
// text that reaches the type rules and kernels, not just the tokenizer.
void program_seeds(const std::string& dir) {
  struct Seed {
    std::string name;
    std::function<Values(const Values&)> fn;
    std::vector<Type> types;
  };
  std::vector<Seed> seeds;
  seeds.push_back(
      {"constants",
       [](const Values& a) -> Values {
         Value c = drx::constant(Array::from_vector<float>({1.5f, -0.0f, 1e-45f, 3.4e38f}, {2, 2}));
         Value ci = drx::constant(Array::from_vector<int32_t>({-7, 7}, {2}));
         Value cb = drx::constant(Array::from_vector<bool>({true, false}, {2}));
         return {a[0] + c,
                 ci,
                 cb,
                 drx::iota({2, 3}, 1, drx::i64),
                 drx::arange(4, drx::f32),
                 drx::fill({2}, 0.25, drx::f64),
                 drx::zeros_like(a[0]),
                 drx::ones_like(a[0])};
       },
       {f32t({2, 2})}});
  seeds.push_back({"unary",
                   [](const Values& a) -> Values {
                     Value x = a[0], p = drx::abs(x) + 1.0;
                     return {drx::neg(x),   drx::exp(x),           drx::log(p),
                             drx::log1p(p), drx::tanh(x),          drx::logistic(x),
                             drx::sqrt(p),  drx::rsqrt(p),         drx::sign(x),
                             drx::sin(x),   drx::cos(x),           drx::square(x),
                             drx::relu(x),  drx::stop_gradient(x), drx::astype(x, drx::i32)};
                   },
                   {f32t({2, 3})}});
  seeds.push_back({"binary",
                   [](const Values& a) -> Values {
                     Value x = a[0], y = a[1];
                     Value c = drx::less(x, y);
                     return {x + y,
                             x - y,
                             x * y,
                             x / y,
                             drx::pow(drx::abs(x), y),
                             drx::maximum(x, y),
                             drx::minimum(x, 0.5),
                             drx::where(c, x, y),
                             drx::astype(drx::less_equal(x, y), drx::f32),
                             drx::astype(drx::greater(x, y), drx::f32),
                             drx::astype(drx::greater_equal(x, y), drx::f32),
                             drx::astype(drx::equal(x, y), drx::i32),
                             drx::astype(drx::not_equal(x, y), drx::f64)};
                   },
                   {f32t({3}), f32t({3})}});
  seeds.push_back(
      {"integers",
       [](const Values& a) -> Values {
         Value i = a[0], j = a[1];
         return {i + j, i * j, i - j, drx::maximum(i, j), drx::sum(i), drx::astype(i, drx::f64)};
       },
       {Type(drx::i32, {4}), Type(drx::i32, {4})}});
  seeds.push_back({"reductions",
                   [](const Values& a) -> Values {
                     Value x = a[0];
                     return {drx::sum(x, {1}),       drx::mean(x, {-1}),     drx::max(x, {0}),
                             drx::min(x, {1}, true), drx::logsumexp(x, {1}), drx::softmax(x, 1),
                             drx::log_softmax(x, 0), drx::sum(x, {0}, true)};
                   },
                   {f32t({3, 4})}});
  seeds.push_back({"linalg",
                   [](const Values& a) -> Values {
                     drx::DotDims d{{1}, {1}, {0}, {0}};
                     return {drx::matmul(a[0], a[1]), drx::dot_general(a[2], a[2], d)};
                   },
                   {f32t({2, 3}), f32t({3, 4}), f32t({2, 3, 2})}});
  seeds.push_back({"shape",
                   [](const Values& a) -> Values {
                     Value x = a[0];
                     return {drx::reshape(x, {3, 2}),
                             drx::transpose(x, {1, 0}),
                             drx::broadcast_to(a[1], {2, 3}),
                             drx::broadcast_in_dim(a[1], {3, 2}, {0}),
                             drx::squeeze(drx::expand_dims(x, 0), 0),
                             drx::concatenate({x, x}, 1),
                             drx::slice(x, {0, 1}, {2, 3})};
                   },
                   {f32t({2, 3}), f32t({3})}});
  seeds.push_back({"indexing",
                   [](const Values& a) -> Values {
                     Value idx = a[1];
                     return {drx::take(a[0], idx, 1), drx::scatter_add(a[0], idx, a[2], 1),
                             drx::one_hot(idx, 4, drx::f64)};
                   },
                   {f32t({2, 3}), Type(drx::i32, {3}), f32t({2, 3})}});
  seeds.push_back({"grad",
                   [](const Values& a) -> Values {
                     auto loss = [](Value w, Value x) -> Value {
                       return drx::sum(drx::log_softmax(drx::matmul(x, w), -1));
                     };
                     return {drx::grad(loss)(a[0], a[1])};
                   },
                   {f32t({3, 2}), f32t({2, 3})}});
  seeds.push_back(
      {"mapreduce",
       [](const Values& a) -> Values {
         auto round = drx::program(
             {{"clients", 3}},
             [](Value w, Value xs) -> Values {
               Value local = drx::map_fn([](Value wi, Value xi) { return drx::tanh(wi * xi); },
                                         drx::broadcast(w), xs);
               return {drx::reduce_sum(local), drx::reduce_mean(local), drx::reduce_max(local),
                       drx::reduce_min(local), drx::place(local, "")};
             },
             {"", "clients"});
         return round(a[0], a[1]);
       },
       {f32t({2}), f32t({3, 2})}});
  seeds.push_back({"nested_placements",
                   [](const Values& a) -> Values {
                     auto round = drx::program(
                         {{"groups", 2}, {"clients", 3}},
                         [](Value w, Value xs) -> Values {
                           auto loss = [&](Value v) {
                             Value per_group = drx::map_fn(
                                 [](Value wg, Value xg) {
                                   Value local = drx::map_fn(
                                       [](Value wi, Value xi) { return drx::tanh(wi * xi); },
                                       drx::broadcast(wg, "clients"), xg);
                                   return drx::reduce_mean(local);
                                 },
                                 drx::broadcast(v, "groups"), xs);
                             return drx::sum(drx::reduce_sum(per_group));
                           };
                           return {loss(w), drx::grad(loss)(w)};
                         },
                         {"", "groups.clients"});
                     return round(a[0], a[1]);
                   },
                   {f32t({2}), f32t({2, 3, 2})}});
  seeds.push_back({"cond",
                   [](const Values& a) -> Values {
                     Value y = a[1] * 2.0;
                     drx::Tree r = drx::cond(
                         drx::greater(drx::sum(a[0]), drx::scalar_like(a[0], 0.0)),
                         [&](const drx::Tree& t) { return drx::Tree(drx::exp(t.value()) + y); },
                         [](const drx::Tree& t) { return drx::Tree(-t.value()); }, drx::Tree(a[0]));
                     return {r.value()};
                   },
                   {f32t({3}), f32t({3})}});
  seeds.push_back(
      {"loops",
       [](const Values& a) -> Values {
         Value w = a[1];
         auto [c, ys] = drx::scan(
             [&](const drx::Tree& h, const drx::Tree& x) -> std::pair<drx::Tree, drx::Tree> {
               Value n = drx::tanh(h.value() * w + x.value());
               return {drx::Tree(n), drx::Tree(n * 2.0)};
             },
             drx::Tree(a[1]), drx::Tree(a[0]), drx::ScanOptions{.reverse = true});
         drx::Tree l = drx::while_loop(
             [](const drx::Tree& h) {
               return drx::less(drx::sum(h.value()), drx::scalar_like(drx::sum(h.value()), 50.0));
             },
             [](const drx::Tree& h) { return drx::Tree(h.value() * 2.0 + 1.0); }, c);
         return {ys.value(), l.value()};
       },
       {f32t({4, 3}), f32t({3})}});
  for (const Seed& s : seeds)
    write(dir + "/" + s.name + ".drx", drx::to_string(drx::trace(s.fn, s.types, s.name)));

  // What the printer never emits but the parser accepts: comments, free layout, sparse ids,
  // quoted names and placements.
  write(dir + "/handwritten.drx",
        "// comments and free layout\n"
        "program @main (%7: f32[2,3]) -> (f32[2]) {\n"
        "  %1 = iota[dimension=1, dtype=f32, shape=[2,3]] : f32[2,3]\n"
        "  %20 = mul %7, %1 : f32[2,3]\n"
        "  %3 = sum[axes=[1]] %20 : f32[2]\n"
        "  %4 = constant[value=f32[]{0.5}] : f32[]\n"
        "  %5 = broadcast_in_dim[dims=[], shape=[2]] %4 : f32[2]\n"
        "  %6 = add %3, %5 : f32[2]\n"
        "  return %6\n"
        "}\n");
  // Edges where sizes are computed: empty types, and dims at the parser's 2^53 bound (these
  // parse and verify, but are too large for the harness to run).
  write(dir + "/zero_size.drx",
        "program @zero (%0: f32[0,3], %1: i32[0]) -> (f32[3], f32[3,0], f32[0,0], f32[3,0,1], "
        "f32[0,6]) {\n"
        "  %2 = sum[axes=[0]] %0 : f32[3]\n"
        "  %3 = transpose[perm=[1,0]] %0 : f32[3,0]\n"
        "  %4 = take[axis=1] %0, %1 : f32[0,0]\n"
        "  %5 = reshape[shape=[3,0,1]] %0 : f32[3,0,1]\n"
        "  %6 = concatenate[axis=1] %0, %0 : f32[0,6]\n"
        "  return %2, %3, %4, %5, %6\n"
        "}\n");
  write(dir + "/large_dims.drx",
        "program @large (%0: f32[0,9007199254740992], %1: f32[9007199254740992]) -> "
        "(f32[9007199254740992,0], f32[1,9007199254740992]) {\n"
        "  %2 = transpose[perm=[1,0]] %0 : f32[9007199254740992,0]\n"
        "  %3 = reshape[shape=[1,9007199254740992]] %1 : f32[1,9007199254740992]\n"
        "  return %2, %3\n"
        "}\n");
  write(dir + "/placements.drx",
        "program @\"weird name\" [clients=8, groups=2] (%0: f32[8,3]@clients) -> "
        "(f32[8,3]@clients) {\n  return %0\n}\n");
}

// Checkpoints with every tree kind and dtype, plus one cut short so the fuzzer also starts
// inside the error paths.
void checkpoint_seeds(const std::string& dir) {
  namespace fa = drx::tool::fedavg;
  fa::Checkpoint empty;
  empty.params = drx::Tree::list({});
  empty.state = drx::Tree::list({});
  write(dir + "/empty.ckpt", fa::encode_checkpoint(empty));

  fa::Checkpoint c;
  c.config = {{"clients", "100"}, {"lr", "0.1"}, {"server-opt", "fedadam"}};
  c.round = 3;
  c.params =
      drx::Tree::dict({{"b", drx::Tree(Array::from_vector<float>({0.5f, -1.0f, 2.0f}, {3}))},
                       {"w", drx::Tree(Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}))}});
  c.state = drx::Tree::list(
      {drx::Tree::dict({{"m", drx::Tree(Array::from_vector<double>({0.1, 0.2, 0.3}, {3}))}}),
       drx::Tree(Array::scalar<int64_t>(7))});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.history = {{1, 2.3, nan, nan, 0.5}, {2, 1.9, 1.7, 0.41, 1.1}, {3, 1.5, nan, nan, 1.6}};
  const std::string typical = fa::encode_checkpoint(c);
  write(dir + "/typical.ckpt", typical);
  write(dir + "/truncated.ckpt", typical.substr(0, typical.size() / 2));

  fa::Checkpoint dtypes;
  dtypes.config = {{"partition", "dirichlet"}};
  dtypes.round = 650;
  dtypes.params = drx::Tree::list(
      {drx::Tree(Array::from_vector<int32_t>({-1, 0, 1}, {3, 1})),
       drx::Tree(Array::from_vector<bool>({true, false}, {2})), drx::Tree(Array(drx::f32, {0, 3})),
       drx::Tree::list({drx::Tree::list({drx::Tree(Array::scalar<double>(1e300))})})});
  dtypes.state = drx::Tree::dict({});
  write(dir + "/dtypes.ckpt", fa::encode_checkpoint(dtypes));
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

void idx_seeds(const std::string& dir) {
  std::string images = be32(0x00000803) + be32(2) + be32(3) + be32(3);
  for (int i = 0; i < 18; ++i) images += static_cast<char>(i * 15);
  std::string labels = be32(0x00000801) + be32(4) + std::string("\x00\x09\x03\x05", 4);
  write(dir + "/images.idx", images);
  write(dir + "/labels.idx", labels);
  write_gz(dir + "/images.idx.gz", images);
  write_gz(dir + "/labels.idx.gz", labels);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr
        << "usage: make_seeds CORPUS_DIR   (writes CORPUS_DIR/{program_text,checkpoint,idx})\n";
    return 2;
  }
  const std::string root = argv[1];
  try {
    program_seeds(root + "/program_text");
    checkpoint_seeds(root + "/checkpoint");
    idx_seeds(root + "/idx");
  } catch (const drx::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
