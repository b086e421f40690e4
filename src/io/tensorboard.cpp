// TensorBoardLogger (flx/tensorboard.hpp): an event file of TFRecords
// (tfrecord.hpp), each a tensorflow.Event encoded with ProtoWriter
// (protobuf_writer.hpp).
#include "flx/tensorboard.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <vector>

#include "../util/utf8.hpp"
#include "files.hpp"
#include "flx/device.hpp"
#include "flx/error.hpp"
#include "png.hpp"
#include "protobuf_writer.hpp"
#include "tensorboard_histogram.hpp"
#include "tfrecord.hpp"

namespace flx {
namespace {

// Field numbers and enum values of the messages written, from TensorFlow's
// event.proto (Event, SessionLog), summary.proto (Summary, Summary.Value,
// SummaryMetadata, HistogramProto), tensor.proto and types.proto; the
// tensorboard Python package's compiled descriptors say the same.
namespace event {
constexpr int wall_time = 1, step = 2, file_version = 3, summary = 5, session_log = 7;
}
namespace session_log {
constexpr int status = 1, START = 1;
}
namespace summary {
constexpr int value = 1;
}
namespace value {
constexpr int tag = 1, simple_value = 2, image = 4, histo = 5, tensor = 8, metadata = 9;
}
namespace image {
constexpr int height = 1, width = 2, colorspace = 3, encoded_image_string = 4;
}
namespace metadata {
constexpr int plugin_data = 1, data_class = 4, DATA_CLASS_TENSOR = 2;
}
namespace plugin_data {
constexpr int plugin_name = 1;
}
namespace histo {
constexpr int min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6, bucket = 7;
}
namespace tensor_proto {
constexpr int dtype = 1, string_val = 8, DT_STRING = 7;
}

// Seconds since the Unix epoch, as Event.wall_time holds them.
double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

io::ProtoWriter event_at(int64_t step) {
  io::ProtoWriter e;
  e.float64(event::wall_time, wall_time()).int64(event::step, step);
  return e;
}

// An Event holding a Summary of one Value.
io::ProtoWriter summary_event(int64_t step, const io::ProtoWriter& value) {
  io::ProtoWriter s;
  s.message(summary::value, value);
  return event_at(step).message(event::summary, s);
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void check_text(std::string_view what, std::string_view tag, std::string_view text) {
  FLX_CHECK(detail::utf8_error_at(text) == std::string_view::npos, ArgumentError, "TensorBoardLogger: the ", what,
            " of \"", tag, "\" is not valid UTF-8 (bad byte at offset ", detail::utf8_error_at(text),
            "); TensorBoard reads its strings as UTF-8: convert the text first");
}

void check_tag(std::string_view tag) {
  FLX_CHECK(!tag.empty(), ArgumentError,
            "TensorBoardLogger: expected a tag (the name of the chart), got an empty one; name it, e.g. \"loss\"");
  FLX_CHECK(detail::utf8_error_at(tag) == std::string_view::npos, ArgumentError,
            "TensorBoardLogger: the tag is not valid UTF-8 (bad byte at offset ", detail::utf8_error_at(tag),
            "); TensorBoard reads tags as UTF-8: use UTF-8 names");
}

}  // namespace

struct TensorBoardLogger::Impl {
  std::mutex mu;
  std::string logdir, path;
  io::Fd fd;
  TensorBoardOptions options;
  std::string pending;  // framed records not written yet (or only in part)
  int pending_records = 0;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  void add(const io::ProtoWriter& event) {
    io::append_record(pending, event.encoded());
    ++pending_records;
    const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_write).count();
    if (pending_records >= options.max_queue || since >= options.flush_seconds) write_out();
  }

  // Writes `pending` to the file. On failure what was written is dropped
  // from it and the rest kept, so that a later call completes the records.
  void write_out() {
    size_t done = 0;
    while (done < pending.size()) {
      ssize_t n = ::write(fd.get(), pending.data() + done, pending.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        pending.erase(0, done);
        FLX_THROW(IOError, "TensorBoardLogger: cannot write to ", path, ": ", std::strerror(err),
                  err == ENOSPC || err == EDQUOT || err == EFBIG ? "; free some disk space" : "", "; the ",
                  pending.size(), " bytes not written are kept in memory and written by the next flush()");
      }
      done += size_t(n);
    }
    pending.clear();
    pending_records = 0;
    last_write = std::chrono::steady_clock::now();
  }
};

TensorBoardLogger::TensorBoardLogger(const std::string& logdir, TensorBoardOptions options)
    : impl_(std::make_unique<Impl>()) {
  namespace fs = std::filesystem;
  FLX_CHECK(!logdir.empty(), ArgumentError,
            "TensorBoardLogger: expected a log directory, got an empty path; give one, such as \"runs/mlp\"");
  FLX_CHECK(options.max_queue >= 1, ArgumentError, "TensorBoardLogger: max_queue must be at least 1 (records held ",
            "before writing; 1 writes each at once), got ", options.max_queue);
  FLX_CHECK(options.flush_seconds >= 0, ArgumentError,
            "TensorBoardLogger: flush_seconds must be a number of seconds >= 0, got ", options.flush_seconds);
  Impl& m = *impl_;
  m.logdir = logdir;
  m.options = options;
  struct stat st {};
  if (::stat(logdir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    FLX_THROW(IOError, "TensorBoardLogger: the log directory ", logdir, " is ", io::file_kind(st.st_mode),
              ", not a directory; choose another path");
  std::error_code ec;
  fs::create_directories(logdir, ec);
  if (ec)
    FLX_THROW(IOError, "TensorBoardLogger: cannot create the log directory ", logdir, ": ", ec.message(),
              "; choose a directory you can write to");

  // A fresh file: O_EXCL, with a counter for loggers made in the same second.
  static std::atomic<unsigned> counter{0};
  const std::string stem = [] {
    char t[32];
    std::snprintf(t, sizeof t, "%010lld", static_cast<long long>(std::time(nullptr)));
    return std::string("events.out.tfevents.") + t + "." + host_name() + "." + std::to_string(::getpid()) + ".";
  }();
  for (int attempt = 0; attempt < 100 && !m.fd; ++attempt) {
    m.path = (fs::path(logdir) / (stem + std::to_string(counter++))).string();
    m.fd = io::Fd(::open(m.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666));
    if (!m.fd && errno != EEXIST)
      FLX_THROW(IOError, "TensorBoardLogger: cannot create the event file ", m.path, ": ", std::strerror(errno),
                "; choose a log directory you can write to");
  }
  FLX_CHECK(bool(m.fd), IOError, "TensorBoardLogger: cannot create an event file in ", logdir,
            ": 100 names in a row were taken; remove old event files from it");

  // The file's first record says what it holds; a purge step follows it.
  m.add(event_at(0).bytes(event::file_version, "brain.Event:2"));
  if (options.purge_step) {
    io::ProtoWriter log;
    log.enumeration(session_log::status, session_log::START);
    m.add(event_at(*options.purge_step).message(event::session_log, log));
  }
  m.write_out();
}

TensorBoardLogger::~TensorBoardLogger() {
  if (!impl_) return;
  try {
    flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flx: %s (at the end of the logger: these records are lost)\n", e.what());
  }
}

TensorBoardLogger::TensorBoardLogger(TensorBoardLogger&&) noexcept = default;

TensorBoardLogger& TensorBoardLogger::operator=(TensorBoardLogger&& o) noexcept {
  if (this != &o) {
    TensorBoardLogger old(std::move(*this));  // flushes the file this one had
    impl_ = std::move(o.impl_);
  }
  return *this;
}

TensorBoardLogger::Impl& TensorBoardLogger::impl() const {
  FLX_CHECK(impl_ != nullptr, ArgumentError,
            "TensorBoardLogger: this logger was moved from; use the logger it was moved to");
  return *impl_;
}

void TensorBoardLogger::log_scalar(std::string_view tag, double value, int64_t step) {
  check_tag(tag);
  io::ProtoWriter v;
  v.bytes(value::tag, tag).float32(value::simple_value, static_cast<float>(value));
  Impl& m = impl();
  std::lock_guard lock(m.mu);
  m.add(summary_event(step, v));
}

void TensorBoardLogger::log_histogram(std::string_view tag, const Tensor& values, int64_t step) {
  check_tag(tag);
  FLX_CHECK(values.defined(), ArgumentError, "TensorBoardLogger: histogram \"", tag,
            "\": expected a tensor, got an undefined one");
  FLX_CHECK(values.numel() > 0, ArgumentError, "TensorBoardLogger: histogram \"", tag,
            "\": expected a tensor with elements, got one of shape ", values.shape().str(),
            "; TensorBoard cannot show an empty histogram");
  // On the host first (any device), then widened there (any element type).
  const std::vector<double> xs = values.detach().to(Device::cpu()).to_vector<double>();
  size_t bad = 0;
  for (double x : xs) bad += !std::isfinite(x);
  FLX_CHECK(bad == 0, ArgumentError, "TensorBoardLogger: histogram \"", tag, "\": ", bad, " of ", xs.size(),
            " values are not finite (NaN or infinite), and TensorBoard's histograms hold finite values only; "
            "find where they come from (a diverging loss?) or log the finite ones");
  const io::HistogramSummary h = io::summarize(xs);
  io::ProtoWriter hp;
  hp.float64(histo::min, h.min)
      .float64(histo::max, h.max)
      .float64(histo::num, h.num)
      .float64(histo::sum, h.sum)
      .float64(histo::sum_squares, h.sum_squares)
      .packed_float64(histo::bucket_limit, h.bucket_limit)
      .packed_float64(histo::bucket, h.bucket);
  io::ProtoWriter v;
  v.bytes(value::tag, tag).message(value::histo, hp);
  Impl& m = impl();
  std::lock_guard lock(m.mu);
  m.add(summary_event(step, v));
}

void TensorBoardLogger::log_text(std::string_view tag, std::string_view text, int64_t step) {
  check_tag(tag);
  check_text("text", tag, text);
  // The text plugin's form: its name in the metadata, and the text as a
  // rank-0 DT_STRING tensor (as tf.summary.text writes it).
  io::ProtoWriter plugin, meta, t, v;
  plugin.bytes(plugin_data::plugin_name, "text");
  meta.message(metadata::plugin_data, plugin).enumeration(metadata::data_class, metadata::DATA_CLASS_TENSOR);
  t.enumeration(tensor_proto::dtype, tensor_proto::DT_STRING).bytes(tensor_proto::string_val, text);
  v.bytes(value::tag, tag).message(value::metadata, meta).message(value::tensor, t);
  Impl& m = impl();
  std::lock_guard lock(m.mu);
  m.add(summary_event(step, v));
}

void TensorBoardLogger::log_image(std::string_view tag, const Tensor& image, int64_t step,
                                  const ImageOptions& options) {
  check_tag(tag);
  FLX_CHECK(image.defined(), ArgumentError, "TensorBoardLogger: image \"", tag,
            "\": expected a tensor, got an undefined one");
  const Shape& s = image.shape();
  FLX_CHECK(s.size() >= 2 && s.size() <= 4, ArgumentError, "TensorBoardLogger: image \"", tag,
            "\": expected (W, H), (W, H, C) or (W, H, C, N), got a tensor of shape ", s.str());
  const int64_t w = s[0], h = s[1], c = s.size() > 2 ? s[2] : 1, n = s.size() > 3 ? s[3] : 1;
  FLX_CHECK(c >= 1 && c <= 4, ArgumentError, "TensorBoardLogger: image \"", tag, "\" of shape ", s.str(), ": ",
            c, " channels in dim 2; expected 1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA)");
  FLX_CHECK(w >= 1 && h >= 1 && n >= 1, ArgumentError, "TensorBoardLogger: image \"", tag,
            "\": expected at least one pixel, got a tensor of shape ", s.str());
  FLX_CHECK(is_floating(image.dtype()) || image.dtype() == UInt8, ArgumentError, "TensorBoardLogger: image \"",
            tag, "\": expected floating values in [0, 1] or UInt8 ones in 0..255, got ", image.dtype(),
            "; convert it first (e.g. to Float32 and divide by its maximum)");
  FLX_CHECK(options.columns >= 0 && options.padding >= 0, ArgumentError, "TensorBoardLogger: image \"", tag,
            "\": ImageOptions' columns (", options.columns, ") and padding (", options.padding,
            ") must be >= 0");
  // The bytes of every element, in the tensor's (column-major) order.
  std::vector<uint8_t> px;
  const Tensor host = image.detach().to(Device::cpu());
  if (image.dtype() == UInt8) {
    px = host.to_vector<uint8_t>();
  } else {
    const std::vector<float> v = host.to_vector<float>();
    px.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const float x = std::isnan(v[i]) ? 0.0f : std::clamp(v[i], 0.0f, 1.0f);
      px[i] = uint8_t(std::floor(double(x) * 255.0 + 0.5));
    }
  }
  // The grid: image k at column k % cols, row k / cols.
  const int64_t cols = options.columns > 0 ? std::min(options.columns, n)
                                           : int64_t(std::ceil(std::sqrt(double(n)) - 1e-9));
  const int64_t rows = (n + cols - 1) / cols, pad = options.padding;
  const int64_t gw = cols * w + (cols - 1) * pad, gh = rows * h + (rows - 1) * pad;
  FLX_CHECK(gw < (int64_t(1) << 31) && gh < (int64_t(1) << 31), ArgumentError, "TensorBoardLogger: image \"", tag,
            "\": a grid of ", gw, "×", gh, " pixels is too large for a PNG");
  std::vector<uint8_t> grid(size_t(gw) * size_t(gh) * size_t(c), 0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t x0 = (k % cols) * (w + pad), y0 = (k / cols) * (h + pad);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          grid[size_t(((y0 + y) * gw + x0 + x) * c + ch)] = px[size_t(x + w * (y + h * (ch + c * k)))];
  }
  io::ProtoWriter img, v;
  img.int64(image::height, gh)
      .int64(image::width, gw)
      .int64(image::colorspace, c)  // 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA: the channel count
      .bytes(image::encoded_image_string, io::encode_png(grid.data(), gw, gh, int(c)));
  v.bytes(value::tag, tag).message(value::image, img);
  Impl& m = impl();
  std::lock_guard lock(m.mu);
  m.add(summary_event(step, v));
}

void TensorBoardLogger::flush() {
  Impl& m = impl();
  std::lock_guard lock(m.mu);
  if (!m.pending.empty()) m.write_out();
}

const std::string& TensorBoardLogger::logdir() const { return impl().logdir; }
const std::string& TensorBoardLogger::path() const { return impl().path; }

}  // namespace flx
