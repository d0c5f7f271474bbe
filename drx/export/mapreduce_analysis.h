#pragma once
// Private to drx/export: the analysis behind drx::mapreduce_form (see
// mapreduce_form.cpp for the method).
#include <optional>
#include <string>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/export/mapreduce_form.h"
#include "drx/ir/program.h"

namespace drx::mapreduce_detail {

// The names of values that cross parts (see mapreduce_form.h).
inline std::string server_name(int var) { return "v" + std::to_string(var); }
inline std::string client_name(int var) { return "c" + std::to_string(var); }
inline constexpr const char* kClientIndex = "client_index";

Type unplaced_row(const Type& t);
bool is_reduction(const Primitive* p);  // reduce_sum, reduce_max, reduce_min
Aggregation reduction_kind(const Primitive* p);
// Whether e's sub-programs (loop bodies, branches) broadcast, map or reduce.
bool communicates(const Eqn& e);
// Appends prim[params](ins) to q, typed by the primitive's rules.
std::vector<int> append(Program& q, const Primitive& prim, Params params, std::vector<int> ins);
int append1(Program& q, const Primitive& prim, Params params, std::vector<int> ins);
// The parameters that run e on one client's rows, if e works row by row.
std::optional<Params> per_client_params(const Eqn& e, const Program& p);

enum class Role { server, placed };

struct Analysis {
  const Program& p;
  std::string placement;
  int64_t clients = 0;
  std::vector<int> producer;  // var -> eqn index, -1 for inputs
  std::vector<Role> role;     // of each var
  std::vector<int> level;     // server vars
  std::vector<int> stage;     // placed vars (-1: needs no server value)
  std::vector<bool> is_input;
  int stages = 0;
  // reduce_sum(x) / n over the n clients, found as a mean: per reduce_sum
  // equation, its division's equation (-1: none); per equation, whether it
  // is such a division (the aggregation computes it).
  std::vector<int> mean_division;
  std::vector<bool> is_mean_division;

  explicit Analysis(const Program& program) : p(program) {}

  std::string describe(size_t eqn) const {
    const Eqn& e = p.eqns[eqn];
    std::string outs;
    for (int v : e.outs) outs += (outs.empty() ? "%" : ", %") + std::to_string(v);
    return "equation " + std::to_string(eqn) + " (" + outs + " = " + e.prim->name() + ")";
  }
  // Constants and other operand-free equations: copied into every part that
  // reads them instead of being sent.
  bool rematerializable(int var) const {
    const int e = producer[static_cast<size_t>(var)];
    return e >= 0 && p.eqns[static_cast<size_t>(e)].ins.empty() &&
           p.eqns[static_cast<size_t>(e)].prim->is_pure();
  }
  const Eqn* eqn_of(int var) const {
    const int e = producer[static_cast<size_t>(var)];
    return e < 0 ? nullptr : &p.eqns[static_cast<size_t>(e)];
  }
};

// Fills the analysis of a.p; drx::Error for what has no MapReduce form.
void analyse(Analysis& a);
// Finds the reduce_sum / clients divisions that are mean aggregations.
void find_means(Analysis& a);

}  // namespace drx::mapreduce_detail
