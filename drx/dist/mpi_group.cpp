#include "drx/dist/mpi_group.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "drx/array/error.h"

namespace drx::dist {
namespace {

using Clock = std::chrono::steady_clock;

// Element range of process q when `width` elements are split over `size`.
std::pair<int64_t, int64_t> element_range(int64_t width, int q, int size) {
  return {width * q / size, width * (q + 1) / size};
}

template <class T>
void append(std::string& s, const T& v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T read(const std::string& s, size_t& at, const std::string& what) {
  if (at + sizeof(T) > s.size())
    throw Error("drx::dist: a message of " + what + " is truncated (" + std::to_string(s.size()) +
                " bytes)");
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

std::string during(const std::string& what) {
  const std::string activity = current_activity();
  return activity.empty() ? what : what + " of " + activity;
}

}  // namespace

MpiGroup::MpiGroup(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

void MpiGroup::abort_job(const std::string& message) const {
  std::fprintf(stderr, "drx: error: rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

void MpiGroup::check(int code, const char* call, const std::string& what) const {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  abort_job(std::string(call) + " failed during " + during(what) + ": " +
            std::string(text, static_cast<size_t>(length)));
}

std::vector<std::string> MpiGroup::exchange(const std::vector<std::string>& to,
                                            const std::vector<bool>& send,
                                            const std::vector<bool>& recv,
                                            const std::string& what) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto started = Clock::now();
  // Tags keep exchanges apart (messages between two ranks with one tag arrive in order anyway).
  const int tag = static_cast<int>(seq_++ % 32000) + 1;
  std::vector<std::string> got(static_cast<size_t>(size_));
  std::vector<MPI_Request> sends;
  std::vector<int> send_to;
  for (int d = 0; d < size_; ++d) {
    const auto k = static_cast<size_t>(d);
    if (!send[k]) continue;
    if (d == rank_) {
      got[k] = to[k];
      continue;
    }
    if (to[k].size() > static_cast<size_t>(INT32_MAX))
      throw Error("drx::dist: " + what + " would send " + std::to_string(to[k].size()) +
                  " bytes in one message (at most 2^31 - 1)");
    sends.emplace_back();
    send_to.push_back(d);
    check(MPI_Isend(to[k].data(), static_cast<int>(to[k].size()), MPI_BYTE, d, tag, comm_,
                    &sends.back()),
          "MPI_Isend", what);
    bytes_sent_ += to[k].size();
  }
  // A matched message is received with MPI_Irecv and tested, never with a blocking MPI_Recv: a
  // large message moves in fragments, and a sender that stops between two of them would leave a
  // blocking receive waiting past every deadline.
  struct Incoming {
    int source;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::vector<Incoming> pending;
  for (int s = 0; s < size_; ++s)
    if (recv[static_cast<size_t>(s)] && s != rank_) pending.push_back({s});
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_.load()));
  auto last_progress = Clock::now();
  for (;;) {
    bool progress = false;
    for (size_t i = 0; i < pending.size();) {
      Incoming& in = pending[i];
      int flag = 0;
      if (in.request == MPI_REQUEST_NULL) {
        MPI_Status status;
        check(MPI_Iprobe(in.source, tag, comm_, &flag, &status), "MPI_Iprobe", what);
        if (flag) {
          int count = 0;
          MPI_Get_count(&status, MPI_BYTE, &count);
          std::string& m = got[static_cast<size_t>(in.source)];
          m.resize(static_cast<size_t>(count));
          check(MPI_Irecv(m.data(), count, MPI_BYTE, in.source, tag, comm_, &in.request),
                "MPI_Irecv", what);
          progress = true;
        }
        flag = 0;
      }
      if (in.request != MPI_REQUEST_NULL)
        check(MPI_Test(&in.request, &flag, MPI_STATUS_IGNORE), "MPI_Test", what);
      if (!flag) {
        ++i;
        continue;
      }
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
    }
    int sent = 1;
    if (!sends.empty())
      check(MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE),
            "MPI_Testall", what);
    if (sent && pending.empty()) {
      ns_in_exchanges_ += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count());
      return got;
    }
    if (Clock::now() > deadline) {
      std::vector<int> silent;
      for (const Incoming& in : pending) silent.push_back(in.source);
      if (silent.empty())
        for (size_t i = 0; i < sends.size(); ++i) {
          int done = 0;
          MPI_Test(&sends[i], &done, MPI_STATUS_IGNORE);
          if (!done) silent.push_back(send_to[i]);
        }
      std::string ranks;
      for (size_t i = 0; i < silent.size(); ++i)
        ranks += (i ? (i + 1 == silent.size() ? " and " : ", ") : "") + std::to_string(silent[i]);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s_.load());
      abort_job((silent.size() == 1 ? "rank " : "ranks ") + ranks + " stopped responding during " +
                during(what) + " (nothing from " + (silent.size() == 1 ? "it" : "them") + " for " +
                seconds +
                " s, the deadline of drx::dist::Options::timeout_s; drx fedavg --mpi-timeout); "
                "aborting the job");
    }
    // Poll (yielding the core) while messages flow: a large message moves in fragments, each
    // needing both sides to call into MPI. Sleep once nothing has come for a while: a rank
    // waiting for another to finish computing must not take its core.
    const auto now = Clock::now();
    const bool receiving = std::any_of(pending.begin(), pending.end(), [](const Incoming& in) {
      return in.request != MPI_REQUEST_NULL;
    });
    if (progress || receiving) last_progress = now;
    const auto idle = now - last_progress;
    if (idle < std::chrono::milliseconds(5))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(
          std::chrono::microseconds(idle < std::chrono::milliseconds(100) ? 50 : 500));
  }
}

std::vector<std::string> MpiGroup::all_gather(const std::string& bytes,
                                              const std::string& what) const {
  const std::vector<bool> everyone(static_cast<size_t>(size_), true);
  return exchange(std::vector<std::string>(static_cast<size_t>(size_), bytes), everyone, everyone,
                  what);
}

void MpiGroup::reduce(const RowReducer& partial, void* out, const std::string& op) const {
  const int64_t width = partial.width();
  const size_t eb = partial.element_bytes();
  const std::vector<bool> everyone(static_cast<size_t>(size_), true);
  // Reduce-scatter: process q gets every process's blocks, cut to q's elements.
  std::vector<std::string> to(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) {
    const auto [lo, hi] = element_range(width, q, size_);
    std::string& m = to[static_cast<size_t>(q)];
    append(m, static_cast<uint64_t>(partial.blocks()));
    for (size_t b = 0; b < partial.blocks(); ++b) {
      append(m, partial.block(b).start);
      append(m, partial.block(b).size);
    }
    for (size_t b = 0; b < partial.blocks(); ++b)
      m.append(static_cast<const char*>(partial.block_row(b)) + static_cast<size_t>(lo) * eb,
               static_cast<size_t>(hi - lo) * eb);
  }
  std::vector<std::string> parts = exchange(to, everyone, everyone, op);
  const auto [lo, hi] = element_range(width, rank_, size_);
  const size_t slice_bytes = static_cast<size_t>(hi - lo) * eb;
  std::unique_ptr<RowReducer> mine = partial.empty_like(hi - lo);
  for (int p = 0; p < size_; ++p) {  // in rank order: the clients' order
    const std::string& m = parts[static_cast<size_t>(p)];
    size_t at = 0;
    const auto blocks = read<uint64_t>(m, at, op);
    if (m.size() != sizeof(uint64_t) + blocks * (2 * sizeof(int64_t) + slice_bytes))
      throw Error("drx::dist: rank " + std::to_string(p) + "'s part of " + op + " has " +
                  std::to_string(m.size()) + " bytes, not what its " + std::to_string(blocks) +
                  " blocks of " + std::to_string(slice_bytes) +
                  " bytes need (the processes run different programs?)");
    const size_t rows = at + blocks * 2 * sizeof(int64_t);
    for (uint64_t b = 0; b < blocks; ++b) {
      const auto start = read<int64_t>(m, at, op);
      const auto size = read<int64_t>(m, at, op);
      mine->push_block({start, size}, m.data() + rows + b * slice_bytes);
    }
  }
  std::string slice(slice_bytes, '\0');
  mine->finish(slice.data());
  // All-gather of the slices.
  std::vector<std::string> slices = all_gather(slice, op);
  for (int q = 0; q < size_; ++q) {
    const auto [qlo, qhi] = element_range(width, q, size_);
    const std::string& s = slices[static_cast<size_t>(q)];
    if (s.size() != static_cast<size_t>(qhi - qlo) * eb)
      throw Error("drx::dist: rank " + std::to_string(q) + "'s slice of " + op + " has " +
                  std::to_string(s.size()) + " bytes, expected " +
                  std::to_string(static_cast<size_t>(qhi - qlo) * eb));
    std::memcpy(static_cast<char*>(out) + static_cast<size_t>(qlo) * eb, s.data(), s.size());
  }
}

void MpiGroup::check_same(const std::string& what, const std::string& fingerprint) const {
  const std::vector<std::string> all = all_gather(fingerprint, "the check of " + what);
  for (int q = 1; q < size_; ++q)
    if (all[static_cast<size_t>(q)] != all[0])
      throw Error("drx::dist: the processes disagree on " + what + ": rank 0 has " + all[0] +
                  ", rank " + std::to_string(q) + " has " + all[static_cast<size_t>(q)] +
                  "; every process must call the same program with the same global argument "
                  "types (placed arguments: the whole placement's shape, see "
                  "drx::dist::place_rows), and compute bf16 products with the same kernel "
                  "(hosts whose CPUs differ round them differently)");
}

}  // namespace drx::dist
