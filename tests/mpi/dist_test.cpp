// drx/dist under mpirun (tests/mpi/CMakeLists.txt runs this on 1 to 4
// processes, with 1 or 2 device threads each): a FedAvg round, a gradient and
// a hypergradient over a placement split across the processes are bitwise
// equal to this process computing them alone, for cohorts smaller than,
// uneven over and larger than the number of processes. Each process passes
// only its own clients' rows (drx::dist::place_rows). Also: the checks of
// program and argument signatures across processes, the refusals, the
// helpers and the bytes a reduction sends.
#include "drx/dist/dist.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "drx/core/process_group.h"
#include "drx/dist/rank_clients.h"
#include "drx/exec/executable.h"
#include "drx/export/mapreduce_driver.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

dist::World& world() { return dist::world(); }

int devices_per_process() {
  const char* d = std::getenv("DRX_DIST_TEST_DEVICES");
  return d ? std::atoi(d) : 1;
}

Mesh dist_mesh() { return world().mesh("clients", devices_per_process()); }

// The placed arguments as this process passes them: its rows, padded back.
std::vector<Array> as_this_process_passes(const Program& p, const std::vector<Array>& args) {
  std::vector<Array> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const Type t = p.input_types()[i];  // input_types() returns a copy
    out.push_back(t.placement.empty()
                      ? args[i]
                      : dist::place_rows(dist::local_rows(args[i], world()), t.shape[0], world()));
  }
  return out;
}

std::vector<Array> random_inputs(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types()) args.push_back(random_array(t.shape, t.dtype, seed++));
  return args;
}

Value mlp_loss(Value w1, Value w2, Value x, Value y) {
  return mean(square(matmul(tanh(matmul(x, w1)), w2) - y));
}

// The gradient of the cohort's mean loss with respect to the server's weights.
Program gradient_ir(DType dt, int64_t clients) {
  auto f = program({{"clients", clients}},
                   [](Value w1, Value w2, Value xs, Value ys) -> std::vector<Value> {
                     auto loss = [&](Value a, Value b) {
                       return reduce_mean(map_fn(mlp_loss, broadcast(a), broadcast(b), xs, ys));
                     };
                     std::vector<Value> g = grad(loss, {0, 1})(w1, w2);
                     return {loss(w1, w2), g[0], g[1]};
                   },
                   {"", "", "clients", "clients"});
  return simplify(trace(
      f, {Type(dt, {5, 6}), Type(dt, {6, 2}), Type(dt, {clients, 7, 5}), Type(dt, {clients, 7, 2})},
      "gradient"));
}

// The hypergradient: d(loss after a round of 2 local steps)/d(client learning rate), and the
// gradient of the same with respect to the weights.
Program hypergradient_ir(int64_t clients) {
  auto f = program({{"clients", clients}},
                   [](Value w1, Value w2, Value lr, Value xs, Value ys) -> std::vector<Value> {
                     auto after_round = [&](Value a, Value b, Value eta) {
                       std::vector<Value> delta = map_fn(
                           [](Value ai, Value bi, Value e, Value x, Value y) -> std::vector<Value> {
                             Value u = ai, v = bi;
                             for (int k = 0; k < 2; ++k) {
                               std::vector<Value> g = grad(mlp_loss, {0, 1})(u, v, x, y);
                               u = u - e * g[0];
                               v = v - e * g[1];
                             }
                             return {ai - u, bi - v};
                           },
                           broadcast(a), broadcast(b), broadcast(eta), xs, ys);
                       Value a1 = a - reduce_mean(delta[0]), b1 = b - reduce_mean(delta[1]);
                       return reduce_mean(map_fn(mlp_loss, broadcast(a1), broadcast(b1), xs, ys));
                     };
                     std::vector<Value> g = grad(after_round, {0, 2})(w1, w2, lr);
                     return {g[0], g[1]};
                   },
                   {"", "", "", "clients", "clients"});
  return simplify(trace(f,
                        {Type(f32, {5, 6}), Type(f32, {6, 2}), Type(f32, {}),
                         Type(f32, {clients, 7, 5}), Type(f32, {clients, 7, 2})},
                        "hypergradient"));
}

const int64_t kCohorts[] = {1, 2, 5, 7, 13};

TEST(Dist, GradientIsBitwiseThatOfOneProcess) {
  for (DType dt : {f32, f64})
    for (int64_t clients : kCohorts) {
      Program p = gradient_ir(dt, clients);
      std::vector<Array> args = random_inputs(p, 7 + static_cast<uint64_t>(clients));
      std::vector<Array> alone = compile(p).run(args);
      std::vector<Array> spread = compile(p, dist_mesh()).run(as_this_process_passes(p, args));
      EXPECT_TRUE(BitwiseEqual(spread, alone))
          << dtype_name(dt) << ", " << clients << " clients on " << world().size() << " x "
          << devices_per_process();
    }
}

TEST(Dist, HypergradientIsBitwiseThatOfOneProcess) {
  for (int64_t clients : kCohorts) {
    Program p = hypergradient_ir(clients);
    std::vector<Array> args = random_inputs(p, 3 + static_cast<uint64_t>(clients));
    args[2] = Array::scalar(0.3f);
    std::vector<Array> alone = compile(p).run(args);
    std::vector<Array> spread = compile(p, dist_mesh()).run(as_this_process_passes(p, args));
    EXPECT_TRUE(BitwiseEqual(spread, alone)) << clients << " clients on " << world().size();
  }
}

// The round drx fedavg runs (optim::fedavg_round: an MLP, client SGD with momentum, FedAdam),
// jitted: the clients gather their batches from the replicated dataset by their placed indices.
TEST(Dist, FedAvgRoundIsBitwiseThatOfOneProcess) {
  for (int64_t cohort : kCohorts) {
    optim::RoundSpec spec;
    spec.client = {0.1, 0.9};
    spec.server.kind = optim::ServerKind::fedadam;
    spec.server.lr = 0.01;
    spec.cohort = cohort;
    spec.steps = 3;
    spec.batch = 4;
    const Tree params = nn::mlp_init({6, 8, 3}, 11);
    const Tree state = spec.server.init(params);
    const Array x = random_array({40, 6}, f32, 1);
    const Array y = random_array({40}, i32, 2, 0, 3);
    const Array idx = random_array({cohort, 3, 4}, i32, 3, 0, 40);
    Array mask = random_array({cohort, 3, 4}, f32, 4, 0, 1);
    for (int64_t i = 0; i < mask.size(); ++i) mask.data<float>()[i] = mask.data<float>()[i] < 0.8f;
    const Array weights = random_array({cohort}, f32, 5, 1, 9);

    Tree alone = jit(optim::fedavg_round(spec))(params, state, x, y, idx, mask, weights);
    auto mine = [&](const Array& a) {
      return dist::place_rows(dist::local_rows(a, world()), cohort, world());
    };
    Tree spread = jit(optim::fedavg_round(spec), dist_mesh())(params, state, x, y, mine(idx),
                                                              mine(mask), mine(weights));
    std::vector<Array> a, s;
    for (const Tree& l : tree_leaves(alone)) a.push_back(l.array());
    for (const Tree& l : tree_leaves(spread)) s.push_back(l.array());
    EXPECT_TRUE(BitwiseEqual(s, a)) << cohort << " clients on " << world().size();
  }
}

Array iota_array(int64_t n) {
  Array a(f32, {n});
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = static_cast<float>(i);
  return a;
}

TEST(Dist, ProcessesCallingDifferentProgramsAreToldAtTheCall) {
  auto sum_of = [](int64_t clients) {
    return program({{"clients", clients}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  };
  auto f = jit(sum_of(4), dist_mesh());
  // Every process passes 4 clients: fine, every time.
  EXPECT_EQ(f(iota_array(4)).item<float>(), 6.0f);
  if (world().size() == 1) return;
  // Rank 1 calls a program over 5 clients: every process learns of it, and no collective
  // pairs up wrongly.
  auto g = jit(sum_of(world().rank() == 1 ? 5 : 4), dist_mesh());
  try {
    g(iota_array(world().rank() == 1 ? 5 : 4));
    ADD_FAILURE() << "no error on rank " << world().rank();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the processes disagree on the jitted program"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f(iota_array(4)).item<float>(), 6.0f);  // and they carry on
}

TEST(Dist, ReductionsWithoutAKernelAreRefusedAcrossProcesses) {
  auto p = program({{"clients", 3}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  Program ir = simplify(trace(p, {Type(f16, {3, 2})}));
  try {
    compile(ir, dist_mesh());
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run across the processes"), std::string::npos)
        << e.what();
  }
}

TEST(Dist, ReductionsSendBytesOfTheModelSizeWhateverTheProcesses) {
  const int64_t width = 4096, clients = 16;
  auto p = program({{"clients", clients}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  Program ir = simplify(trace(p, {Type(f32, {clients, width})}));
  Executable exe = compile(ir, dist_mesh());
  const Array x = random_array({clients, width}, f32, 9);
  std::vector<Array> in = as_this_process_passes(ir, {x});
  const uint64_t before = world().bytes_sent();
  EXPECT_TRUE(BitwiseEqual(exe.run(in), compile(ir).run({x})));
  const uint64_t sent = world().bytes_sent() - before;
  // The partial tree of 16 / P clients has at most 2 log2(16) blocks; each goes out once, cut
  // into P element ranges, and so does the result: (blocks + 1) rows, plus headers.
  const uint64_t row = width * sizeof(float);
  EXPECT_LE(sent, 9 * row + 1024) << world().size() << " processes";
  if (world().size() == 1) {
    EXPECT_EQ(sent, 0u);
  }
}

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long kib = 0;
  while (status >> key)
    if (key == "VmRSS:") return (status >> kib, kib);
  return 0;
}

// A placed argument has the whole placement's shape, but a rank fills (and keeps resident)
// only its own rows: the others stay unwritten zero pages.
TEST(Dist, PlacedArgumentsHoldOnlyThisRanksRows) {
  const int64_t clients = 64, width = 262144;  // 1 MiB a client
  const auto [first, end] = world().clients(clients);
  Array mine(f32, {end - first, width});
  for (int64_t i = 0; i < mine.size(); ++i) mine.data<float>()[i] = 1.0f;
  const long before = resident_kib();
  const Array placed = dist::place_rows(mine, clients, world());
  const double grew_mib = static_cast<double>(resident_kib() - before) / 1024;
  EXPECT_LE(grew_mib, static_cast<double>(end - first) + 2) << "of " << clients << " MiB";
  auto p = program({{"clients", clients}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  const Array sum = jit(p, dist_mesh())(placed);
  EXPECT_EQ(sum.data<float>()[0], 64.0f);
  EXPECT_EQ(sum.data<float>()[width - 1], 64.0f);
}

TEST(Dist, BroadcastMinAndRows) {
  const std::string got = world().broadcast(world().is_root() ? "from rank 0" : "x", "a test");
  EXPECT_EQ(got, "from rank 0");
  EXPECT_EQ(world().min(10 + world().rank(), "a test"), 10);
  world().barrier("a test");
  const Array all = random_array({7, 3}, f32, 1);
  const auto [first, end] = world().clients(7);
  const Array mine = dist::local_rows(all, world());
  ASSERT_EQ(mine.shape(), (Shape{end - first, 3}));
  const Array back = dist::place_rows(mine, 7, world());
  for (int64_t c = 0; c < 7; ++c)
    for (int64_t k = 0; k < 3; ++k)
      EXPECT_EQ(back.data<float>()[c * 3 + k],
                c >= first && c < end ? all.data<float>()[c * 3 + k] : 0.0f);
  EXPECT_THROW(dist::place_rows(random_array({end - first + 1, 3}, f32, 1), 7, world()), Error);
  EXPECT_THROW(world().set_timeout_s(0), Error);
}

// Each rank holds a value whose own rows are 100 * rank + row and whose other rows are junk:
// rank 0 gathers every rank's own rows; keep_rows keeps a rank's own and zeroes the rest.
TEST(Dist, GatherAndKeepRows) {
  const int64_t slots = 7;
  const auto [first, end] = world().clients(slots);
  Array held(i32, {slots, 2});
  for (int64_t c = 0; c < slots; ++c)
    for (int64_t k = 0; k < 2; ++k)
      held.data<int32_t>()[c * 2 + k] =
          c >= first && c < end ? static_cast<int32_t>(100 * world().rank() + 10 * c + k) : -1;
  const Array gathered = dist::gather_rows(held, world(), "a test");
  for (int64_t c = 0; c < slots; ++c)
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t owner = [&] {
        for (int r = 0; r < world().size(); ++r)
          if (client_range(slots, r, world().size()).second > c) return r;
        return -1;
      }();
      const int32_t expected = world().is_root() ? static_cast<int32_t>(100 * owner + 10 * c + k)
                                                 : held.data<int32_t>()[c * 2 + k];
      EXPECT_EQ(gathered.data<int32_t>()[c * 2 + k], expected) << "row " << c;
      EXPECT_EQ(dist::keep_rows(held, {first, end}).data<int32_t>()[c * 2 + k],
                c >= first && c < end ? held.data<int32_t>()[c * 2 + k] : 0);
    }
  EXPECT_THROW(dist::gather_rows(Array(f32, {}), world(), "a scalar"), Error);
}

// The MapReduce driver's clients spread over the processes (drx/dist/rank_clients.h): each
// process runs only its own block of clients, keeps their state, and every process gets the bits
// of one process running all of them.
class RecordingExecutor : public ClientExecutor {
 public:
  explicit RecordingExecutor(ClientExecutor& inner) : inner_(inner) {}
  void run(const ClientStage& stage, int64_t begin, int64_t end, ClientOutputs& outputs) override {
    ranges.emplace_back(begin, end);
    inner_.run(stage, begin, end, outputs);
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;

 private:
  ClientExecutor& inner_;
};

TEST(Dist, MapReduceDriverOverRanksIsBitwiseThatOfOneProcess) {
  for (int64_t clients : {1, 3, 5}) {
    auto f = program(
        {{"clients", clients}},
        [](Value w, Value x) {
          Value local = map_fn([](Value a, Value b) { return tanh(a * b) + 0.1; }, broadcast(w), x);
          Value m = reduce_mean(local);
          Value gap = map_fn([](Value l, Value g) { return sum(square(l - g)); }, local,
                             broadcast(m));  // the clients' own `local`: client state
          return std::vector<Value>{m, reduce_sum(gap), reduce_max(gap)};
        },
        {"", "clients"});
    const Program p = trace(f, {Type(f64, {3}), Type(f64, {clients, 3})});
    const std::vector<Array> args = {random_array({3}, f64, 1), random_array({clients, 3}, f64, 2)};
    const MapReduceForm form = mapreduce_form(p);
    ASSERT_EQ(form.stages.size(), 2u);
    std::map<std::string, Array> server;
    for (size_t k = 0; k < form.inputs.size(); ++k)
      if (!form.client_data.count(form.inputs[k])) server[form.inputs[k]] = args[k];
    InProcessClientExecutor alone(form, args), here(form, args);
    RecordingExecutor mine(here);
    dist::RankClientExecutor ranks(world(), mine);
    const std::vector<Array> spread = run_mapreduce(form, server, ranks, {.clients_per_call = 2});
    EXPECT_TRUE(BitwiseEqual(spread, run_mapreduce(form, server, alone)))
        << clients << " clients on " << world().size();
    const auto [first, end] = world().clients(clients);
    for (const auto& [b, e] : mine.ranges) {
      EXPECT_GE(b, first) << "rank " << world().rank();
      EXPECT_LE(e, end) << "rank " << world().rank();
    }
  }
}

}  // namespace
}  // namespace drx::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  drx::dist::init(argc, argv);
  return RUN_ALL_TESTS();
}
