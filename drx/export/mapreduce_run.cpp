// Streaming aggregation in the canonical tree, and the in-process composition
// of a MapReduce form's parts (the driver, mapreduce_driver.h, with its
// in-process executor).
#include <map>

#include "drx/array/error.h"
#include "drx/array/half.h"
#include "drx/core/canonical_tree.h"
#include "drx/core/primitive.h"
#include "drx/core/reduction.h"
#include "drx/exec/executable.h"
#include "drx/export/mapreduce_driver.h"
#include "drx/export/mapreduce_form.h"
#include "drx/ops/primitives.h"

namespace drx {

namespace {

// bf16/f16 rows reduce in f32 and round once, as Primitive::evaluate does
// (narrow integers in i8/u8, wrapped once).
DType accumulation_dtype(DType d) { return compute_dtype(d); }

Array combine(Aggregation kind, const Array& left, const Array& right) {
  Array out(left.dtype(), left.shape());
  const ReduceKind k = kind == Aggregation::max   ? ReduceKind::max
                       : kind == Aggregation::min ? ReduceKind::min
                                                  : ReduceKind::sum;
  dispatch_dtype(left.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* l = left.data<T>();
    const T* r = right.data<T>();
    T* o = out.data<T>();
    dispatch_reduce(k, [&](auto kk) {
      for (int64_t i = 0; i < out.size(); ++i) o[i] = reduce_combine<kk()>(l[i], r[i]);
    });
  });
  return out;
}

std::string row_problem(const Array& a, const Type& want) {
  if (a.dtype() == want.dtype && a.shape() == want.shape) return "";
  return "holds " + std::string(dtype_name(a.dtype())) + shape_str(a.shape()) + ", expected " +
         want.str();
}

}  // namespace

StreamingReduce::StreamingReduce(Aggregation kind, Type row) : kind_(kind), row_(std::move(row)) {
  if (kind != Aggregation::sum && kind != Aggregation::max && kind != Aggregation::min)
    throw Error(std::string("StreamingReduce: folds sum, max or min, not ") +
                aggregation_name(kind));
}

void StreamingReduce::add(const Array& row) {
  if (std::string problem = row_problem(row, row_); !problem.empty())
    throw Error("aggregate: client " + std::to_string(count_) + "'s value " + problem);
  // Client count_ is a block of one; it and the blocks before it combine as the canonical
  // tree's subtrees complete (drx/core/canonical_tree.h).
  RowReducer::Block block{count_, 1};
  Array value = convert_array(row, accumulation_dtype(row_.dtype));
  while (!blocks_.empty()) {
    const RowReducer::Block left{block.start - blocks_.back().first, blocks_.back().first};
    if (!canonical_tree::halves(left, block)) break;
    value = combine(kind_, blocks_.back().second, value);
    block = {left.start, 2 * left.size};
    blocks_.pop_back();
  }
  blocks_.emplace_back(block.size, std::move(value));
  ++count_;
}

Array StreamingReduce::finish() const {
  if (blocks_.empty()) {
    if (kind_ != Aggregation::sum)
      throw Error(std::string("aggregate: ") + aggregation_name(kind_) + " of no clients");
    return full(row_.shape, 0.0, row_.dtype);
  }
  const Array all = canonical_tree::fold_right(
      blocks_.size(), [&](size_t b) { return blocks_[b].second; },
      [&](const Array& left, const Array& right) { return combine(kind_, left, right); });
  return convert_array(all, row_.dtype);
}

StreamingAggregate::StreamingAggregate(const AggregationSpec& spec, Type row, Type weight_row)
    : spec_(spec),
      row_(row),
      weight_row_(weight_row),
      main_(spec.kind == Aggregation::max || spec.kind == Aggregation::min ? spec.kind
                                                                           : Aggregation::sum,
            row),
      weights_(Aggregation::sum, weight_row) {
  if (spec.kind == Aggregation::weighted_mean &&
      (!weight_row.shape.empty() || weight_row.dtype != row.dtype))
    throw Error("aggregate: the weight of '" + spec.client_value +
                "' must be a scalar of its dtype " + std::string(dtype_name(row.dtype)) + ", got " +
                weight_row.str());
  if ((spec.kind == Aggregation::mean || spec.kind == Aggregation::weighted_mean) &&
      !is_floating(row.dtype))
    throw Error("aggregate: " + std::string(aggregation_name(spec.kind)) + " of '" +
                spec.client_value + "' needs a floating dtype, got " + row.str());
}

void StreamingAggregate::add(const Array& value, const Array* weight) {
  if (spec_.kind != Aggregation::weighted_mean) return main_.add(value);
  if (!weight)
    throw Error("aggregate: weighted_mean of '" + spec_.client_value + "' needs its weight");
  if (std::string problem = row_problem(*weight, weight_row_); !problem.empty())
    throw Error("aggregate: client " + std::to_string(weights_.count()) + "'s weight " + problem);
  if (std::string problem = row_problem(value, row_); !problem.empty())
    throw Error("aggregate: client " + std::to_string(main_.count()) + "'s value " + problem);
  Params bp{{"dims", std::vector<int64_t>{}}, {"shape", row_.shape}};
  const Array w = prims::broadcast_in_dim().evaluate({*weight}, bp)[0];
  main_.add(prims::mul().evaluate({value, w}, {})[0]);
  weights_.add(*weight);
}

Array StreamingAggregate::finish() const {
  Array total = main_.finish();
  if (spec_.kind == Aggregation::mean) {
    const Array n = full(row_.shape, static_cast<double>(main_.count()), row_.dtype);
    return prims::div().evaluate({total, n}, {})[0];
  }
  if (spec_.kind == Aggregation::weighted_mean) {
    Params bp{{"dims", std::vector<int64_t>{}}, {"shape", row_.shape}};
    const Array w = prims::broadcast_in_dim().evaluate({weights_.finish()}, bp)[0];
    return prims::div().evaluate({total, w}, {})[0];
  }
  return total;
}

std::string client_work_name(int stage) { return "stage" + std::to_string(stage) + "_client_work"; }

bool is_client_work(const Program& p) {
  const std::string prefix = "stage", suffix = "_client_work";
  if (p.name.size() <= prefix.size() + suffix.size() || !p.name.starts_with(prefix) ||
      !p.name.ends_with(suffix))
    return false;
  const std::string digits =
      p.name.substr(prefix.size(), p.name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<Array> run_mapreduce_form(const MapReduceForm& form, const std::vector<Array>& inputs) {
  if (inputs.size() != form.inputs.size())
    throw Error("run_mapreduce_form: " + std::to_string(inputs.size()) + " inputs, expected " +
                std::to_string(form.inputs.size()));
  std::map<std::string, Array> server;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!form.client_data.count(form.inputs[k])) server[form.inputs[k]] = inputs[k];
  InProcessClientExecutor clients(form, inputs);
  return run_mapreduce(form, server, clients, {.op = "run_mapreduce_form"});
}

}  // namespace drx
