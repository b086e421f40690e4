// The device registry: which backend serves which device. The CPU backend
// is built in; the others are plugins, loaded on first need and checked
// (ABI version, entry point, functional on this machine) before use. The
// reason a backend cannot be used is kept and reported.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "cpu/cpu_backend.hpp"
#include "../tensor_impl.hpp"
#include "flx/devices.hpp"
#include "registry.hpp"

namespace flx::detail {

namespace {

struct Entry {
  bool attempted = false;
  std::unique_ptr<Backend> rt;  // set when loaded and functional
  BackendStatus status;
  void* handle = nullptr;  // dlopen handle, kept for the life of the process
};

struct Registry {
  std::mutex mutex;
  std::array<Entry, backend_id_count> entries;
};
// Never destroyed: tensors at namespace scope (or otherwise alive after
// main) are freed during exit through the Backend objects held here, which
// must outlive them; the plugins stay loaded to the end anyway.
Registry& registry() {
  static Registry& r = *new Registry;
  return r;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = char(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// The backend's ABI version and its tables, as "compute v1",
// "compute v1 (lacks map, reduce)" or, for one this libflx does not know,
// "dnn v1 (unknown to this libflx)".
void describe(const Backend& b, BackendStatus& st) {
  st.abi = b.abi_version();
  st.tables.clear();
  for (const TableInfo& t : b.tables()) {
    std::string s = t.name + " v" + std::to_string(t.version);
    if (!t.known) s += " (unknown to this libflx)";
    for (size_t i = 0; i < t.missing.size(); ++i) s += (i ? ", " : " (lacks ") + t.missing[i];
    st.tables.push_back(t.missing.empty() ? s : s + ")");
  }
}

// Folders searched for plugins, in order: $FLX_BACKEND_PATH, then beside
// the libflx that is running (its flx/ folder, then its own folder; also
// where it really lies when it was loaded through a symbolic link). Installed,
// <libdir>/flx is that flx/ folder. Never a folder fixed at build time: a
// libflx in a build tree or another prefix must not load the plugins of an
// installation it is not part of.
std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FLX_BACKEND_PATH")) {
    std::stringstream ss(env);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) dirs.push_back(d);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&search_dirs), &info) && info.dli_fname) {
    auto beside = [&](const std::filesystem::path& dir) {
      for (const auto& d : {(dir / "flx").string(), dir.string()})
        if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    };
    const std::filesystem::path loaded(info.dli_fname);
    beside(loaded.parent_path());
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(loaded, ec);
    if (!ec) beside(real.parent_path());
  }
  return dirs;
}

// Find, open and check the plugin for `id`, filling e.status.
void load(BackendId id, Entry& e) {
  e.attempted = true;
  BackendStatus& st = e.status;
  st.name = std::string(backend_name(id));
  std::string file = "libflx_backend_" + lower(st.name) + ".so";
  std::string searched;
  for (const auto& dir : search_dirs()) {
    auto path = std::filesystem::path(dir) / file;
    searched += (searched.empty() ? "" : ", ") + dir;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    st.plugin_found = true;
    st.plugin_path = path.string();
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* err = dlerror();
      st.reason = "plugin " + st.plugin_path + " could not be loaded: " + (err ? err : "unknown error");
      return;
    }
    auto entry = reinterpret_cast<flx_backend_entry_fn>(dlsym(h, FLX_BACKEND_ENTRY_SYMBOL));
    if (!entry) {
      st.reason = "plugin " + st.plugin_path + " does not export the entry point " FLX_BACKEND_ENTRY_SYMBOL;
      dlclose(h);
      return;
    }
    const flx_backend* core = entry(FLX_BACKEND_ABI_MAJOR, FLX_BACKEND_ABI_MINOR);
    if (!core) {
      st.reason = "plugin " + st.plugin_path + " cannot serve backend ABI " + std::to_string(FLX_BACKEND_ABI_MAJOR) +
                  ".x, which this libflx needs. Install the plugin that came with this libflx";
      dlclose(h);
      return;
    }
    std::unique_ptr<Backend> rt;
    try {
      rt = std::make_unique<Backend>(id, core, "plugin " + st.plugin_path);
    } catch (const Error& err) {
      st.reason = err.what();
      dlclose(h);
      return;
    }
    e.handle = h;
    describe(*rt, st);
    std::string reason;
    if (rt->functional(&reason) <= 0) {
      st.reason = !reason.empty() ? reason : "the plugin reports it is not functional";
      return;
    }
    st.functional = true;
    e.rt = std::move(rt);
    return;
  }
  if (id == BackendId::AMDGPU || id == BackendId::Metal)
    st.reason = "not built in this installation (flx has no " + st.name + " backend yet)";
  else
    st.reason = "plugin " + file + " not found (searched: " + searched + "); build flx with its " + st.name +
                " backend or set FLX_BACKEND_PATH";
}

Entry& entry_for(BackendId id) {
  auto& r = registry();
  Entry& e = r.entries[size_t(id)];
  if (!e.attempted) load(id, e);
  return e;
}

}  // namespace

const Backend& cpu_rt() {
  static const Backend& cpu = *new Backend(BackendId::CPU, cpu_backend::core(), "built in");  // never destroyed, as above
  return cpu;
}

const Backend* find_backend(BackendId id) {
  if (id == BackendId::CPU) return &cpu_rt();
  std::lock_guard lock(registry().mutex);
  return entry_for(id).rt.get();
}

BackendStatus status_of(BackendId id) {
  if (id == BackendId::CPU) {
    BackendStatus s;
    s.name = "CPU";
    s.built_in = s.functional = true;
    describe(cpu_rt(), s);
    return s;
  }
  std::lock_guard lock(registry().mutex);
  return entry_for(id).status;
}

void register_backend(BackendId id, const flx_backend* core) {
  FLX_CHECK(id != BackendId::CPU, ArgumentError, "register_backend: the CPU backend is built in");
  auto rt = std::make_unique<Backend>(id, core, "registered by the program");
  std::string why;
  FLX_CHECK(rt->functional(&why) > 0, BackendUnavailable, "register_backend: the ", backend_name(id),
            " backend is not functional: ", why);
  std::lock_guard lock(registry().mutex);
  Entry& e = registry().entries[size_t(id)];
  FLX_CHECK(!e.rt, ArgumentError, "register_backend: a ", backend_name(id), " backend is already registered");
  e.attempted = true;
  e.status = BackendStatus{};
  e.status.name = std::string(backend_name(id));
  e.status.functional = true;
  describe(*rt, e.status);
  e.rt = std::move(rt);
}

// Every use of a Device (placing, moving, allocating, statistics) comes
// here, so a device that does not exist is refused at its first use.
const Backend& backend_of(Device d) {
  if (d.is_cpu()) [[likely]] {
    FLX_CHECK(d.ordinal() == 0, BackendUnavailable, "there is no device ", d.str(),
              ": the CPU backend has one device, CPU:0 (Device::cpu() or get_device(\"CPU\", 0))");
    return cpu_rt();
  }
  const Backend* rt = find_backend(d.backend_id());
  if (!rt) FLX_THROW(BackendUnavailable, "there is no device ", d.str(), ": ", d.backend(), " is not available: ",
                     status_of(d.backend_id()).reason);
  int n = rt->device_count();
  if (d.ordinal() < 0 || d.ordinal() >= n) {
    const std::string name(d.backend());
    const std::string has = n == 0   ? "0 devices"
                            : n == 1 ? "1 device, " + name + ":0"
                                     : std::to_string(n) + " devices, " + name + ":0 to " + name + ":" + std::to_string(n - 1);
    FLX_THROW(BackendUnavailable, "there is no device ", d.str(), ": ", name, " has ", has, " (flx-info lists them)");
  }
  return *rt;
}

// ---- memory statistics ------------------------------------------------------

namespace {
constexpr int kMaxOrdinals = 64;
struct Counters {
  std::atomic<int64_t> in_use{0}, peak{0}, allocations{0};
};
Counters& counters(BackendId id, int ordinal) {
  static std::array<std::array<Counters, kMaxOrdinals>, backend_id_count> all;
  return all[size_t(id)][size_t(std::clamp(ordinal, 0, kMaxOrdinals - 1))];
}
}  // namespace

void note_alloc(BackendId id, int ordinal, int64_t bytes) {
  Counters& c = counters(id, ordinal);
  int64_t now = c.in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  int64_t p = c.peak.load(std::memory_order_relaxed);
  while (now > p && !c.peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}
void note_free(BackendId id, int ordinal, int64_t bytes) {
  Counters& c = counters(id, ordinal);
  c.in_use.fetch_sub(bytes, std::memory_order_relaxed);
  c.allocations.fetch_sub(1, std::memory_order_relaxed);
}
void reset_memory_peak(const Device& d) {
  Counters& c = counters(d.backend_id(), d.ordinal());
  c.peak.store(c.in_use.load());
}

}  // namespace flx::detail

namespace flx {

MemoryStats memory_stats(const Device& d) {
  const detail::Backend& be = detail::backend_of(d);  // the device must exist
  auto& c = detail::counters(d.backend_id(), d.ordinal());
  MemoryStats m{c.in_use.load(), c.peak.load(), c.allocations.load()};
  flx_memory_info info{};
  if (be.memory_info(d.ordinal(), &info)) {
    m.reserved = int64_t(info.reserved);
    m.reserved_peak = int64_t(info.reserved_peak);
  }
  return m;
}

std::vector<PrecisionPath> precision_paths(const Device& d) {
  const detail::Backend& be = detail::backend_of(d);
  static const char* const names[FLX_PRECISION_OP_COUNT] = {"GEMM", "convolution", "batch norm", "attention",
                                                           "recurrent layers"};
  std::vector<PrecisionPath> out;
  for (DType t : {BFloat16, Float16})
    for (int32_t op = 0; op < FLX_PRECISION_OP_COUNT; ++op) {
      flx_precision_path p{};
      if (!be.precision_path(d.ordinal(), int32_t(t), op, &p)) continue;
      const char* speed = p.speed == FLX_PRECISION_FAST       ? "fast"
                          : p.speed == FLX_PRECISION_EMULATED ? "emulated"
                                                              : "missing";
      out.push_back({t, names[op], speed, p.how});
    }
  return out;
}

void synchronize(const Device& d) { detail::backend_of(d).synchronize(d.ordinal()); }

}  // namespace flx
