#include "tools/fedavg/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace drx::tool::fedavg {
namespace {

std::string num(double v, const char* format = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') ? ' ' : c;
    }
  }
  return out;
}

// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over span.
double nice_step(double span, int ticks) {
  double raw = span / ticks;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

struct Panel {
  double x, y, w, h;              // plot area in pixels
  double xmin, xmax, ymin, ymax;  // data ranges
  double px(double v) const { return x + (xmax > xmin ? (v - xmin) / (xmax - xmin) : 0.5) * w; }
  double py(double v) const { return y + h - (ymax > ymin ? (v - ymin) / (ymax - ymin) : 0.5) * h; }
};

void axes(std::ostringstream& os, const Panel& p, const std::string& ylabel, bool xlabels) {
  os << "<rect x=\"" << num(p.x) << "\" y=\"" << num(p.y) << "\" width=\"" << num(p.w)
     << "\" height=\"" << num(p.h) << "\" fill=\"none\" stroke=\"#444\"/>\n";
  double ystep = nice_step(p.ymax - p.ymin, 5);
  for (double v = std::ceil(p.ymin / ystep) * ystep; v <= p.ymax + 1e-9 * ystep; v += ystep) {
    double yy = p.py(v);
    os << "<line x1=\"" << num(p.x) << "\" y1=\"" << num(yy) << "\" x2=\"" << num(p.x + p.w)
       << "\" y2=\"" << num(yy) << "\" stroke=\"#ddd\"/>\n"
       << "<text x=\"" << num(p.x - 6) << "\" y=\"" << num(yy + 4) << "\" text-anchor=\"end\">"
       << num(std::abs(v) < 1e-12 ? 0 : v, "%g") << "</text>\n";
  }
  double xstep = std::max(1.0, nice_step(p.xmax - p.xmin, 8));
  for (double v = std::ceil(p.xmin / xstep) * xstep; v <= p.xmax + 1e-9; v += xstep) {
    double xx = p.px(v);
    os << "<line x1=\"" << num(xx) << "\" y1=\"" << num(p.y + p.h) << "\" x2=\"" << num(xx)
       << "\" y2=\"" << num(p.y + p.h + 4) << "\" stroke=\"#444\"/>\n";
    if (xlabels)
      os << "<text x=\"" << num(xx) << "\" y=\"" << num(p.y + p.h + 18)
         << "\" text-anchor=\"middle\">" << num(v, "%g") << "</text>\n";
  }
  os << "<text x=\"" << num(p.x) << "\" y=\"" << num(p.y - 8) << "\" font-weight=\"bold\">"
     << xml_escape(ylabel) << "</text>\n";
}

void polyline(std::ostringstream& os, const Panel& p,
              const std::vector<std::pair<double, double>>& pts, const char* colour,
              const char* id) {
  os << "<polyline id=\"" << id << "\" fill=\"none\" stroke=\"" << colour
     << "\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < pts.size(); ++i)
    os << (i ? " " : "") << num(p.px(pts[i].first), "%.2f") << ","
       << num(p.py(pts[i].second), "%.2f");
  os << "\"/>\n";
}

}  // namespace

bool MetricsRow::evaluated() const { return !std::isnan(test_accuracy); }

std::string metrics_csv(const std::vector<MetricsRow>& rows) {
  const bool dp = std::any_of(rows.begin(), rows.end(),
                              [](const MetricsRow& r) { return !std::isnan(r.epsilon); });
  std::ostringstream os;
  os << "round,train_loss,test_loss,test_accuracy,elapsed_s" << (dp ? ",epsilon" : "") << "\n";
  for (const MetricsRow& r : rows) {
    os << r.round << "," << num(r.train_loss, "%.6f") << ",";
    if (r.evaluated())
      os << num(r.test_loss, "%.6f") << "," << num(r.test_accuracy, "%.6f");
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
