#include "training_board.hpp"

#include <cstdio>

namespace flx_train {

namespace {

int64_t first_step(int64_t resumed_at) { return resumed_at < 0 ? 0 : resumed_at + 1; }

// Text for TensorBoard's Markdown: each line indented 4 spaces, a code block
// (shown as written).
std::string code_block(const std::string& text) {
  std::string out = "    ";
  for (char c : text) out += c == '\n' ? std::string("\n    ") : std::string(1, c);
  return out;
}

}  // namespace

TrainingBoard::TrainingBoard(const std::string& logdir, int64_t resumed_at, const std::string& description)
    : tb_(logdir, {.purge_step = first_step(resumed_at)}) {
  tb_.log_text("run", code_block(description), first_step(resumed_at));
  tb_.flush();
}

void TrainingBoard::log_epoch(const EpochMetrics& m, const flx::State& model) {
  for (const auto& [tag, value] : m.scalars()) tb_.log_scalar(tag, value, m.step);
  for (const auto& [name, t] : model) {
    try {
      tb_.log_histogram("model/" + name, t, m.step);
    } catch (const flx::ArgumentError& e) {
      // Non-finite weights (a diverging run): the epoch's other records
      // still go in; the run goes on, as it would without --logdir.
      std::fprintf(stderr, "flx-train: --logdir: no histogram at step %lld: %s\n", static_cast<long long>(m.step),
                   e.what());
    }
  }
  tb_.flush();
}

}  // namespace flx_train
