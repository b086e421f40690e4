// TensorBoard logging: scalars, histograms of tensors (on any device),
// text and images, written as TensorBoard's event files, for `tensorboard --logdir DIR`
// (TensorBoardLogger.jl's TBLogger, PyTorch's SummaryWriter).
//
//   TensorBoardLogger tb("runs/mlp");
//   tb.log_scalar("loss", 0.25, step);
//   tb.log_histogram("layers.0.weight", std::get<0>(model.layers).weight, step);  // any device
//   tb.log_text("notes", "Adam, lr 1e-3", step);
//   tb.log_image("denoised", x, step);  // (W, H), (W, H, C) or a grid of (W, H, C, N), values in [0, 1]
//
// Each logger adds one new file to logdir (made if missing), named as
// TensorBoard expects, events.out.tfevents.<unix time>.<host>.<pid>.<n>, so
// a run that goes on later (a resumed training) adds its own file beside the
// first and TensorBoard shows them as one run. The file is a sequence of
// TFRecords (CRC-32C checked), each a tensorflow.Event; the first says
// "brain.Event:2". Scalars are stored as float32, as TensorBoard holds them.
//
// When data reaches the file: the logger keeps records in memory and writes
// them (to the operating system) when max_queue of them have gathered, when
// a record is logged flush_seconds after the last write, at flush(), and
// when the logger is destroyed. A crash of the program loses only the
// records not yet written; call flush() where nothing may be lost (flx-train
// does after each epoch).
//
// Errors: an empty or non-UTF-8 tag or text, an empty tensor or one with
// non-finite values in a histogram, an image of the wrong shape or element
// type are ArgumentErrors; a log directory or
// file that cannot be made or written is an IOError naming the path and the
// system's reason. A failed write keeps its records in memory for the next
// flush.
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "flx/tensor.hpp"

namespace flx {

struct FLX_API TensorBoardOptions {
  int max_queue = 10;           // records held in memory at most (1: each written at once)
  double flush_seconds = 120;   // a record logged this long after the last write writes all
  // When set, TensorBoard hides the events of earlier files in logdir whose
  // step is >= purge_step: a run resumed from a checkpoint at step S passes
  // S + 1, so that what the interrupted run logged after its checkpoint is
  // not shown twice (a SessionLog START event, as PyTorch's purge_step).
  std::optional<int64_t> purge_step;
};

// How log_image lays out a batch (W, H, C, N) of images: a grid of
// `columns` images per row (0: ceil(sqrt(N))), as many rows as needed,
// `padding` pixels of 0 (black; transparent for RGBA) between neighbours and
// in the unused cells of the last row; no border around the grid.
struct FLX_API ImageOptions {
  int64_t columns = 0;
  int64_t padding = 2;
};

class FLX_API TensorBoardLogger {
 public:
  explicit TensorBoardLogger(const std::string& logdir, TensorBoardOptions options = {});
  // Writes what is left; a failure there is reported on stderr, since a
  // destructor cannot throw (call flush() first to handle it).
  ~TensorBoardLogger();
  TensorBoardLogger(TensorBoardLogger&&) noexcept;
  TensorBoardLogger& operator=(TensorBoardLogger&&) noexcept;
  TensorBoardLogger(const TensorBoardLogger&) = delete;
  TensorBoardLogger& operator=(const TensorBoardLogger&) = delete;

  // A point of the scalar chart `tag` (stored as float32).
  void log_scalar(std::string_view tag, double value, int64_t step);
  // The distribution of every element of values (any device, any element
  // type; copied to the host) in TensorFlow's default exponential buckets,
  // with its min, max, count, sum and sum of squares.
  void log_histogram(std::string_view tag, const Tensor& values, int64_t step);
  // Text for TensorBoard's text dashboard (which renders it as Markdown).
  void log_text(std::string_view tag, std::string_view text, int64_t step);
  // An image for TensorBoard's image dashboard, stored as a PNG of 8 bits per
  // channel (the legacy Summary.Image, which TensorBoard still reads). The
  // layout is flx's (column-major, WHCN, as the datasets give images): the
  // first dim is the width (x, left to right), the second the height (y,
  // top to bottom), so image[x, y] is pixel (x, y) and a Fashion-MNIST
  // image shows upright. Shapes:
  //   (W, H)        grayscale
  //   (W, H, C)     C = 1 gray, 2 gray and alpha, 3 RGB, 4 RGBA
  //   (W, H, C, N)  N such images tiled into one grid (ImageOptions)
  // Values: any floating type (any device) is clamped to [0, 1] (NaN counts
  // as 0) and stored as floor(255 v + 0.5); UInt8 is stored as it is.
  void log_image(std::string_view tag, const Tensor& image, int64_t step, const ImageOptions& options = {});
  // Writes every record held in memory to the file.
  void flush();

  const std::string& logdir() const;
  const std::string& path() const;  // this logger's event file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Impl& impl() const;
};

}  // namespace flx
