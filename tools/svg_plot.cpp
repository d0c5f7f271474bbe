#include "tools/svg_plot.h"

#include <cmath>
#include <cstdio>

namespace drx::tool::svg {

std::string num(double v, const char* format) {
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

double nice_step(double span, int ticks) {
  double raw = span / ticks;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

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

}  // namespace drx::tool::svg
