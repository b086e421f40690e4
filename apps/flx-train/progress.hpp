// Training output as DESIGN §4 has it: on a terminal, a progress bar on
// stderr redrawn in place at most ~10 times a second (batches done, loss,
// samples/s, ETA); otherwise one plain line per epoch. Metrics go to a JSON
// lines file for other tools.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace flx_train {

class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t batches, bool terminal);
  // Whether step() would redraw now (on a terminal, at most ~10 times a
  // second, and at the last batch): the caller reads the loss only then.
  bool due(int64_t batch) const;
  // After a batch: the running mean loss and the samples seen so far.
  void step(int64_t batch, double mean_loss, int64_t samples);
  // Ends the bar (or prints the one plain line) with the epoch's results.
  void finish(double mean_loss, double accuracy, int64_t samples);

 private:
  void draw(int64_t batch, double mean_loss, int64_t samples, bool final);
  int epoch_, epochs_;
  int64_t batches_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// {"epoch":…, "step":…, "loss":…, ...} one object per line, flushed.
class MetricsLog {
 public:
  // Appends to path (empty: disabled); a failure to open or write throws,
  // saying why.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  void write(const std::string& json_object);
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

std::string format_duration(double seconds);  // "1:05", "12s"

}  // namespace flx_train
