#include "drx/dist/rank_clients.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "drx/array/error.h"
#include "drx/data/npy.h"

namespace drx::dist {
namespace {

template <class T>
void put(std::string& bytes, T v) {
  bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T take(std::string_view& bytes, const std::string& what) {
  if (bytes.size() < sizeof(T)) throw Error("RankClientExecutor: " + what + " is truncated");
  T v;
  std::memcpy(&v, bytes.data(), sizeof v);
  bytes.remove_prefix(sizeof v);
  return v;
}

// This process's clients' outputs, as bytes to send: per client its index,
// its number of outputs and each output as a length-prefixed .npy.
class Encoded : public ClientOutputs {
 public:
  void add_outputs(int64_t client, const std::vector<Array>& outputs) override {
    put<int64_t>(bytes, client);
    put<uint64_t>(bytes, outputs.size());
    for (const Array& a : outputs) {
      const std::string npy = encode_npy(a);
      put<uint64_t>(bytes, npy.size());
      bytes += npy;
    }
  }
  std::string bytes;
};

}  // namespace

RankClientExecutor::RankClientExecutor(const World& world, ClientExecutor& local)
    : world_(world), local_(local) {}

void RankClientExecutor::run(const ClientStage& stage, int64_t begin, int64_t end,
                             ClientOutputs& outputs) {
  const auto [first, last] = world_.clients(stage.form.clients);
  const int64_t lo = std::max(begin, first), hi = std::min(end, last);
  Encoded mine;
  if (lo < hi) local_.run(stage, lo, hi, mine);
  const std::string what = "the client outputs of stage " + std::to_string(stage.index);
  // Rank order is client order: the blocks are contiguous in rank order.
  std::string all;
  for (const std::string& part : world_.gather(mine.bytes, what)) all += part;
  all = world_.broadcast(all, what);
  std::string_view rest(all);
  while (!rest.empty()) {
    const int64_t client = take<int64_t>(rest, what);
    const uint64_t n = take<uint64_t>(rest, what);
    std::vector<Array> outs;
    for (uint64_t k = 0; k < n; ++k) {
      const uint64_t size = take<uint64_t>(rest, what);
      if (rest.size() < size) throw Error("RankClientExecutor: " + what + " is truncated");
      outs.push_back(decode_npy(rest.substr(0, size), what));
      rest.remove_prefix(size);
    }
    outputs.add_outputs(client, outs);
  }
}

}  // namespace drx::dist
