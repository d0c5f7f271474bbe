#include "tools/training/ranks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "drx/array/error.h"
#include "drx/core/process_group.h"
#include "drx/dist/launch.h"
#ifdef DRX_HAVE_MPI
#include "drx/dist/dist.h"
#endif

namespace drx::tool::training {

Ranks::~Ranks() = default;

void Ranks::report(const char* what) const {
  std::fprintf(stderr, "drx: error: rank %d: %s\n", rank_, what);
}

Ranks::Ranks(const std::string& command, bool mpi, double mpi_timeout) {
#ifdef DRX_HAVE_MPI
  (void)command;
  if (!mpi && !dist::launched_by_mpirun()) return;
  dist::World& w = dist::init(dist::Options{mpi_timeout});
  w.set_timeout_s(mpi_timeout);
  distributed_ = true;
  rank_ = w.rank();
  size_ = w.size();
#else
  (void)mpi_timeout;
  if (mpi || dist::launched_by_mpirun())
    throw Error(command +
                ": this drx was built without MPI (-DDRX_MPI=OFF), so it cannot run as ranks of "
                "mpirun; rebuild with libopenmpi-dev installed (scripts/setup.sh)");
#endif
}

int64_t Ranks::threads(int64_t requested) const {
  if (requested > 0 || !distributed_) return requested;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int64_t here = local ? std::max(1, std::atoi(local)) : size_;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<int64_t>(1, cores / here);
}

std::pair<int64_t, int64_t> Ranks::clients(int64_t slots) const {
  return client_range(slots, rank_, size_);
}

#ifdef DRX_HAVE_MPI
std::optional<Mesh> Ranks::round_mesh(int64_t devices) const {
  if (!distributed_) return std::nullopt;
  return dist::world().mesh("clients", static_cast<int>(devices));
}

Array Ranks::placed(const Array& mine, int64_t slots) const {
  return distributed_ ? dist::place_rows(mine, slots, dist::world()) : mine;
}

int64_t Ranks::min(int64_t value, const std::string& what) const {
  return distributed_ ? dist::world().min(value, what) : value;
}

bool Ranks::root_decides(bool value, const std::string& what) const {
  if (!distributed_) return value;
  return dist::world().broadcast(value ? "1" : "0", what) == "1";
}

std::string Ranks::from_root(const std::function<std::string()>& make,
                             const std::string& what) const {
  if (!distributed_) return make();
  return dist::world().broadcast(is_root() ? make() : std::string(), what);
}

namespace {

void check_slot_rows(const char* op, const Array& global, int64_t slots, const std::string& what) {
  if (global.ndim() < 1 || global.shape()[0] != slots)
    throw Error(std::string(op) + ": " + what + " has shape " + shape_str(global.shape()) +
                ", not one row per slot of " + std::to_string(slots));
}

}  // namespace

Array Ranks::gather_rows(const Array& global, int64_t slots, const std::string& what) const {
  if (!distributed_ || size_ == 1) return global;
  check_slot_rows("gather_rows", global, slots, what);
  return dist::gather_rows(global, dist::world(), what);
}

Array Ranks::own_rows(const Array& global, int64_t slots, const std::string& what) const {
  if (!distributed_ || size_ == 1) return global;
  check_slot_rows("own_rows", global, slots, what);
  return dist::keep_rows(global, clients(slots));
}

std::shared_ptr<void> Ranks::activity(const std::string& what) const {
  if (!distributed_) return nullptr;
  return std::make_shared<dist::Activity>(what);
}

double Ranks::seconds_communicating() const {
  return distributed_ ? dist::world().seconds_communicating() : 0;
}

uint64_t Ranks::most_bytes_sent() const {
  if (!distributed_) return 0;
  const auto mine = static_cast<int64_t>(dist::world().bytes_sent());
  return static_cast<uint64_t>(-dist::world().min(-mine, "the bytes each rank sent"));
}

void Ranks::abort_job() const {
  if (distributed_ && size_ > 1) dist::abort_job(1);
}
#else
std::optional<Mesh> Ranks::round_mesh(int64_t) const { return std::nullopt; }
Array Ranks::placed(const Array& mine, int64_t) const { return mine; }
int64_t Ranks::min(int64_t value, const std::string&) const { return value; }
bool Ranks::root_decides(bool value, const std::string&) const { return value; }
std::string Ranks::from_root(const std::function<std::string()>& make, const std::string&) const {
  return make();
}
Array Ranks::gather_rows(const Array& global, int64_t, const std::string&) const { return global; }
Array Ranks::own_rows(const Array& global, int64_t, const std::string&) const { return global; }
std::shared_ptr<void> Ranks::activity(const std::string&) const { return nullptr; }
uint64_t Ranks::most_bytes_sent() const { return 0; }
double Ranks::seconds_communicating() const { return 0; }
void Ranks::abort_job() const {}
#endif

}  // namespace drx::tool::training
