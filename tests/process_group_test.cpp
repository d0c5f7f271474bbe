// The executor's side of a mesh axis that spans processes (drx/core/
// process_group.h), without MPI: P threads play P processes, each compiling
// and running the program on its own view of the mesh, passing only its own
// clients' rows, over an in-memory group that combines the partial
// reductions in rank order. Every "process" gets the bits of one process
// alone, fused and unfused, on 1 and 2 devices each (drx/dist's MPI group is
// tested under mpirun in tests/mpi). Under ASan, UBSan and TSan in CI.
#include "drx/core/process_group.h"

#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "drx/exec/executable.h"
#include "drx/export/stablehlo.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

// What the P threads post, seen by all once every one has posted.
class Board {
 public:
  explicit Board(int size) : size_(size) {}

  // Posts `bytes` as `rank`'s and returns every rank's of the same exchange, in rank order.
  std::vector<std::string> exchange(int rank, std::string bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t n = count_[rank]++;
    Exchange& x = exchanges_[n];
    x.posts.resize(static_cast<size_t>(size_));
    x.posts[static_cast<size_t>(rank)] = std::move(bytes);
    ++x.arrived;
    cv_.notify_all();
    cv_.wait(lock, [&] { return x.arrived == size_; });
    return x.posts;
  }

 private:
  struct Exchange {
    std::vector<std::string> posts;
    int arrived = 0;
  };
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, uint64_t> count_;
  std::map<uint64_t, Exchange> exchanges_;
};

class ThreadsAsProcesses : public ProcessGroup {
 public:
  ThreadsAsProcesses(std::shared_ptr<Board> board, int rank, int size)
      : board_(std::move(board)), rank_(rank), size_(size) {}
  int size() const override { return size_; }
  int rank() const override { return rank_; }

  void reduce(const RowReducer& partial, void* out, const std::string&) const override {
    const size_t row = static_cast<size_t>(partial.width()) * partial.element_bytes();
    std::string mine;
    for (size_t b = 0; b < partial.blocks(); ++b) {
      const RowReducer::Block k = partial.block(b);
      mine.append(reinterpret_cast<const char*>(&k), sizeof k);
      mine.append(static_cast<const char*>(partial.block_row(b)), row);
    }
    std::unique_ptr<RowReducer> all = partial.empty_like();
    for (const std::string& m : board_->exchange(rank_, mine))
      for (size_t at = 0; at < m.size(); at += sizeof(RowReducer::Block) + row) {
        RowReducer::Block k;
        std::memcpy(&k, m.data() + at, sizeof k);
        all->push_block(k, m.data() + at + sizeof k);
      }
    all->finish(out);
  }

  void check_same(const std::string& what, const std::string& fingerprint) const override {
    for (const std::string& f : board_->exchange(rank_, fingerprint))
      if (f != fingerprint) throw Error("the processes disagree on " + what);
  }

 private:
  std::shared_ptr<Board> board_;
  int rank_, size_;
};

// Runs fn(rank, mesh of that rank) on `size` threads at once.
void as_processes(int size, int devices, const std::function<void(int, const Mesh&)>& fn) {
  auto board = std::make_shared<Board>(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      fn(r, Mesh({{"clients", devices}}, "clients",
                 std::make_shared<ThreadsAsProcesses>(board, r, size)));
    });
  for (std::thread& t : threads) t.join();
}

// The rows `rank` holds of each placed argument; the others' are 0.
std::vector<Array> own_rows(const Program& p, std::vector<Array> args, int rank, int size) {
  for (size_t i = 0; i < args.size(); ++i) {
    const Type t = p.input_types()[i];  // input_types() returns a copy
    if (t.placement.empty()) continue;
    const int64_t n = t.shape[0];
    const size_t row = args[i].nbytes() / static_cast<size_t>(n);
    Array mine(args[i].dtype(), args[i].shape());
    std::memset(mine.raw(), 0, mine.nbytes());
    const int64_t first = n * rank / size, end = n * (rank + 1) / size;
    std::memcpy(static_cast<char*>(mine.raw()) + static_cast<size_t>(first) * row,
                static_cast<const char*>(args[i].raw()) + static_cast<size_t>(first) * row,
                static_cast<size_t>(end - first) * row);
    args[i] = mine;
  }
  return args;
}

Value loss(Value w, Value x, Value y) { return mean(square(sum(sin(matmul(x, w)), {1}) - y)); }

// A round of 2 local steps and its hypergradient in the learning rate, with max and min
// reductions besides means.
Program round_and_hypergradient(int64_t clients) {
  auto f = program({{"clients", clients}},
                   [](Value w, Value lr, Value xs, Value ys) -> std::vector<Value> {
                     auto round = [&](Value v, Value eta) -> std::vector<Value> {
                       std::vector<Value> r = map_fn(
                           [](Value wi, Value e, Value x, Value y) -> std::vector<Value> {
                             Value u = wi;
                             for (int k = 0; k < 2; ++k) u = u - e * grad(loss)(u, x, y);
                             return {wi - u, loss(u, x, y)};
                           },
                           broadcast(v), broadcast(eta), xs, ys);
                       return {v - reduce_mean(r[0]), reduce_max(r[1]), reduce_min(r[0])};
                     };
                     std::vector<Value> r = round(w, lr);
                     Value hyper = grad([&](Value eta) {
                       return reduce_mean(map_fn(loss, broadcast(round(w, eta)[0]), xs, ys));
                     })(lr);
                     return {r[0], r[1], r[2], hyper};
                   },
                   {"", "", "clients", "clients"});
  return simplify(trace(
      f, {Type(f32, {4, 3}), Type(f32, {}), Type(f32, {clients, 6, 4}), Type(f32, {clients, 6})}));
}

TEST(ThreadsAsProcesses, EveryProcessGetsTheBitsOfOneProcess) {
  for (int64_t clients : {1, 5, 13}) {
    const Program p = round_and_hypergradient(clients);
    std::vector<Array> args;
    for (size_t i = 0; i < p.input_types().size(); ++i)
      args.push_back(random_array(p.input_types()[i].shape, f32, 40 + i));
    args[1] = Array::scalar(0.2f);
    const std::vector<Array> alone = compile(p).run(args);
    for (bool fused : {true, false})
      for (int size : {2, 3})
        for (int devices : {1, 2}) {
          CompileOptions options;
          options.chunk_map_reduce = fused;
          std::vector<std::vector<Array>> got(static_cast<size_t>(size));
          as_processes(size, devices, [&](int rank, const Mesh& mesh) {
            got[static_cast<size_t>(rank)] =
                compile(p, mesh, options).run(own_rows(p, args, rank, size));
          });
          for (int r = 0; r < size; ++r)
            EXPECT_TRUE(BitwiseEqual(got[static_cast<size_t>(r)], alone))
                << clients << " clients, rank " << r << " of " << size << " x " << devices
                << (fused ? "" : ", unfused");
        }
  }
}

// Top-level equations on placed values (a weighted mean's products, a softmax over the
// clients) run on every row, the others' zeros included; only the process's own rows reach
// the reductions.
TEST(ThreadsAsProcesses, TopLevelWorkOnPlacedValuesKeepsTheBits) {
  for (int64_t clients : {3, 8, 11}) {
    auto f =
        program({{"clients", clients}},
                [](Value x, Value w) -> std::vector<Value> {
                  Value score = map_fn([](Value xi) { return sum(xi); }, x);
                  return {reduce_weighted_mean(x, w), reduce_sum(placement_softmax(score) * w)};
                },
                {"clients", "clients"});
    const Program p = simplify(trace(f, {Type(f64, {clients, 3}), Type(f64, {clients})}));
    const std::vector<Array> args = {random_array({clients, 3}, f64, 5),
                                     random_array({clients}, f64, 6, 0.5, 2)};
    const std::vector<Array> alone = compile(p).run(args);
    for (int size : {2, 3}) {
      std::vector<std::vector<Array>> got(static_cast<size_t>(size));
      as_processes(size, 2, [&](int rank, const Mesh& mesh) {
        got[static_cast<size_t>(rank)] = compile(p, mesh).run(own_rows(p, args, rank, size));
      });
      for (int r = 0; r < size; ++r)
        EXPECT_TRUE(BitwiseEqual(got[static_cast<size_t>(r)], alone))
            << clients << " clients, rank " << r << " of " << size;
    }
  }
}

TEST(ThreadsAsProcesses, MeshesNameTheirProcessesAndClientWorkRunsInProcess) {
  auto group = std::make_shared<ThreadsAsProcesses>(std::make_shared<Board>(3), 1, 3);
  const Mesh m({{"clients", 2}, {"model", 4}}, "clients", group);
  EXPECT_EQ(m.str(), "{clients: 2 x 3 processes, model: 4}");
  EXPECT_EQ(m.processes("clients"), group.get());
  EXPECT_EQ(m.processes("model"), nullptr);
  EXPECT_EQ(m.process_group(), group.get());
  EXPECT_EQ(m.in_process().str(), "{clients: 2, model: 4}");
  EXPECT_EQ(m.in_process().process_group(), nullptr);
  EXPECT_EQ(m.global().str(), "{clients: 6, model: 4}");
  // Exported, the program names every process's devices as one mesh.
  auto p = program({{"clients", 12}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  const std::string mlir = to_stablehlo(simplify(trace(p, {Type(f32, {12, 2})})), m);
  EXPECT_NE(mlir.find("sdy.mesh @mesh = <[\"clients\"=6, \"model\"=4]>"), std::string::npos)
      << mlir;
  EXPECT_NE(mlir.find("mhlo.num_partitions = 24"), std::string::npos) << mlir;
  EXPECT_EQ(group->clients_of(1, 10), (std::pair<int64_t, int64_t>{3, 6}));
  EXPECT_THROW(Mesh({{"clients", 2}}, "model", group), Error);
  EXPECT_THROW(Mesh({{"clients", 2}}, "clients", nullptr), Error);
}

TEST(ThreadsAsProcesses, MeshesAreEqualByStructureAndProcessGroupNotByTheirText) {
  auto board = std::make_shared<Board>(2);
  auto a = std::make_shared<ThreadsAsProcesses>(board, 0, 2);
  auto b = std::make_shared<ThreadsAsProcesses>(board, 0, 2);
  const Mesh over_a({{"clients", 2}}, "clients", a), over_b({{"clients", 2}}, "clients", b);
  // Both print alike; they are different processes.
  ASSERT_EQ(over_a.str(), over_b.str());
  EXPECT_FALSE(over_a == over_b);
  EXPECT_NE(over_a.key(), over_b.key());
  const Mesh copy = over_a;
  EXPECT_TRUE(copy == over_a);
  EXPECT_EQ(copy.key(), over_a.key());
  EXPECT_TRUE(Mesh({{"clients", 2}}) == Mesh({{"clients", 2}}));
  EXPECT_FALSE(Mesh({{"clients", 2}}) == Mesh({{"clients", 4}}));
  EXPECT_FALSE(Mesh({{"clients", 2}, {"model", 2}}) == Mesh({{"model", 2}, {"clients", 2}}));
  EXPECT_FALSE(over_a == over_a.in_process());
}

TEST(ThreadsAsProcesses, JitChecksEveryCallThatTheProcessesRunOneProgram) {
  auto sum_of = [](int64_t clients) {
    return program({{"clients", clients}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  };
  std::vector<std::string> errors(2);
  as_processes(2, 1, [&](int rank, const Mesh& mesh) {
    auto same = jit(sum_of(4), mesh);
    const Array x = Array::from_vector<float>({1, 2, 3, 4}, {4});
    EXPECT_EQ(same(own_rows(trace(sum_of(4), {Type(f32, {4})}), {x}, rank, 2)[0]).item<float>(),
              10.0f);
    auto differ = jit(sum_of(rank == 1 ? 5 : 4), mesh);
    try {
      differ(rank == 1 ? Array::from_vector<float>({1, 2, 3, 4, 5}, {5}) : x);
    } catch (const Error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  });
  for (const std::string& e : errors)
    EXPECT_NE(e.find("the processes disagree on the jitted program"), std::string::npos) << e;
}

TEST(ThreadsAsProcesses, ReductionsWithoutAKernelOfTheirOwnAreRefused) {
  auto p = program({{"clients", 3}}, [](Value v) { return reduce_sum(v); }, {"clients"});
  const Mesh mesh({{"clients", 1}}, "clients",
                  std::make_shared<ThreadsAsProcesses>(std::make_shared<Board>(2), 0, 2));
  for (DType dt : {f16, bf16}) {
    try {
      compile(simplify(trace(p, {Type(dt, {3, 2})})), mesh);
      ADD_FAILURE() << dtype_name(dt);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("reduce_sum on " + std::string(dtype_name(dt)) +
                                           "[3,2]@clients cannot run across the processes"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace drx::testing
