#include "tools/training/progress.h"

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

namespace drx::tool::training {

void format_duration(char* buf, int size, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  if (seconds < 60) {
    std::snprintf(buf, static_cast<size_t>(size), "%.1fs", seconds);
  } else {
    long s = std::lround(seconds);
    if (s < 3600)
      std::snprintf(buf, static_cast<size_t>(size), "%ld:%02ld", s / 60, s % 60);
    else
      std::snprintf(buf, static_cast<size_t>(size), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60,
                    s % 60);
  }
}

Progress::Progress(std::ostream& os, bool terminal, bool quiet, const char* metric,
                   const char* metric_key)
    : os_(os), terminal_(terminal), quiet_(quiet), metric_(metric), metric_key_(metric_key) {}

void Progress::update(int64_t round, int64_t rounds, double train_loss, double test_accuracy,
                      double elapsed_s, double rate_s) {
  if (quiet_) return;
  char elapsed[32], eta[32], acc[16];
  format_duration(elapsed, sizeof elapsed, elapsed_s);
  format_duration(eta, sizeof eta, rate_s * static_cast<double>(rounds - round));
  if (std::isnan(test_accuracy))
    std::snprintf(acc, sizeof acc, "-");
  else
    std::snprintf(acc, sizeof acc, "%.4f", test_accuracy);
  char line[256];
  if (terminal_) {
    constexpr int kBar = 20;
    int filled = rounds > 0 ? static_cast<int>(kBar * round / rounds) : kBar;
    std::string bar = std::string(filled, '#') + std::string(kBar - filled, '.');
    std::snprintf(line, sizeof line, "\rround %lld/%lld [%s] loss %.4f  %s %s  %s  eta %s\033[K",
                  static_cast<long long>(round), static_cast<long long>(rounds), bar.c_str(),
                  train_loss, metric_, acc, elapsed, eta);
    os_ << line << std::flush;
    open_line_ = true;
  } else {
    std::snprintf(line, sizeof line, "round %lld/%lld loss %.4f %s %s elapsed %s eta %s\n",
                  static_cast<long long>(round), static_cast<long long>(rounds), train_loss,
                  metric_key_, acc, elapsed, eta);
    os_ << line << std::flush;
  }
}

void Progress::message(const char* text) {
  if (quiet_) return;
  finish();
  os_ << text << "\n" << std::flush;
}

void Progress::finish() {
  if (open_line_) os_ << "\n" << std::flush;
  open_line_ = false;
}

}  // namespace drx::tool::training
