// The C++ half of the TensorBoard image test (tensorboard_images.py drives it):
//   tensorboard_images LOGDIR
// Logs the images below with TensorBoardLogger::log_image into LOGDIR and
// writes LOGDIR/images.json: for each tag and step the tensor's shape, its
// element type, its values (as the logger read them: widened to double, in
// flx's column-major order) and the grid options, from which the script
// computes the pixels the PNG must hold.
#include <flx/flx.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

using namespace flx;

namespace {

std::string json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LOGDIR\n", argv[0]);
    return 2;
  }
  try {
    set_seed(7);
    std::ostringstream js;
    js << "[";
    bool first = true;
    TensorBoardLogger tb(argv[1]);
    auto log = [&](const std::string& tag, const Tensor& x, int64_t step, ImageOptions o = {}) {
      tb.log_image(tag, x, step, o);
      js << (first ? "" : ",") << "\n{\"tag\":\"" << tag << "\",\"step\":" << step << ",\"dtype\":\""
         << dtype_name(x.dtype()) << "\",\"shape\":[";
      for (size_t i = 0; i < x.shape().size(); ++i) js << (i ? "," : "") << x.shape()[i];
      js << "],\"columns\":" << o.columns << ",\"padding\":" << o.padding << ",\"values\":[";
      const std::vector<double> v = x.to(Device::cpu()).to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) js << (i ? "," : "") << json_number(v[i]);
      js << "]}";
      first = false;
    };
    // Values beyond [0, 1] (clamped), NaN (0), exact halves of a level.
    std::vector<float> g(5 * 3);
    for (size_t i = 0; i < g.size(); ++i) g[i] = -0.2f + 0.1f * float(i);
    g[4] = std::numeric_limits<float>::quiet_NaN();
    g[5] = 127.5f / 255.0f;
    g[6] = std::numeric_limits<float>::infinity();
    log("gray", tensor(g, Shape{5, 3}), 0);                          // (W, H)
    log("gray", rand(Shape{5, 3}), 7);                               // a later step of the same tag
    log("gray_c1", rand(Shape{4, 6, 1}).to(Float64), 0);       // (W, H, 1), Float64
    log("gray_alpha", rand(Shape{3, 2, 2}), 0);                      // (W, H, 2)
    log("rgb", rand(Shape{7, 5, 3}) * 1.2 - 0.1, 3);                 // (W, H, 3), some clamped
    log("rgba", rand(Shape{2, 3, 4}), 0);                            // (W, H, 4)
    log("bf16", rand(Shape{3, 3}).to(BFloat16), 0);            // BFloat16
    std::vector<uint8_t> u(4 * 2 * 3);
    for (size_t i = 0; i < u.size(); ++i) u[i] = uint8_t(i * 11);
    log("uint8_rgb", tensor(u, Shape{4, 2, 3}), 0);                   // UInt8, as it is
    log("grid", rand(Shape{4, 3, 1, 5}), 0);                         // 5 images: 3 columns, 2 rows, padding 2
    log("grid_rgb", rand(Shape{3, 2, 3, 4}), 0, {.columns = 4, .padding = 1});  // one row
    log("grid_cols", rand(Shape{2, 2, 1, 5}), 0, {.columns = 2, .padding = 0}); // 2 columns, 3 rows, no gaps
    js << "\n]\n";
    tb.flush();
    std::ofstream(std::string(argv[1]) + "/images.json") << js.str();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorboard_images: %s\n", e.what());
    return 1;
  }
}
