// One epoch's results, as the JSON metrics line and the TensorBoard log
// (training_board.hpp) both give them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flx_train {

// v as the metrics line prints it: the stream's default form, 6 significant
// digits ("0.432781", "12345.7", "0.00075").
std::string printed(double v);

struct EpochMetrics {
  int epoch = 0;
  int64_t step = 0;  // optimiser steps taken since the run began
  double loss = 0, test_accuracy = 0;
  int64_t samples = 0;  // images trained on this epoch, by all ranks
  double train_seconds = 0, samples_per_second = 0, learning_rate = 0;
  std::string device;
  int workers = 0;  // ranks of a --distributed run (0: not distributed)

  // {"epoch":…, "step":…, "loss":…, …}: one line of JSON, numbers printed()
  // (null for NaN and infinities, which JSON lacks).
  std::string json() const;
  // The numbers TensorBoard shows, named as in json(), each the number as
  // printed (parsed back from printed()): TensorBoard's float32 of it is
  // then exactly float32 of the text a reader of the JSON line parses
  // (NaN where the line says null).
  std::vector<std::pair<std::string, double>> scalars() const;
};

}  // namespace flx_train
