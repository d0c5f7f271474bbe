#include "tools/fedavg/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tools/svg_plot.h"

namespace drx::tool::fedavg {
using svg::axes;
using svg::num;
using svg::Panel;
using svg::polyline;
using svg::xml_escape;

namespace {

// A figure of the table: "nan" as such (printf may write "-nan").
std::string cell(double v, const char* format) {
  if (std::isnan(v)) return "nan";
  return num(v, format);
}

}  // namespace

std::string metrics_csv(const std::vector<MetricsRow>& rows, bool diverged) {
  const bool dp = std::any_of(rows.begin(), rows.end(),
                              [](const MetricsRow& r) { return !std::isnan(r.epsilon); });
  std::ostringstream os;
  os << "round,train_loss,test_loss,test_accuracy,elapsed_s" << (dp ? ",epsilon" : "") << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const MetricsRow& r = rows[i];
    const bool nan_row = diverged && i + 1 == rows.size();
    os << r.round << "," << cell(r.train_loss, "%.6f") << ",";
    if (r.evaluated() || nan_row)
      os << cell(r.test_loss, "%.6f") << "," << cell(r.test_accuracy, "%.6f");
    else
      os << ",";
    os << "," << num(r.elapsed_s, "%.3f");
    if (dp) os << "," << (std::isnan(r.epsilon) ? "" : num(r.epsilon, "%.6g"));
    os << "\n";
  }
  return os.str();
}

std::string metrics_svg(const std::vector<MetricsRow>& rows, const std::string& title) {
  std::vector<std::pair<double, double>> acc, loss;
  for (const MetricsRow& r : rows) {
    if (std::isfinite(r.train_loss)) loss.emplace_back(static_cast<double>(r.round), r.train_loss);
    if (r.evaluated() && std::isfinite(r.test_accuracy))
      acc.emplace_back(static_cast<double>(r.round), r.test_accuracy);
  }
  const double width = 720, height = 560, left = 70, right = 20, top = 50, gap = 60, bottom = 50;
  const double panel_h = (height - top - gap - bottom) / 2;
  double xmin = 0, xmax = 1;
  if (!rows.empty()) xmax = std::max<double>(1, static_cast<double>(rows.back().round));
  Panel pa{left, top, width - left - right, panel_h, xmin, xmax, 0, 1};
  if (!acc.empty()) {
    double lo = 1;
    for (const auto& [_, a] : acc) lo = std::min(lo, a);
    pa.ymin = std::max(0.0, std::floor(lo * 10) / 10);
  }
  Panel pl{left, top + panel_h + gap, width - left - right, panel_h, xmin, xmax, 0, 1};
  if (!loss.empty()) {
    double hi = 0;
    for (const auto& [_, l] : loss) hi = std::max(hi, l);
    pl.ymax = hi > 0 ? hi * 1.05 : 1;
  }

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
     << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << num(width / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
     << xml_escape(title) << "</text>\n";
  axes(os, pa, "test accuracy", false);
  polyline(os, pa, acc, "#1f77b4", "test_accuracy");
  axes(os, pl, "training loss", true);
  polyline(os, pl, loss, "#d62728", "train_loss");
  os << "<text x=\"" << num(left + (width - left - right) / 2) << "\" y=\"" << num(height - 10)
     << "\" text-anchor=\"middle\">round</text>\n"
     << "</svg>\n";
  return os.str();
}

}  // namespace drx::tool::fedavg
