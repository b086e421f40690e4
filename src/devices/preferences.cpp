// The GPU backend preference: LocalPreferences.toml, table [Flux], key
// gpu_backend (as Preferences.jl stores Flux's), overridden by
// $FLX_GPU_BACKEND.
#include <toml++/toml.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "flx/devices.hpp"
#include "flx/error.hpp"
#include "log.hpp"

namespace fs = std::filesystem;

namespace flx {
namespace detail {
namespace {

constexpr const char* kFile = "LocalPreferences.toml";

std::optional<fs::path> find_file() {
  std::error_code ec;
  fs::path dir = fs::current_path(ec);
  if (ec) return std::nullopt;
  for (;;) {
    fs::path p = dir / kFile;
    if (fs::is_regular_file(p, ec)) return p;
    if (!dir.has_parent_path() || dir.parent_path() == dir) return std::nullopt;
    dir = dir.parent_path();
  }
}

toml::table parse_file(const fs::path& p) {
  try {
    return toml::parse_file(p.string());
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " at line " << e.source().begin.line;
    FLX_THROW(ArgumentError, "preferences file ", p.string(), " is not valid TOML (", os.str(),
              "); fix or delete it");
  }
}

std::string canonical(std::string_view name) { return std::string(backend_name(backend_id_from_name(name))); }

struct Cached {
  std::once_flag once;
  std::string value, source;
};
Cached& cache() {
  static Cached c;
  return c;
}

void read_preference(std::string& value, std::string& source) {
  if (const char* env = std::getenv("FLX_GPU_BACKEND"); env && *env) {
    value = canonical(env);
    source = "environment (FLX_GPU_BACKEND)";
    return;
  }
  if (auto p = find_file()) {
    toml::table t = parse_file(*p);
    if (auto v = t["Flux"]["gpu_backend"].value<std::string>()) {
      value = canonical(*v);
      source = p->string();
      return;
    }
  }
  value = "CUDA";
  source = "default";
}

void ensure_read() {
  Cached& c = cache();
  std::call_once(c.once, [&] { read_preference(c.value, c.source); });
}

}  // namespace
}  // namespace detail

std::string gpu_backend() {
  detail::ensure_read();
  return detail::cache().value;
}

std::string gpu_backend_source() {
  detail::ensure_read();
  return detail::cache().source;
}

void gpu_backend(std::string_view name) {
  std::string value = detail::canonical(name);  // validates
  auto found = detail::find_file();
  fs::path path = found ? *found : fs::current_path() / detail::kFile;
  toml::table t = found ? detail::parse_file(path) : toml::table{};
  if (!t.contains("Flux") || !t["Flux"].is_table()) t.insert_or_assign("Flux", toml::table{});
  t["Flux"].as_table()->insert_or_assign("gpu_backend", value);
  // Write a temporary file beside it, then rename: never a half-written file.
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream os(tmp);
    FLX_CHECK(os, ArgumentError, "gpu_backend: cannot write ", tmp.string());
    os << t << "\n";
    FLX_CHECK(os.good(), ArgumentError, "gpu_backend: writing ", tmp.string(), " failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  FLX_CHECK(!ec, ArgumentError, "gpu_backend: cannot replace ", path.string(), ": ", ec.message());
  detail::log_info_box({"New GPU backend set: " + value + ".", "Restart your program for this change to take effect!"});
}

}  // namespace flx
