#pragma once
// The per-round progress report of the training commands on stderr.
#include <cstdint>
#include <iosfwd>

namespace drx::tool::training {

class Progress {
 public:
  // terminal: redraw one line with '\r'; otherwise print one plain line per round.
  // quiet: print nothing. The evaluation's figure is labelled `metric` on a
  // terminal and `metric_key` in plain lines.
  Progress(std::ostream& os, bool terminal, bool quiet, const char* metric = "test acc",
           const char* metric_key = "test_acc");
  // After round `round` of `rounds`; test_accuracy (the evaluation's figure) is NaN before the
  // first evaluation.
  // `rate_s` is the recent seconds per round, for the ETA.
  void update(int64_t round, int64_t rounds, double train_loss, double test_accuracy,
              double elapsed_s, double rate_s);
  void message(const char* text);  // a line of its own (ends a redrawn line first)
  void finish();                   // ends a redrawn line

 private:
  std::ostream& os_;
  bool terminal_, quiet_;
  const char *metric_, *metric_key_;
  bool open_line_ = false;
};

// "1:05", "12.3s": a duration for progress lines.
void format_duration(char* buf, int size, double seconds);

}  // namespace drx::tool::training
