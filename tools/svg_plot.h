#pragma once
// Small SVG line plots for the training commands' metrics files: panels with axes, grid lines,
// tick labels and polylines.
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace drx::tool::svg {

// v printed with a printf format.
std::string num(double v, const char* format = "%.6g");
// s with XML's special characters escaped and control characters replaced by spaces.
std::string xml_escape(const std::string& s);
// A "nice" step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over span.
double nice_step(double span, int ticks);

struct Panel {
  double x, y, w, h;              // plot area in pixels
  double xmin, xmax, ymin, ymax;  // data ranges
  double px(double v) const { return x + (xmax > xmin ? (v - xmin) / (xmax - xmin) : 0.5) * w; }
  double py(double v) const { return y + h - (ymax > ymin ? (v - ymin) / (ymax - ymin) : 0.5) * h; }
};

// The panel's frame, horizontal grid lines with labels, x ticks (labelled when xlabels) and
// its title `ylabel`.
void axes(std::ostringstream& os, const Panel& p, const std::string& ylabel, bool xlabels);
// The points as a <polyline> with `id`.
void polyline(std::ostringstream& os, const Panel& p,
              const std::vector<std::pair<double, double>>& pts, const char* colour,
              const char* id);

}  // namespace drx::tool::svg
