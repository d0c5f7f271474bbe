// drx.optim: the C++ core's optimizers (drx/optim/*.h), bound for python/drx/optim.py.
//
// Trees cross as nested Python dicts (string keys) and lists or tuples whose leaves are Values
// or Arrays; python/drx/optim.py builds that form from the user's pytrees (a dict with string
// keys stays a dict, every other node becomes the list of its children in tree_util's order,
// so the C++ Tree's canonical leaf order is tree_util's) and rebuilds the pytrees from the
// leaves. init wraps the params in a dict with the one key kParamsMarker, so that the state it
// returns shows where the params' structure sits (moments like params) and Python can rebuild
// those parts with the params' own pytree types. The user's functions (losses, schedules, a
// round's prepare, metrics and aggregation) cross as Python functions over lists of leaves
// (tree_fn), which Python wraps around the user's pytree functions.
//
// Errors: a drx::Error from a binding is prefixed with the Python function's name unless the
// message already starts with it (adam(b1=2) reports "adam: scale_by_adam: b1 must be ...").
#include "drx/optim/optim.h"

#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "drx/optim/federated_round.h"
#include "drx/optim/lm.h"
#include "drx/optim/optimizers.h"
#include "drx/optim/schedules.h"
#include "drx/optim/transform.h"
#include "python/src/bindings.h"

namespace drx::python {
namespace {

namespace opt = drx::optim;
using opt::GradientTransformation;

// The key of the dict init wraps the params in (see above).
const char* const kParamsMarker = "<drx.optim params>";

// ---- trees -------------------------------------------------------------------------------

// f(), its drx::Error prefixed with `name` unless the message already starts with it.
template <class F>
auto named(const std::string& name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind(name + ":", 0) == 0) throw;
    throw Error(name + ": " + msg);
  }
}

std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }

// ---- schedules and learning rates ---------------------------------------------------------

struct ScheduleBox {
  opt::Schedule fn;
  std::string name;
};

// The single Value a Python function over leaves returned.
Value single_value(const Tree& out, const std::string& what) {
  if (out.size() != 1 || out[0].kind() != Tree::Kind::value)
    throw Error(what + " must return one array");
  return out[0].value();
}

ScheduleBox schedule_from_fn(py::function f, const std::string& name) {
  TreeFn fn = tree_fn(std::move(f));
  return {[fn, name](const Value& count) {
            return single_value(fn({Tree(count)}), "the schedule " + name);
          },
          name};
}

opt::LearningRate lr_arg(py::handle h, const std::string& op) {
  if (py::isinstance<ScheduleBox>(h)) return opt::LearningRate(h.cast<const ScheduleBox&>().fn);
  if (!py::isinstance<py::bool_>(h) &&
      (py::isinstance<py::float_>(h) || py::isinstance<py::int_>(h)))
    return opt::LearningRate(h.cast<double>());
  throw Error(op + ": the learning rate must be a number or a schedule, got " + type_name(h));
}

// ---- configurations read from Python objects (dataclasses, or dicts) ----------------------

// obj.name (or obj[name] for a dict); None when absent or obj is None.
py::object field(py::handle obj, const char* name) {
  if (obj.is_none()) return py::none();
  if (py::isinstance<py::dict>(obj)) {
    py::dict d = py::reinterpret_borrow<py::dict>(obj);
    return d.contains(name) ? py::object(d[name]) : py::none();
  }
  return py::getattr(obj, name, py::none());
}

template <class T>
void read(py::handle obj, const char* name, T& out, const std::string& op) {
  py::object v = field(obj, name);
  if (v.is_none()) return;
  try {
    out = v.cast<T>();
  } catch (const py::cast_error&) {
    throw Error(op + ": " + name + " of type " + type_name(v) + " is not a valid value");
  }
}

opt::ServerKind kind_arg(py::handle h, const std::string& op) {
  if (py::isinstance<opt::ServerKind>(h)) return h.cast<opt::ServerKind>();
  if (py::isinstance<py::str>(h))
    return named(op, [&] { return opt::parse_server_kind(h.cast<std::string>()); });
  throw Error(op + ": a server kind must be a ServerKind or its name, got " + type_name(h));
}

opt::ServerOptimizer server_arg(py::handle obj, const std::string& op) {
  opt::ServerOptimizer s;
  py::object kind = field(obj, "kind");
  if (!kind.is_none()) s.kind = kind_arg(kind, op);
  read(obj, "lr", s.lr, op);
  read(obj, "momentum", s.momentum, op);
  read(obj, "beta1", s.beta1, op);
  read(obj, "beta2", s.beta2, op);
  read(obj, "eps", s.eps, op);
  return s;
}

opt::ClientSgd client_sgd_arg(py::handle obj, const std::string& op) {
  opt::ClientSgd c;
  read(obj, "lr", c.lr, op);
  read(obj, "momentum", c.momentum, op);
  return c;
}

std::optional<opt::DpSpec> dp_arg(py::handle obj, const std::string& op) {
  if (obj.is_none()) return std::nullopt;
  opt::DpSpec d;
  read(obj, "noise_multiplier", d.noise_multiplier, op);
  read(obj, "expected_cohort", d.expected_cohort, op);
  read(obj, "target_quantile", d.target_quantile, op);
  read(obj, "clip_lr", d.clip_lr, op);
  read(obj, "count_noise", d.count_noise, op);
  return d;
}

// None (the params' dtype), a name ("f32", "f64", "bf16"), a drx::nn::Policy, or a Python
// object whose _cpp() gives one (drx.nn.Policy).
nn::Policy policy_arg(py::handle obj, const std::string& op) {
  if (obj.is_none()) return nn::Policy();
  if (py::isinstance<py::str>(obj))
    return named(op, [&] { return nn::Policy::named(obj.cast<std::string>()); });
  if (py::isinstance<nn::Policy>(obj)) return obj.cast<nn::Policy>();
  if (py::hasattr(obj, "_cpp")) return policy_arg(obj.attr("_cpp")(), op);
  throw Error(op + ": policy must be a Policy or 'f32', 'f64' or 'bf16', got " + type_name(obj));
}

opt::RoundSpec round_spec_arg(py::handle obj, const std::string& op) {
  opt::RoundSpec s;
  s.client = client_sgd_arg(field(obj, "client"), op);
  s.server = server_arg(field(obj, "server"), op);
  read(obj, "cohort", s.cohort, op);
  read(obj, "steps", s.steps, op);
  read(obj, "batch", s.batch, op);
  read(obj, "full_steps", s.full_steps, op);
  s.dp = dp_arg(field(obj, "dp"), op);
  s.policy = policy_arg(field(obj, "policy"), op);
  return s;
}

nn::TransformerConfig model_arg(py::handle obj, const std::string& op) {
  nn::TransformerConfig c;
  read(obj, "vocab", c.vocab, op);
  read(obj, "context", c.context, op);
  read(obj, "layers", c.layers, op);
  read(obj, "width", c.width, op);
  read(obj, "heads", c.heads, op);
  read(obj, "mlp", c.mlp, op);
  read(obj, "ln_eps", c.ln_eps, op);
  read(obj, "scan_layers", c.scan_layers, op);
  c.policy = policy_arg(field(obj, "policy"), op);
  return c;
}

opt::LocalOptimizer local_optimizer_arg(py::handle obj, const std::string& op) {
  opt::LocalOptimizer l;
  read(obj, "kind", l.kind, op);
  read(obj, "lr", l.lr, op);
  read(obj, "momentum", l.momentum, op);
  read(obj, "b1", l.b1, op);
  read(obj, "b2", l.b2, op);
  read(obj, "eps", l.eps, op);
  read(obj, "weight_decay", l.weight_decay, op);
  return l;
}

opt::LmRoundSpec lm_spec_arg(py::handle obj, const std::string& op) {
  opt::LmRoundSpec s;
  s.model = model_arg(field(obj, "model"), op);
  s.client = local_optimizer_arg(field(obj, "client"), op);
  s.server = server_arg(field(obj, "server"), op);
  read(obj, "cohort", s.cohort, op);
  read(obj, "steps", s.steps, op);
  read(obj, "batch", s.batch, op);
  return s;
}

opt::OuterNesterov outer_arg(py::handle obj, const std::string& op) {
  opt::OuterNesterov o;
  read(obj, "lr", o.lr, op);
  read(obj, "momentum", o.momentum, op);
  return o;
}

// A round's server: a GradientTransformation of the pseudo-gradient, or a ServerOptimizer.
opt::ServerUpdate server_update_arg(py::handle h, const std::string& op) {
  if (py::isinstance<GradientTransformation>(h))
    return opt::ServerUpdate(h.cast<const GradientTransformation&>());
  return opt::ServerUpdate(server_arg(h, op));
}

// ---- the federated round's user functions ---------------------------------------------------

opt::LossFn loss_arg(py::function f) {
  TreeFn fn = tree_fn(std::move(f));
  return [fn](const Tree& p, const Tree& batch) {
    return single_value(fn({p, batch}), "the loss function");
  };
}

opt::StepWeightFn step_weight_arg(py::handle f) {
  if (f.is_none()) return {};
  TreeFn fn = tree_fn(py::reinterpret_borrow<py::function>(f));
  return [fn](const Tree& batch) { return single_value(fn({batch}), "step_weight"); };
}

opt::FederatedRoundSpec round_spec(const std::string& name, py::handle step_weight,
                                   int64_t full_steps, py::handle prepare, bool client_state,
                                   py::handle metrics, py::handle dp, py::handle aggregate) {
  opt::FederatedRoundSpec s;
  s.name = name;
  s.step_weight = step_weight_arg(step_weight);
  s.full_steps = full_steps;
  if (!prepare.is_none()) {
    TreeFn fn = tree_fn(py::reinterpret_borrow<py::function>(prepare));
    s.prepare = [fn](const Tree& shared, const Tree& data) { return fn({shared, data}); };
  }
  s.client_state = client_state;
  if (!metrics.is_none()) {
    TreeFn fn = tree_fn(py::reinterpret_borrow<py::function>(metrics));
    s.metrics = [fn](const Tree& p, const Tree& start, const Tree& batches, const Value& loss) {
      return fn({p, start, batches, Tree(loss)});
    };
  }
  s.dp = dp_arg(dp, name);
  if (!aggregate.is_none()) {
    TreeFn fn = tree_fn(py::reinterpret_borrow<py::function>(aggregate));
    s.aggregate = [fn, name](const Tree& placed) {
      Tree out = fn({placed});
      if (out.size() != tree_leaves(placed).size())
        throw Error(name + ": aggregate returned " + std::to_string(out.size()) +
                    " leaves for the " + std::to_string(tree_leaves(placed).size()) + " it got");
      return tree_unflatten(placed, out.children());
    };
  }
  return s;
}

// A traced function over Trees (a round, an evaluation), called with one nested argument per
// parameter inside a trace.
struct TreeFunction {
  TreeFn fn;
  std::string name;
  py::object call(py::handle args) const {
    std::vector<Tree> in;
    for (py::handle a : args) in.push_back(nested_to_tree(a, name));
    return tree_to_nested(fn(in), false);
  }
};

GradientTransformation named_tx(const std::string& name,
                                const std::function<GradientTransformation()>& make) {
  return named(name, make);
}

void bind_transformations(py::module_& m) {
  py::class_<GradientTransformation>(
      m, "optim_GradientTransformation",
      "A C++ GradientTransformation (drx/optim/transform.h): init and update on Trees.")
      .def_readonly("name", &GradientTransformation::name)
      .def("__repr__", [](const GradientTransformation& t) {
        return "<drx.optim transformation " + t.name + ">";
      });
  m.attr("optim_params_marker") = kParamsMarker;

  m.def(
      "optim_init",
      [](const GradientTransformation& tx, py::handle params) {
        const Tree p = nested_to_tree(params, tx.name + ".init");
        const Tree s = named(tx.name, [&] { return tx.init(Tree::dict({{kParamsMarker, p}})); });
        return tree_to_nested(unalias(s, p), false);
      },
      py::arg("tx"), py::arg("params"),
      "tx.init(params) with params wrapped in {optim_params_marker: params}: the state's parts "
      "like params come back wrapped so.");
  m.def(
      "optim_update",
      [](const GradientTransformation& tx, py::handle grads, py::handle state, py::handle params) {
        const std::string what = tx.name + ".update";
        const Tree g = nested_to_tree(grads, what), s = nested_to_tree(state, what),
                   p = nested_to_tree(params, what);
        auto [updates, next] = named(tx.name, [&] { return tx.update(g, s, p); });
        return py::make_tuple(tree_to_nested(updates, false), tree_to_nested(next, false));
      },
      py::arg("tx"), py::arg("grads"), py::arg("state"), py::arg("params"),
      "tx.update(grads, state, params) -> (updates, state), inside a trace.");
  m.def(
      "optim_reference_update",
      [](const GradientTransformation& tx, py::handle grads, py::handle state, py::handle params) {
        const std::string what = tx.name + ".update";
        auto step = jit([tx](Tree g, Tree s, Tree p) {
          auto [updates, next] = tx.update(g, s, p);
          return Tree::list({updates, next});
        });
        const Tree out = step(nested_to_tree(grads, what), nested_to_tree(state, what),
                              nested_to_tree(params, what));
        return py::make_tuple(tree_to_nested(out[0], false), tree_to_nested(out[1], false));
      },
      py::arg("tx"), py::arg("grads"), py::arg("state"), py::arg("params"),
      "For tests: tx.update on Arrays through the C++ API's own drx::jit.");
  m.def(
      "optim_apply_updates",
      [](py::handle params, py::handle updates) {
        const Tree p = nested_to_tree(params, "apply_updates");
        const Tree u = nested_to_tree(updates, "apply_updates");
        return tree_to_nested(named("apply_updates", [&] { return opt::apply_updates(p, u); }),
                              false);
      },
      py::arg("params"), py::arg("updates"), op_doc("optim::apply_updates").c_str());

  m.def(
      "optim_identity", [] { return named_tx("identity", [] { return opt::identity(); }); },
      op_doc("optim::identity").c_str());
  m.def(
      "optim_scale",
      [](double factor) { return named_tx("scale", [&] { return opt::scale(factor); }); },
      py::arg("factor"), op_doc("optim::scale").c_str());
  m.def(
      "optim_scale_by_schedule",
      [](const ScheduleBox& s) {
        return named_tx("scale_by_schedule", [&] { return opt::scale_by_schedule(s.fn); });
      },
      py::arg("schedule"), op_doc("optim::scale_by_schedule").c_str());
  m.def(
      "optim_scale_by_learning_rate",
      [](py::handle lr) {
        const std::string op = "scale_by_learning_rate";
        return named_tx(op, [&] { return opt::scale_by_learning_rate(lr_arg(lr, op)); });
      },
      py::arg("learning_rate"), op_doc("optim::scale_by_learning_rate").c_str());
  m.def(
      "optim_trace",
      [](double decay, bool nesterov) {
        return named_tx("trace", [&] { return opt::trace(decay, nesterov); });
      },
      py::arg("decay"), py::arg("nesterov"), op_doc("optim::trace").c_str());
  m.def(
      "optim_add_decayed_weights",
      [](double weight_decay) {
        return named_tx("add_decayed_weights",
                        [&] { return opt::add_decayed_weights(weight_decay); });
      },
      py::arg("weight_decay"), op_doc("optim::add_decayed_weights").c_str());
  m.def(
      "optim_clip_by_global_norm",
      [](double max_norm) {
        return named_tx("clip_by_global_norm", [&] { return opt::clip_by_global_norm(max_norm); });
      },
      py::arg("max_norm"), op_doc("optim::clip_by_global_norm").c_str());
  m.def(
      "optim_chain",
      [](std::vector<GradientTransformation> parts) {
        return named_tx("chain", [&] { return opt::chain(std::move(parts)); });
      },
      py::arg("parts"), op_doc("optim::chain").c_str());

  m.def(
      "optim_scale_by_adam",
      [](double b1, double b2, double eps, double eps_root) {
        return named_tx("scale_by_adam", [&] { return opt::scale_by_adam(b1, b2, eps, eps_root); });
      },
      py::arg("b1"), py::arg("b2"), py::arg("eps"), py::arg("eps_root"),
      op_doc("optim::scale_by_adam").c_str());
  m.def(
      "optim_scale_by_rss",
      [](double initial_accumulator_value, double eps) {
        return named_tx("scale_by_rss",
                        [&] { return opt::scale_by_rss(initial_accumulator_value, eps); });
      },
      py::arg("initial_accumulator_value"), py::arg("eps"), op_doc("optim::scale_by_rss").c_str());
  m.def(
      "optim_scale_by_rms",
      [](double decay, double eps, double initial_scale, bool eps_in_sqrt) {
        return named_tx("scale_by_rms",
                        [&] { return opt::scale_by_rms(decay, eps, initial_scale, eps_in_sqrt); });
      },
      py::arg("decay"), py::arg("eps"), py::arg("initial_scale"), py::arg("eps_in_sqrt"),
      op_doc("optim::scale_by_rms").c_str());
  m.def(
      "optim_scale_by_stddev",
      [](double decay, double eps, double initial_scale, bool eps_in_sqrt) {
        return named_tx("scale_by_stddev", [&] {
          return opt::scale_by_stddev(decay, eps, initial_scale, eps_in_sqrt);
        });
      },
      py::arg("decay"), py::arg("eps"), py::arg("initial_scale"), py::arg("eps_in_sqrt"),
      op_doc("optim::scale_by_stddev").c_str());
  m.def(
      "optim_scale_by_yogi",
      [](double b1, double b2, double eps, double eps_root, double initial_accumulator_value) {
        return named_tx("scale_by_yogi", [&] {
          return opt::scale_by_yogi(b1, b2, eps, eps_root, initial_accumulator_value);
        });
      },
      py::arg("b1"), py::arg("b2"), py::arg("eps"), py::arg("eps_root"),
      py::arg("initial_accumulator_value"), op_doc("optim::scale_by_yogi").c_str());

  m.def(
      "optim_sgd",
      [](py::handle lr, double momentum, bool nesterov) {
        return named_tx("sgd", [&] { return opt::sgd(lr_arg(lr, "sgd"), momentum, nesterov); });
      },
      py::arg("learning_rate"), py::arg("momentum"), py::arg("nesterov"),
      op_doc("optim::sgd").c_str());
  m.def(
      "optim_adam",
      [](py::handle lr, double b1, double b2, double eps) {
        return named_tx("adam", [&] { return opt::adam(lr_arg(lr, "adam"), b1, b2, eps); });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("b2"), py::arg("eps"),
      op_doc("optim::adam").c_str());
  m.def(
      "optim_adamw",
      [](py::handle lr, double b1, double b2, double eps, double weight_decay) {
        return named_tx("adamw",
                        [&] { return opt::adamw(lr_arg(lr, "adamw"), b1, b2, eps, weight_decay); });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("b2"), py::arg("eps"),
      py::arg("weight_decay"), op_doc("optim::adamw").c_str());
  m.def(
      "optim_adagrad",
      [](py::handle lr, double initial_accumulator_value, double eps) {
        return named_tx("adagrad", [&] {
          return opt::adagrad(lr_arg(lr, "adagrad"), initial_accumulator_value, eps);
        });
      },
      py::arg("learning_rate"), py::arg("initial_accumulator_value"), py::arg("eps"),
      op_doc("optim::adagrad").c_str());
  m.def(
      "optim_rmsprop",
      [](py::handle lr, double decay, double eps, double initial_scale, bool eps_in_sqrt,
         bool centered, double momentum, bool nesterov) {
        opt::RmspropOptions o;
        o.initial_scale = initial_scale;
        o.eps_in_sqrt = eps_in_sqrt;
        o.centered = centered;
        o.momentum = momentum;
        o.nesterov = nesterov;
        return named_tx("rmsprop",
                        [&] { return opt::rmsprop(lr_arg(lr, "rmsprop"), decay, eps, o); });
      },
      py::arg("learning_rate"), py::arg("decay"), py::arg("eps"), py::arg("initial_scale"),
      py::arg("eps_in_sqrt"), py::arg("centered"), py::arg("momentum"), py::arg("nesterov"),
      op_doc("optim::rmsprop").c_str());
  m.def(
      "optim_yogi",
      [](py::handle lr, double b1, double b2, double eps) {
        return named_tx("yogi", [&] { return opt::yogi(lr_arg(lr, "yogi"), b1, b2, eps); });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("b2"), py::arg("eps"),
      op_doc("optim::yogi").c_str());
  m.def(
      "optim_fedadam",
      [](py::handle lr, double b1, double b2, double tau, double initial_v) {
        return named_tx(
            "fedadam", [&] { return opt::fedadam(lr_arg(lr, "fedadam"), b1, b2, tau, initial_v); });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("b2"), py::arg("tau"), py::arg("initial_v"),
      op_doc("optim::fedadam").c_str());
  m.def(
      "optim_fedyogi",
      [](py::handle lr, double b1, double b2, double tau, double initial_v) {
        return named_tx(
            "fedyogi", [&] { return opt::fedyogi(lr_arg(lr, "fedyogi"), b1, b2, tau, initial_v); });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("b2"), py::arg("tau"), py::arg("initial_v"),
      op_doc("optim::fedyogi").c_str());
  m.def(
      "optim_fedadagrad",
      [](py::handle lr, double b1, double tau, double initial_v) {
        return named_tx("fedadagrad", [&] {
          return opt::fedadagrad(lr_arg(lr, "fedadagrad"), b1, tau, initial_v);
        });
      },
      py::arg("learning_rate"), py::arg("b1"), py::arg("tau"), py::arg("initial_v"),
      op_doc("optim::fedadagrad").c_str());
}

void bind_schedules(py::module_& m) {
  py::class_<ScheduleBox>(m, "optim_Schedule",
                          "A C++ Schedule (drx/optim/schedules.h): the step count -> a value.")
      .def_readonly("name", &ScheduleBox::name)
      .def(
          "__call__",
          [](const ScheduleBox& s, const Value& count) {
            return named(s.name, [&] { return s.fn(count); });
          },
          py::arg("count"), "The schedule at count (a traced integer array), inside a trace.")
      .def("__repr__", [](const ScheduleBox& s) { return "<drx.optim schedule " + s.name + ">"; });
  m.def("optim_schedule_from_fn", &schedule_from_fn, py::arg("f"), py::arg("name"),
        "A Schedule calling f([count]) -> [value] (Values).");
  m.def(
      "optim_constant_schedule",
      [](double value) {
        return ScheduleBox{
            named("constant_schedule", [&] { return opt::constant_schedule(value); }),
            "constant_schedule"};
      },
      py::arg("value"), op_doc("optim::constant_schedule").c_str());
  m.def(
      "optim_linear_schedule",
      [](double init_value, double end_value, int64_t transition_steps, int64_t transition_begin) {
        return ScheduleBox{named("linear_schedule",
                                 [&] {
                                   return opt::linear_schedule(init_value, end_value,
                                                               transition_steps, transition_begin);
                                 }),
                           "linear_schedule"};
      },
      py::arg("init_value"), py::arg("end_value"), py::arg("transition_steps"),
      py::arg("transition_begin"), op_doc("optim::linear_schedule").c_str());
  m.def(
      "optim_cosine_decay_schedule",
      [](double init_value, int64_t decay_steps, double alpha, double exponent) {
        return ScheduleBox{named("cosine_decay_schedule",
                                 [&] {
                                   return opt::cosine_decay_schedule(init_value, decay_steps, alpha,
                                                                     exponent);
                                 }),
                           "cosine_decay_schedule"};
      },
      py::arg("init_value"), py::arg("decay_steps"), py::arg("alpha"), py::arg("exponent"),
      op_doc("optim::cosine_decay_schedule").c_str());
  m.def(
      "optim_warmup_cosine_decay_schedule",
      [](double init_value, double peak_value, int64_t warmup_steps, int64_t decay_steps,
         double end_value, double exponent) {
        return ScheduleBox{named("warmup_cosine_decay_schedule",
                                 [&] {
                                   return opt::warmup_cosine_decay_schedule(
                                       init_value, peak_value, warmup_steps, decay_steps, end_value,
                                       exponent);
                                 }),
                           "warmup_cosine_decay_schedule"};
      },
      py::arg("init_value"), py::arg("peak_value"), py::arg("warmup_steps"), py::arg("decay_steps"),
      py::arg("end_value"), py::arg("exponent"),
      op_doc("optim::warmup_cosine_decay_schedule").c_str());
  m.def(
      "optim_join_schedules",
      [](const std::vector<ScheduleBox>& schedules, std::vector<int64_t> boundaries) {
        std::vector<opt::Schedule> fns;
        for (const ScheduleBox& s : schedules) fns.push_back(s.fn);
        return ScheduleBox{
            named("join_schedules",
                  [&] { return opt::join_schedules(std::move(fns), std::move(boundaries)); }),
            "join_schedules"};
      },
      py::arg("schedules"), py::arg("boundaries"), op_doc("optim::join_schedules").c_str());
  m.def(
      "optim_schedule_value",
      [](const ScheduleBox& s, int64_t count) {
        return named("schedule_value", [&] { return opt::schedule_value(s.fn, count); });
      },
      py::arg("schedule"), py::arg("count"), op_doc("optim::schedule_value").c_str());
}

void bind_server(py::module_& m) {
  py::enum_<opt::ServerKind>(m, "optim_ServerKind",
                             "The server optimizers of the federated round (drx/optim/optim.h).")
      .value("fedavg", opt::ServerKind::fedavg)
      .value("fedavgm", opt::ServerKind::fedavgm)
      .value("fedadam", opt::ServerKind::fedadam)
      .value("fedyogi", opt::ServerKind::fedyogi)
      .value("fedadagrad", opt::ServerKind::fedadagrad);
  m.def(
      "optim_parse_server_kind",
      [](const std::string& name) {
        return named("parse_server_kind", [&] { return opt::parse_server_kind(name); });
      },
      py::arg("name"), op_doc("optim::parse_server_kind").c_str());
  m.def("optim_server_kind_name", &opt::server_kind_name, py::arg("kind"),
        op_doc("optim::server_kind_name").c_str());
  m.def(
      "optim_server_transformation",
      [](py::handle server) {
        const std::string op = "ServerOptimizer";
        return named(op, [&] { return server_arg(server, op).transformation(); });
      },
      py::arg("server"), "The ServerOptimizer's GradientTransformation of -delta.");
  m.def(
      "optim_server_init",
      [](py::handle server, py::handle params) {
        const std::string op = "ServerOptimizer.init";
        const Tree p = nested_to_tree(params, op);
        const opt::ServerOptimizer s = server_arg(server, op);
        return tree_to_nested(unalias(named(op,
                                            [&] {
                                              return s.init(Tree::dict({{kParamsMarker, p}}));
                                            }),
                                      p),
                              false);
      },
      py::arg("server"), py::arg("params"),
      "ServerOptimizer::init on params wrapped as optim_init wraps them.");
  m.def(
      "optim_server_apply",
      [](py::handle server, py::handle params, py::handle delta, py::handle state) {
        const std::string op = "ServerOptimizer.apply";
        const opt::ServerOptimizer s = server_arg(server, op);
        const Tree p = nested_to_tree(params, op), d = nested_to_tree(delta, op),
                   st = nested_to_tree(state, op);
        auto [next_params, next_state] = named(op, [&] { return s.apply(p, d, st); });
        return py::make_tuple(tree_to_nested(next_params, false),
                              tree_to_nested(next_state, false));
      },
      py::arg("server"), py::arg("params"), py::arg("delta"), py::arg("state"),
      "ServerOptimizer::apply(params, delta, state) -> (params, state), inside a trace.");
  m.def(
      "optim_client_sgd_transformation",
      [](py::handle client) {
        const std::string op = "ClientSgd";
        return named(op, [&] { return client_sgd_arg(client, op).transformation(); });
      },
      py::arg("client"), "ClientSgd's sgd(lr, momentum).");
  m.def(
      "optim_local_optimizer_transformation",
      [](py::handle local) {
        const std::string op = "LocalOptimizer";
        return named(op, [&] { return local_optimizer_arg(local, op).transformation(); });
      },
      py::arg("local"), "LocalOptimizer's adamw or sgd.");
  m.def(
      "optim_outer_nesterov_transformation",
      [](py::handle outer) {
        const std::string op = "OuterNesterov";
        return named(op, [&] { return outer_arg(outer, op).transformation(); });
      },
      py::arg("outer"), "DiLoCo's outer SGD with Nesterov momentum.");
  m.def(
      "optim_dp_round_state",
      [](double clip, const Array& key, const std::string& dtype, py::handle dp) {
        const std::string op = "dp_round_state";
        const std::optional<opt::DpSpec> spec = dp_arg(dp, op);
        const DType dt = named(op, [&] { return dtype_from_name(dtype); });
        const Tree s = named(op, [&] {
          return spec ? opt::dp_round_state(Tree(), clip, key, dt, *spec)
                      : opt::dp_round_state(Tree(), clip, key, dt);
        });
        return tree_to_nested(unalias(s, Tree(key)), false);
      },
      py::arg("clip"), py::arg("key"), py::arg("dtype"), py::arg("dp"),
      (op_doc("optim::dp_round_state") + "\n\nWith the empty server state: Python puts its own in.")
          .c_str());
}

void bind_rounds(py::module_& m) {
  py::class_<TreeFunction>(m, "optim_Function",
                           "A traced function over Trees (a round, an evaluation): called "
                           "inside a trace with one nested argument per parameter.")
      .def_readonly("name", &TreeFunction::name)
      .def("__call__", &TreeFunction::call, py::arg("args"));

  m.def(
      "optim_fedavg_round",
      [](py::function loss, const GradientTransformation& client_tx, py::handle server,
         int64_t cohort, const std::string& name, py::handle step_weight, int64_t full_steps,
         py::handle prepare, bool client_state, py::handle metrics, py::handle dp,
         py::handle aggregate) {
        opt::FederatedRoundSpec spec = round_spec(name, step_weight, full_steps, prepare,
                                                  client_state, metrics, dp, aggregate);
        const opt::ServerUpdate s = server_update_arg(server, name);
        return named(name, [&] {
          return TreeFunction{
              opt::fedavg_round(loss_arg(std::move(loss)), client_tx, s, cohort, spec).erased(),
              name};
        });
      },
      py::arg("loss"), py::arg("client_tx"), py::arg("server"), py::arg("cohort"), py::arg("name"),
      py::arg("step_weight"), py::arg("full_steps"), py::arg("prepare"), py::arg("client_state"),
      py::arg("metrics"), py::arg("dp"), py::arg("aggregate"),
      op_doc("optim::fedavg_round").c_str());
  m.def(
      "optim_fedavg_round_body",
      [](py::function loss, const GradientTransformation& client_tx, py::handle server,
         int64_t cohort, const std::string& name, py::handle step_weight, int64_t full_steps,
         py::handle prepare, bool client_state, py::handle metrics, py::handle dp,
         py::handle aggregate, py::handle params, py::handle state, py::handle clients,
         py::handle shared) {
        opt::FederatedRoundSpec spec = round_spec(name, step_weight, full_steps, prepare,
                                                  client_state, metrics, dp, aggregate);
        const opt::ServerUpdate s = server_update_arg(server, name);
        const Tree p = nested_to_tree(params, name), st = nested_to_tree(state, name),
                   c = nested_to_tree(clients, name), sh = nested_to_tree(shared, name);
        return tree_to_nested(named(name,
                                    [&] {
                                      return opt::fedavg_round_body(loss_arg(std::move(loss)),
                                                                    client_tx, s, cohort, spec, p,
                                                                    st, c, sh);
                                    }),
                              false);
      },
      py::arg("loss"), py::arg("client_tx"), py::arg("server"), py::arg("cohort"), py::arg("name"),
      py::arg("step_weight"), py::arg("full_steps"), py::arg("prepare"), py::arg("client_state"),
      py::arg("metrics"), py::arg("dp"), py::arg("aggregate"), py::arg("params"), py::arg("state"),
      py::arg("clients"), py::arg("shared"), op_doc("optim::fedavg_round_body").c_str());
  m.def(
      "optim_local_steps",
      [](py::function loss, const GradientTransformation& client_tx, py::handle start,
         py::handle opt_state, py::handle batches, py::handle step_weight, int64_t full_steps) {
        const std::string op = "local_steps";
        const Tree p = nested_to_tree(start, op), s = nested_to_tree(opt_state, op),
                   b = nested_to_tree(batches, op);
        opt::LocalSteps r = named(op, [&] {
          return opt::local_steps(loss_arg(std::move(loss)), client_tx, p, s, b,
                                  step_weight_arg(step_weight), full_steps);
        });
        py::dict out;
        out["params"] = tree_to_nested(r.params, false);
        out["opt_state"] = tree_to_nested(r.opt_state, false);
        out["loss"] = py::cast(r.loss);
        return out;
      },
      py::arg("loss"), py::arg("client_tx"), py::arg("start"), py::arg("opt_state"),
      py::arg("batches"), py::arg("step_weight"), py::arg("full_steps"),
      op_doc("optim::local_steps").c_str());

  m.def(
      "optim_mlp_fedavg_round",
      [](py::handle spec) {
        const std::string op = "fedavg_round";
        const opt::RoundSpec s = round_spec_arg(spec, op);
        return named(op, [&] { return TreeFunction{opt::fedavg_round(s).erased(), op}; });
      },
      py::arg("spec"), op_doc("optim::fedavg_round").c_str());
  m.def(
      "optim_fedavg_round_on_client_data",
      [](py::handle spec) {
        const std::string op = "fedavg_round_on_client_data";
        const opt::RoundSpec s = round_spec_arg(spec, op);
        return named(op, [&] {
          return TreeFunction{opt::fedavg_round_on_client_data(s).erased(), op};
        });
      },
      py::arg("spec"), op_doc("optim::fedavg_round_on_client_data").c_str());
  m.def(
      "optim_evaluate_fn",
      [](int64_t shards) {
        const std::string op = "evaluate_fn";
        return named(op, [&] { return TreeFunction{opt::evaluate_fn(shards).erased(), op}; });
      },
      py::arg("shards"), op_doc("optim::evaluate_fn").c_str());
  m.def(
      "optim_lm_fedavg_round",
      [](py::handle spec) {
        const std::string op = "lm_fedavg_round";
        const opt::LmRoundSpec s = lm_spec_arg(spec, op);
        return named(op, [&] { return TreeFunction{opt::lm_fedavg_round(s).erased(), op}; });
      },
      py::arg("spec"), op_doc("optim::lm_fedavg_round").c_str());
  m.def(
      "optim_diloco_round",
      [](py::handle spec, py::handle outer) {
        const std::string op = "diloco_round";
        const opt::LmRoundSpec s = lm_spec_arg(spec, op);
        const opt::OuterNesterov o = outer_arg(outer, op);
        return named(op, [&] { return TreeFunction{opt::diloco_round(s, o).erased(), op}; });
      },
      py::arg("spec"), py::arg("outer"), op_doc("optim::diloco_round").c_str());
  m.def(
      "optim_diloco_inner_init",
      [](py::handle spec, py::handle params) {
        const std::string op = "diloco_inner_init";
        const opt::LmRoundSpec s = lm_spec_arg(spec, op);
        const Tree p = nested_to_tree(params, op);
        return tree_to_nested(
            unalias(named(op,
                          [&] {
                            return opt::diloco_inner_init(s, Tree::dict({{kParamsMarker, p}}));
                          }),
                    p),
            false);
      },
      py::arg("spec"), py::arg("params"),
      (op_doc("optim::diloco_inner_init") + "\n\nparams wrapped as optim_init wraps them.")
          .c_str());
  m.def(
      "optim_lm_evaluate_fn",
      [](py::handle model, int64_t shards) {
        const std::string op = "lm_evaluate_fn";
        const nn::TransformerConfig c = model_arg(model, op);
        return named(op, [&] { return TreeFunction{opt::lm_evaluate_fn(c, shards).erased(), op}; });
      },
      py::arg("model"), py::arg("shards"), op_doc("optim::lm_evaluate_fn").c_str());
}

}  // namespace

void bind_optim(py::module_& m) {
  bind_transformations(m);
  bind_schedules(m);
  bind_server(m);
  bind_rounds(m);
}

}  // namespace drx::python
