#include "progress.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace flx_train {

using Clock = std::chrono::steady_clock;

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  int total = int(std::lround(s));
  if (total < 60) std::snprintf(buf, sizeof buf, "%ds", total);
  else if (total < 3600) std::snprintf(buf, sizeof buf, "%d:%02d", total / 60, total % 60);
  else std::snprintf(buf, sizeof buf, "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60);
  return buf;
}

ProgressBar::ProgressBar(int epoch, int epochs, int64_t batches, bool terminal)
    : epoch_(epoch), epochs_(epochs), batches_(batches), terminal_(terminal), start_(Clock::now()), last_draw_() {}

bool ProgressBar::due(int64_t batch) const {
  return terminal_ && (batch >= batches_ || Clock::now() - last_draw_ >= std::chrono::milliseconds(100));
}

void ProgressBar::step(int64_t batch, double mean_loss, int64_t samples) {
  if (!due(batch)) return;
  last_draw_ = Clock::now();
  draw(batch, mean_loss, samples, false);
}

void ProgressBar::draw(int64_t batch, double mean_loss, int64_t samples, bool final) {
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  double rate = elapsed > 0 ? double(samples) / elapsed : 0;
  double eta = batch > 0 ? elapsed * double(batches_ - batch) / double(batch) : NAN;
  constexpr int width = 30;
  int filled = batches_ ? int(width * batch / batches_) : width;
  std::string bar(size_t(filled), '#');
  bar += std::string(size_t(width - filled), '.');
  std::fprintf(stderr, "\r\033[2Kepoch %d/%d [%s] %lld/%lld  loss %.4f  %.0f samples/s  %s %s", epoch_, epochs_,
               bar.c_str(), static_cast<long long>(batch), static_cast<long long>(batches_), mean_loss, rate,
               final ? "took" : "ETA", format_duration(final ? elapsed : eta).c_str());
  std::fflush(stderr);
}

void ProgressBar::finish(double mean_loss, double accuracy, int64_t samples) {
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  if (terminal_) {
    draw(batches_, mean_loss, samples, true);
    std::fprintf(stderr, "  test accuracy %.4f\n", accuracy);
  } else {
    std::fprintf(stderr, "epoch %d/%d: loss %.4f, test accuracy %.4f, %.0f samples/s, %s\n", epoch_, epochs_,
                 mean_loss, accuracy, elapsed > 0 ? double(samples) / elapsed : 0.0,
                 format_duration(elapsed).c_str());
  }
  std::fflush(stderr);
}

MetricsLog::MetricsLog(const std::string& path) {
  if (path.empty()) return;
  path_ = path;
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw std::runtime_error("cannot open the metrics file " + path + " for appending: " + std::strerror(errno));
}
MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}
void MetricsLog::write(const std::string& obj) {
  if (!f_) return;
  if (std::fprintf(f_, "%s\n", obj.c_str()) < 0 || std::fflush(f_) != 0)
    throw std::runtime_error("cannot write to the metrics file " + path_ + ": " + std::strerror(errno));
}

}  // namespace flx_train
