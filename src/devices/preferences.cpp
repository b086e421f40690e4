// The GPU backend preference: LocalPreferences.toml, table [Flux], key
// gpu_backend (as Preferences.jl stores Flux's), overridden by
// $FLX_GPU_BACKEND.
#include <toml++/toml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "devices/preferences.hpp"
#include "flx/devices.hpp"
#include "../util/atomic_file.hpp"
#include "flx/error.hpp"
#include "log.hpp"
#include "names.hpp"

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

// The backend a preference names, canonically spelt; an ArgumentError
// saying where the name came from (`where`) and how to change it (`fix`)
// when it names none.
std::string canonical(std::string_view name, const std::string& where, const std::string& fix) {
  auto id = known_backend(name);
  FLX_CHECK(id, ArgumentError, "unknown backend \"", name, "\" in ", where, "; expected one of ", backend_names(),
            " (any case). ", fix);
  return std::string(backend_name(*id));
}

// How to put the file right, for errors about what it holds.
std::string fix_file() {
  return "Edit the file to read gpu_backend = \"CUDA\" (or another of those names) under [Flux], call "
         "gpu_backend(\"CUDA\") to rewrite it, or override it with the environment variable FLX_GPU_BACKEND";
}

// "integer 42", "boolean true", "array [ 1 ]": a TOML value for a message.
std::string describe(const toml::node& n) {
  std::ostringstream os;
  os << n.type() << " ";
  n.visit([&](const auto& v) { os << v; });
  return os.str();
}

struct Cached {
  std::once_flag once;
  std::string value, source;
};
Cached& cache() {
  static Cached c;
  return c;
}

// The preference in force and where it came from. A value that names no
// backend, or is no string, is an error here, when the backend is chosen,
// as Flux errors on an unsupported GPU_BACKEND; never the default in silence.
void read_preference(std::string& value, std::string& source) {
  if (const char* env = std::getenv("FLX_GPU_BACKEND"); env && *env) {
    value = canonical(env, "the environment variable FLX_GPU_BACKEND",
                      "Set FLX_GPU_BACKEND to one of them, or unset it to use the preference in " +
                          std::string(kFile));
    source = "environment (FLX_GPU_BACKEND)";
    return;
  }
  if (auto p = find_file()) {
    toml::table t = parse_file(*p);
    const std::string file = p->string();
    if (const toml::node* flux = t.get("Flux")) {
      FLX_CHECK(flux->is_table(), ArgumentError, file, ": Flux is ", describe(*flux),
                "; expected the table [Flux] that holds gpu_backend. ", fix_file());
      if (const toml::node* v = flux->as_table()->get("gpu_backend")) {
        FLX_CHECK(v->is_string(), ArgumentError, file, ": [Flux] gpu_backend is ", describe(*v),
                  "; expected a string naming the GPU backend, one of ", backend_names(), ". ", fix_file());
        value = canonical(v->as_string()->get(), file + ", [Flux] gpu_backend", fix_file());
        source = file;
        return;
      }
    }
  }
  value = "CUDA";
  source = "default";
}

void ensure_read() {
  Cached& c = cache();
  std::call_once(c.once, [&] { read_preference(c.value, c.source); });
}

// t with [Flux] gpu_backend = value (the table made if missing).
toml::table with_backend(toml::table t, const std::string& value) {
  if (!t.contains("Flux") || !t["Flux"].is_table()) t.insert_or_assign("Flux", toml::table{});
  t["Flux"].as_table()->insert_or_assign("gpu_backend", value);
  return t;
}

std::string trim(std::string_view s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string_view::npos ? std::string() : std::string(s.substr(a, b - a + 1));
}

// The table a header line opens ("Flux" for [Flux], [ "Flux" ]), "" for a
// line that is not a header, "[[" for an array of tables.
std::string header_of(const std::string& line) {
  std::string t = trim(line);
  if (t.rfind("[[", 0) == 0) return "[[";
  if (t.empty() || t[0] != '[') return "";
  size_t close = t.find(']');
  if (close == std::string::npos) return "";
  std::string name = trim(std::string_view(t).substr(1, close - 1));
  if (name.size() >= 2 && (name.front() == '"' || name.front() == '\'') && name.back() == name.front())
    name = name.substr(1, name.size() - 2);
  return name;
}

// Is this line `key = ...` (the key bare or quoted)?
bool is_key_line(const std::string& line, std::string_view key) {
  std::string_view t = line;
  t.remove_prefix(std::min(t.size(), t.find_first_not_of(" \t")));
  char quote = !t.empty() && (t[0] == '"' || t[0] == '\'') ? t[0] : 0;
  if (quote) t.remove_prefix(1);
  if (t.substr(0, key.size()) != key) return false;
  t.remove_prefix(key.size());
  if (quote) {
    if (t.empty() || t[0] != quote) return false;
    t.remove_prefix(1);
  }
  t.remove_prefix(std::min(t.size(), t.find_first_not_of(" \t")));
  return !t.empty() && t[0] == '=';
}

// The file's text with [Flux] gpu_backend = value and every other line kept
// as it was, comments and layout included. Checked by parsing the result: it
// must be the old table with just that key set, else nullopt (an unusual
// layout, e.g. a dotted key Flux.gpu_backend at the top) and the caller
// rewrites the whole file from the parsed table instead.
std::optional<std::string> edit_preference(const std::string& text, const toml::table& old, const std::string& value) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const std::string entry = "gpu_backend = \"" + value + "\"";
  std::string table;
  bool done = false;
  std::optional<size_t> flux_header;
  for (size_t i = 0; i < lines.size() && !done; ++i) {
    if (std::string h = header_of(lines[i]); !h.empty()) {
      table = h;
      if (h == "Flux") flux_header = i;
    } else if (table == "Flux" && is_key_line(lines[i], "gpu_backend")) {
      lines[i] = entry;
      done = true;
    }
  }
  if (!done && flux_header) lines.insert(lines.begin() + std::ptrdiff_t(*flux_header) + 1, entry);
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  if (!done && !flux_header) out += (out.empty() || out.ends_with("\n\n") ? "" : "\n") + std::string("[Flux]\n") + entry + "\n";
  try {
    if (toml::parse(out) == with_backend(old, value)) return out;
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

}  // namespace

std::optional<bool> preference_bool(const std::string& key, std::string* source) {
  auto p = find_file();
  if (!p) return std::nullopt;
  toml::table t = parse_file(*p);
  const toml::node* flux = t.get("Flux");
  if (!flux || !flux->is_table()) return std::nullopt;
  const toml::node* v = flux->as_table()->get(key);
  if (!v) return std::nullopt;
  FLX_CHECK(v->is_boolean(), ArgumentError, p->string(), ": [Flux] ", key, " is ", describe(*v),
            "; expected true or false");
  if (source) *source = p->string() + ", [Flux] " + key;
  return v->as_boolean()->get();
}

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
  const std::string value(backend_name(backend_id_from_name(name)));  // validates
  auto found = detail::find_file();
  fs::path path = found ? *found : fs::current_path() / detail::kFile;
  toml::table t = found ? detail::parse_file(path) : toml::table{};
  std::string text;
  if (found) {
    std::ifstream is(path);
    text.assign(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
  }
  std::optional<std::string> edited = detail::edit_preference(text, t, value);
  if (!edited) {  // rewrite from the table: the same settings, comments lost
    std::ostringstream os;
    os << detail::with_backend(t, value) << "\n";
    edited = os.str();
  }
  // Never a half-written file: a temporary file beside it, then a rename.
  auto failure = detail::write_file_atomic(
      path.string(), std::span(reinterpret_cast<const uint8_t*>(edited->data()), edited->size()));
  FLX_CHECK(!failure, ArgumentError, "gpu_backend: cannot write the preference to ", path.string(), " (",
            failure.text(), "); ",
            failure.replaced ? "it may not survive a crash" : found ? "the file is unchanged" : "nothing was written",
            ". Make its directory writable, or set the environment variable FLX_GPU_BACKEND=", value,
            " instead (it overrides the file)");
  detail::log_info_box({"New GPU backend set: " + value + ".", "Restart your program for this change to take effect!"});
}

}  // namespace flx
