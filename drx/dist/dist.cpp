#include "drx/dist/dist.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "drx/array/error.h"
#include "drx/dist/mpi_group.h"

namespace drx::dist {
namespace {

std::mutex activity_mu;
std::string activity;  // guarded by activity_mu

std::shared_ptr<MpiGroup>& group_slot() {
  static std::shared_ptr<MpiGroup> group;
  return group;
}

World& the_world() {
  static World w;
  return w;
}

const MpiGroup& group() {
  const std::shared_ptr<MpiGroup>& g = group_slot();
  if (!g) throw Error("drx::dist: call drx::dist::init(argc, argv) first");
  return *g;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void check_timeout(double seconds) {
  if (!(seconds > 0))
    throw Error("drx::dist: timeout_s must be a positive number of seconds, got " +
                std::to_string(seconds));
}

size_t row_bytes(const Array& a) {
  return a.shape().empty() || a.shape()[0] == 0 ? 0
                                                : a.nbytes() / static_cast<size_t>(a.shape()[0]);
}

}  // namespace

std::string current_activity() {
  std::lock_guard<std::mutex> lock(activity_mu);
  return activity;
}

Activity::Activity(std::string what) {
  std::lock_guard<std::mutex> lock(activity_mu);
  previous_ = std::exchange(activity, std::move(what));
}

Activity::~Activity() {
  std::lock_guard<std::mutex> lock(activity_mu);
  activity = std::move(previous_);
}

World& init(int& argc, char**& argv, const Options& options) {
  check_timeout(options.timeout_s);
  std::shared_ptr<MpiGroup>& g = group_slot();
  if (g) return the_world();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      throw Error("drx::dist: MPI_Init_thread failed");
    std::atexit(finalize_at_exit);
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  g = std::make_shared<MpiGroup>(comm, options.timeout_s);
  return the_world();
}

World& init(const Options& options) {
  int argc = 0;
  char** argv = nullptr;
  return init(argc, argv, options);
}

void abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();
}

World& world() {
  (void)group();
  return the_world();
}

int World::rank() const { return group().rank(); }
int World::size() const { return group().size(); }
uint64_t World::bytes_sent() const { return group().bytes_sent(); }
double World::seconds_communicating() const { return group().seconds_in_exchanges(); }
double World::timeout_s() const { return group().timeout_s(); }

void World::set_timeout_s(double seconds) {
  check_timeout(seconds);
  group_slot()->set_timeout_s(seconds);
}

Mesh World::mesh(const std::string& axis, int devices_per_process) const {
  return mesh({{axis, devices_per_process}}, axis);
}

Mesh World::mesh(std::vector<Mesh::Axis> axes, const std::string& process_axis) const {
  (void)group();
  return Mesh(std::move(axes), process_axis, group_slot());
}

std::pair<int64_t, int64_t> World::clients(int64_t clients) const {
  if (clients < 0) throw Error("drx::dist: a placement of " + std::to_string(clients) + " clients");
  return group().clients_of(rank(), clients);
}

std::string World::broadcast(const std::string& bytes, const std::string& what) const {
  const MpiGroup& g = group();
  const auto n = static_cast<size_t>(g.size());
  std::vector<bool> send(n, g.rank() == 0), recv(n, false);
  recv[0] = true;
  std::vector<std::string> to(n, g.rank() == 0 ? bytes : std::string());
  return g.exchange(to, send, recv, what)[0];
}

std::vector<std::string> World::gather(const std::string& bytes, const std::string& what) const {
  const MpiGroup& g = group();
  const auto n = static_cast<size_t>(g.size());
  std::vector<bool> send(n, false), recv(n, g.rank() == 0);
  send[0] = true;
  std::vector<std::string> got = g.exchange(std::vector<std::string>(n, bytes), send, recv, what);
  if (g.rank() != 0) return {};
  return got;
}

int64_t World::min(int64_t value, const std::string& what) const {
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  int64_t least = value;
  for (const std::string& m : group().all_gather(bytes, what)) {
    if (m.size() != sizeof value)
      throw Error("drx::dist: " + what + ": a process sent " + std::to_string(m.size()) +
                  " bytes, not one int64");
    int64_t v;
    std::memcpy(&v, m.data(), sizeof v);
    least = std::min(least, v);
  }
  return least;
}

void World::barrier(const std::string& what) const { group().all_gather("", what); }

Array place_rows(const Array& local, int64_t clients, const World& world) {
  const auto [first, end] = world.clients(clients);
  if (local.shape().empty() || local.shape()[0] != end - first)
    throw Error("drx::dist::place_rows: rank " + std::to_string(world.rank()) + " holds clients [" +
                std::to_string(first) + ", " + std::to_string(end) + ") of " +
                std::to_string(clients) + ", so expected " + std::to_string(end - first) +
                " rows, got " + std::string(dtype_name(local.dtype())) + shape_str(local.shape()));
  Shape shape = local.shape();
  shape[0] = clients;
  Array global(local.dtype(), shape);  // zeros; only this rank's rows are written (and resident)
  if (local.nbytes())
    std::memcpy(static_cast<char*>(global.raw()) + static_cast<size_t>(first) * row_bytes(local),
                local.raw(), local.nbytes());
  return global;
}

Array local_rows(const Array& global, const World& world) {
  if (global.shape().empty())
    throw Error("drx::dist::local_rows: expected an array with a leading (placement) axis, got " +
                std::string(dtype_name(global.dtype())) + shape_str(global.shape()));
  const auto [first, end] = world.clients(global.shape()[0]);
  Shape shape = global.shape();
  shape[0] = end - first;
  Array local(global.dtype(), shape);
  if (local.nbytes())
    std::memcpy(
        local.raw(),
        static_cast<const char*>(global.raw()) + static_cast<size_t>(first) * row_bytes(global),
        local.nbytes());
  return local;
}

Array keep_rows(const Array& global, std::pair<int64_t, int64_t> rows) {
  const auto [first, end] = rows;
  if (global.shape().empty() || first < 0 || end < first || end > global.shape()[0])
    throw Error("drx::dist::keep_rows: rows [" + std::to_string(first) + ", " +
                std::to_string(end) + ") of " + std::string(dtype_name(global.dtype())) +
                shape_str(global.shape()) +
                " (expected a range within the leading axis of a non-scalar array)");
  Array kept(global.dtype(), global.shape());  // zeros
  const size_t row = row_bytes(global);
  if (end > first)
    std::memcpy(static_cast<char*>(kept.raw()) + static_cast<size_t>(first) * row,
                static_cast<const char*>(global.raw()) + static_cast<size_t>(first) * row,
                static_cast<size_t>(end - first) * row);
  return kept;
}

Array gather_rows(const Array& global, const World& world, const std::string& what) {
  if (global.shape().empty())
    throw Error("drx::dist::gather_rows: " + what + " is " +
                std::string(dtype_name(global.dtype())) + shape_str(global.shape()) +
                ", expected an array with a leading (placement) axis");
  const Array mine = local_rows(global, world);
  const std::string bytes(static_cast<const char*>(mine.raw()), mine.nbytes());
  const std::vector<std::string> parts = world.gather(bytes, what);
  if (!world.is_root()) return global;
  Array all(global.dtype(), global.shape());
  size_t at = 0;
  for (const std::string& part : parts) {
    if (at + part.size() > all.nbytes())
      throw Error("drx::dist::gather_rows: the processes sent more rows of " + what + " than " +
                  std::to_string(global.shape()[0]));
    std::memcpy(static_cast<char*>(all.raw()) + at, part.data(), part.size());
    at += part.size();
  }
  return all;
}

}  // namespace drx::dist
