// drx.privacy: the C++ core's differential privacy (drx/privacy/*.h), bound for
// python/drx/privacy.py. DP-FedAvg's pieces take and return a Tree as the list of its leaves
// (Python flattens and rebuilds the pytree); the RDP accountant is host code on Python floats,
// its enums spelled as strings ("poisson", "fixed_size"; "balle2020", "mironov2017";
// "gaussian_theorem27", "general_theorem9").
#include <pybind11/stl.h>

#include "drx/privacy/accountant.h"
#include "drx/privacy/dp_accounting.h"
#include "drx/privacy/dp_fedavg.h"
#include "python/src/bindings.h"

namespace drx::python {
namespace {

using privacy::FixedSizeBound;
using privacy::RdpConversion;
using privacy::Sampling;

Sampling sampling_arg(const char* fn, const std::string& s) {
  if (s == "poisson") return Sampling::poisson;
  if (s == "fixed_size") return Sampling::fixed_size;
  throw Error(std::string(fn) + ": sampling '" + s + "', expected 'poisson' or 'fixed_size'");
}

const char* sampling_name(Sampling s) { return s == Sampling::poisson ? "poisson" : "fixed_size"; }

RdpConversion conversion_arg(const char* fn, const std::string& s) {
  if (s == "balle2020") return RdpConversion::balle2020;
  if (s == "mironov2017") return RdpConversion::mironov2017;
  throw Error(std::string(fn) + ": conversion '" + s +
              "', expected 'balle2020' (the default) or 'mironov2017'");
}

FixedSizeBound bound_arg(const char* fn, const std::string& s) {
  if (s == "gaussian_theorem27") return FixedSizeBound::gaussian_theorem27;
  if (s == "general_theorem9") return FixedSizeBound::general_theorem9;
  throw Error(std::string(fn) + ": bound '" + s +
              "', expected 'gaussian_theorem27' (the default) or 'general_theorem9'");
}

py::tuple epsilon_tuple(const privacy::EpsilonAtOrder& e) {
  return py::make_tuple(e.epsilon, e.order);
}

}  // namespace

void bind_privacy(py::module_& m) {
  // ---- DP-FedAvg's pieces, on traced values ----
  m.def(
      "privacy_clip_by_l2_norm",
      [](py::object update, const Value& clip) {
        privacy::Clipped c =
            privacy::clip_by_l2_norm(py_to_leaves(update, "drx.privacy.clip_by_l2_norm"), clip);
        return py::make_tuple(leaves_to_py(c.update), c.norm);
      },
      py::arg("update"), py::arg("clip"),
      (op_doc("privacy::clip_by_l2_norm") + "\n\nupdate: a list of leaves; returns (the list of "
                                            "clipped leaves, the norm before).")
          .c_str());
  m.def(
      "privacy_gaussian_noise_like",
      [](py::object like, const Value& key, const Value& stddev) {
        return leaves_to_py(privacy::gaussian_noise_like(
            py_to_leaves(like, "drx.privacy.gaussian_noise_like"), key, stddev));
      },
      py::arg("like"), py::arg("key"), py::arg("stddev"),
      op_doc("privacy::gaussian_noise_like").c_str());
  m.def(
      "privacy_noisy_mean",
      [](py::object sum_of_clipped, const Value& key, double noise_multiplier, const Value& clip,
         double expected_cohort) {
        return leaves_to_py(
            privacy::noisy_mean(py_to_leaves(sum_of_clipped, "drx.privacy.noisy_mean"), key,
                                noise_multiplier, clip, expected_cohort));
      },
      py::arg("sum_of_clipped"), py::arg("key"), py::arg("noise_multiplier"), py::arg("clip"),
      py::arg("expected_cohort"), op_doc("privacy::noisy_mean").c_str());
  m.def(
      "privacy_adapted_clip",
      [](const Value& clip, const Value& unclipped_count, const Value& key, double target_quantile,
         double learning_rate, double count_noise, double expected_cohort) {
        privacy::AdaptiveClipping a;
        a.target_quantile = target_quantile;
        a.learning_rate = learning_rate;
        a.count_noise = count_noise;
        return privacy::adapted_clip(clip, unclipped_count, key, a, expected_cohort);
      },
      py::arg("clip"), py::arg("unclipped_count"), py::arg("key"), py::arg("target_quantile"),
      py::arg("learning_rate"), py::arg("count_noise"), py::arg("expected_cohort"),
      op_doc("privacy::adapted_clip").c_str());
  m.def("privacy_update_noise_multiplier", &privacy::update_noise_multiplier,
        py::arg("noise_multiplier"), py::arg("count_noise"),
        op_doc("privacy::update_noise_multiplier").c_str());

  // ---- the RDP accountant (host) ----
  m.def("privacy_default_rdp_orders", &privacy::default_rdp_orders,
        "The default RDP orders: 1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5, 5..63, 128, 256, "
        "512 (TF Privacy's compute_dp_sgd_privacy list).");
  m.def("privacy_rdp_poisson_gaussian", &privacy::rdp_poisson_gaussian, py::arg("q"),
        py::arg("noise_multiplier"), py::arg("orders"),
        "RDP at each order of one step of the Poisson-subsampled Gaussian mechanism "
        "(add/remove-one neighbours).");
  m.def(
      "privacy_rdp_fixed_size_gaussian",
      [](int64_t cohort_size, int64_t population, double noise_multiplier,
         const std::vector<double>& orders, const std::string& bound) {
        return privacy::rdp_fixed_size_gaussian(cohort_size, population, noise_multiplier, orders,
                                                bound_arg("rdp_fixed_size_gaussian", bound));
      },
      py::arg("cohort_size"), py::arg("population"), py::arg("noise_multiplier"), py::arg("orders"),
      py::arg("bound") = "gaussian_theorem27",
      "RDP at each order of one step of a fixed-size cohort drawn without replacement and the "
      "Gaussian mechanism (replace-one neighbours; Wang, Balle, Kasiviswanathan 2019).");
  m.def(
      "privacy_epsilon_from_rdp",
      [](const std::vector<double>& orders, const std::vector<double>& rdp, double delta,
         const std::string& conversion) {
        return epsilon_tuple(privacy::epsilon_from_rdp(
            orders, rdp, delta, conversion_arg("epsilon_from_rdp", conversion)));
      },
      py::arg("orders"), py::arg("rdp"), py::arg("delta"), py::arg("conversion") = "balle2020",
      "(epsilon, order): the smallest epsilon over the orders for delta from per-order RDP "
      "totals.");

  py::class_<privacy::RdpAccountant>(m, "privacy_RdpAccountant",
                                     "Accumulates identical steps of one subsampled Gaussian "
                                     "mechanism (drx::privacy::RdpAccountant).")
      .def(py::init([](const std::string& sampling, int64_t cohort_size, int64_t population,
                       double noise_multiplier, std::optional<std::vector<double>> orders) {
             return privacy::RdpAccountant(sampling_arg("RdpAccountant", sampling), cohort_size,
                                           population, noise_multiplier,
                                           orders ? *orders : privacy::default_rdp_orders());
           }),
           py::arg("sampling"), py::arg("cohort_size"), py::arg("population"),
           py::arg("noise_multiplier"), py::arg("orders") = py::none())
      .def("step", &privacy::RdpAccountant::step, py::arg("count") = 1)
      .def_property_readonly("steps", &privacy::RdpAccountant::steps)
      .def(
          "epsilon",
          [](const privacy::RdpAccountant& a, double delta, const std::string& conversion) {
            return epsilon_tuple(
                a.epsilon(delta, conversion_arg("RdpAccountant::epsilon", conversion)));
          },
          py::arg("delta"), py::arg("conversion") = "balle2020")
      .def_property_readonly(
          "sampling",
          [](const privacy::RdpAccountant& a) { return std::string(sampling_name(a.sampling())); })
      .def_property_readonly("sampling_rate", &privacy::RdpAccountant::sampling_rate)
      .def_property_readonly("noise_multiplier", &privacy::RdpAccountant::noise_multiplier)
      .def_property_readonly("orders", &privacy::RdpAccountant::orders)
      .def_property_readonly("rdp_per_step", &privacy::RdpAccountant::rdp_per_step)
      .def("rdp", &privacy::RdpAccountant::rdp);

  py::class_<privacy::DpFedAvgAccounting>(
      m, "privacy_DpFedAvgAccounting",
      "DP-FedAvg's accounting convention (drx::privacy::DpFedAvgAccounting).")
      .def(py::init([](const std::string& sampling, int64_t cohort, int64_t clients,
                       double noise_multiplier) {
             return privacy::DpFedAvgAccounting(sampling_arg("DpFedAvgAccounting", sampling),
                                                cohort, clients, noise_multiplier);
           }),
           py::arg("sampling"), py::arg("cohort"), py::arg("clients"), py::arg("noise_multiplier"))
      .def("epsilon", &privacy::DpFedAvgAccounting::epsilon, py::arg("rounds"), py::arg("delta"))
      .def_property_readonly("sampling",
                             [](const privacy::DpFedAvgAccounting& a) {
                               return std::string(sampling_name(a.sampling()));
                             })
      .def_property_readonly("accounted_noise_multiplier",
                             &privacy::DpFedAvgAccounting::accounted_noise_multiplier)
      .def_property_readonly("orders", &privacy::DpFedAvgAccounting::orders)
      .def_property_readonly("rdp_per_round", &privacy::DpFedAvgAccounting::rdp_per_round);
}

}  // namespace drx::python
