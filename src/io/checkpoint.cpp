// Checkpoints on top of the safetensors format layer: State, save, load,
// loadmodel for models and optimiser states. flx tensors are column-major,
// safetensors row-major with the same shape: saving reverses the dims with
// permutedims and loading reverses them back.
#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>
#include <set>
#include <sstream>

#include <filesystem>

#include "../autograd.hpp"
#include "../util/atomic_file.hpp"
#include "../tensor_impl.hpp"
#include "flx/checkpoints.hpp"
#include "flx/ops.hpp"
#include "files.hpp"
#include "key_mapping.hpp"
#include "internal/distributed_interface.hpp"  // walk_opt_state
#include "safetensors.hpp"

namespace flx {

// ---- State ---------------------------------------------------------------------

void State::insert(const std::string& name, const Tensor& t) {
  FLX_CHECK(!name.empty(), ArgumentError, "State: a tensor needs a name");
  FLX_CHECK(t.defined(), ArgumentError, "State: \"", name, "\" is an undefined tensor");
  FLX_CHECK(index_.emplace(name, entries_.size()).second, ArgumentError, "State: \"", name, "\" is there already");
  entries_.emplace_back(name, t);
}

bool State::contains(const std::string& name) const { return index_.count(name) != 0; }

const Tensor& State::at(const std::string& name) const {
  auto it = index_.find(name);
  FLX_CHECK(it != index_.end(), CheckpointError, "State: no tensor \"", name, "\"; it holds ", size(), " tensors");
  return entries_[it->second].second;
}

std::ostream& operator<<(std::ostream& os, const State& s) {
  os << "State with " << s.size() << " tensors:";
  for (const auto& [name, t] : s) os << "\n  " << name << " " << t.shape() << " " << t.dtype();
  for (const auto& [k, v] : s.metadata()) os << "\n  [" << k << "] " << v;
  return os;
}

namespace {

// Metadata that marks an optimiser state and names its rule.
constexpr const char* kKind = "flx.kind";
constexpr const char* kOptKind = "optimiser state";
constexpr const char* kRule = "flx.rule";
// The paths of the frozen leaves (freeze(state, path)), one per line; absent
// in checkpoints written before they were saved.
constexpr const char* kFrozen = "flx.frozen";

// Reversing the dims turns column-major storage into the row-major order of
// the same shape, and back.
std::vector<int> reversed_dims(int n) {
  auto p = std::vector<int>(static_cast<size_t>(n));
  std::iota(p.rbegin(), p.rend(), 0);
  return p;
}

std::string names_of(const State& s) {
  std::string out;
  size_t k = 0;
  for (const auto& [name, t] : s) {
    if (k++ == 8) return out + ", ... (" + std::to_string(s.size()) + " in all)";
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "nothing" : out;
}

// Why a checkpoint's shape differs from the model's: a matrix or a
// convolution weight in PyTorch's layout (the model's dims reversed), or
// another model.
std::string shape_advice(const Shape& file, const Shape& model) {
  bool reversed = file.ndims() == model.ndims() && file.ndims() >= 2;
  for (int i = 0; reversed && i < file.ndims(); ++i) reversed = file[i] == model[model.ndims() - 1 - i];
  if (reversed && file.ndims() == 2)
    return "its dims reversed are the model's, as in a PyTorch nn.Embedding weight [n, d] (flx's Embedding holds "
           "(d, n)) or the weight of a LayerNorm over two dims: transpose it with permutedims(w, {1, 0}), e.g. by "
           "map_tensors (see docs/checkpoints.md)";
  if (reversed)
    return "its dims reversed are the model's, as in a PyTorch convolution weight [out, in, kernel...]: convert it "
           "with torch_to_crosscor (into CrossCor) or torch_to_conv (into Conv), e.g. by map_tensors "
           "(see docs/checkpoints.md)";
  return "the checkpoint is for another model";
}

}  // namespace

void save(const std::string& path, const State& s) {
  autograd::PauseScope pause;
  std::vector<Tensor> host;  // keeps the bytes alive until written
  std::vector<safetensors::WriteEntry> entries;
  for (const auto& [name, t] : s) {
    Tensor c = t.to(Device::cpu());
    if (c.ndims() >= 2) c = permutedims(c, reversed_dims(c.ndims()));
    host.push_back(c);
    safetensors::WriteEntry e;
    e.name = name;
    e.dtype = c.dtype();
    e.shape.assign(t.shape().begin(), t.shape().end());
    e.data = detail::host_data(c);
    e.nbytes = size_t(c.numel()) * dtype_size(c.dtype());
    entries.push_back(std::move(e));
  }
  auto bytes = safetensors::serialize(entries, s.metadata());
  io::write_atomic(path, bytes);
}

std::vector<std::string> interrupted_saves(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string base = p.filename().string();
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (detail::is_temp_name_for(it->path().filename().string(), base) && it->is_regular_file(ec))
      found.push_back(it->path().string());
  FLX_CHECK(!ec || ec == std::errc::no_such_file_or_directory, CheckpointError, "interrupted_saves: cannot list ",
            dir.string(), ": ", ec.message());
  std::sort(found.begin(), found.end());
  return found;
}

namespace detail {

State load_bytes(std::span<const uint8_t> bytes, const std::string& origin) try {
  // parse() checks the whole header against the file, and the loop below
  // what flx can hold, before anything allocates a tensor.
  const safetensors::Header h = safetensors::parse(bytes, origin);
  for (const auto& e : h.entries)
    FLX_CHECK(e.shape.size() <= size_t(Shape::max_dims), CheckpointError, origin, ": tensor ",
              safetensors::show_name(e.name), " has ", e.shape.size(), " dims ", safetensors::show_shape(e.shape),
              ", but flx tensors have at most ", Shape::max_dims, " dims (FLX_MAX_DIMS); reshape it to ",
              Shape::max_dims, " dims or fewer (merge adjacent dims) before saving it");
  autograd::PauseScope pause;
  State s;
  for (const auto& e : h.entries) {
    Shape file_shape;
    for (auto d : e.shape) file_shape.push_back(d);
    Shape stored;  // the dims reversed: column-major storage of the row-major bytes
    for (auto it = e.shape.rbegin(); it != e.shape.rend(); ++it) stored.push_back(*it);
    const uint8_t* src = bytes.data() + h.data_start + e.begin;
    Tensor t = empty(e.dtype, stored);
    if (size_t n = e.end - e.begin) {
      auto* dst = static_cast<uint8_t*>(host_data(t));
      if (e.dtype == DType::Bool)  // a byte other than 0 or 1 is not a valid bool
        for (size_t i = 0; i < n; ++i) dst[i] = src[i] != 0;
      else
        std::memcpy(dst, src, n);
    }
    if (file_shape.ndims() >= 2) t = permutedims(t, reversed_dims(file_shape.ndims()));
    s.insert(e.name, t);
  }
  s.metadata() = h.metadata;
  return s;
} catch (const std::bad_alloc&) {
  FLX_THROW(CheckpointError, origin, ": not enough memory to load the checkpoint's ", bytes.size(),
            " bytes as tensors; free memory, or load it on a machine with more");
}

void load_into(const std::vector<State::Entry>& targets, const State& s, const char* what,
               const std::map<std::string, std::string>* from, const std::string& hint) {
  // "layers.1.weight" (checkpoint key "2.weight") when a key map renamed it.
  auto show = [&](const std::string& name) {
    std::string out = "\"" + name + "\"";
    if (!from) return out;
    auto it = from->find(name);
    return it == from->end() || it->second == name ? out : out + " (checkpoint key \"" + it->second + "\")";
  };
  std::set<std::string> wanted;
  for (const auto& [name, t] : targets) {
    wanted.insert(name);
    FLX_CHECK(s.contains(name), CheckpointError, what, ": the checkpoint has no tensor \"", name,
              "\", which the model needs; it holds ", names_of(s), ". Is it a checkpoint of another model?", hint);
    const Tensor& v = s.at(name);
    FLX_CHECK(v.shape() == t.shape(), CheckpointError, what, ": ", show(name), " has shape ", v.shape(),
              " in the checkpoint but ", t.shape(), " in the model; ", shape_advice(v.shape(), t.shape()));
    // Floating types convert as they load (Flux's loadmodel! and PyTorch's
    // load_state_dict do too): a BFloat16 checkpoint loads into a Float32
    // model, each value widened; Float32 into BFloat16, each rounded.
    FLX_CHECK(v.dtype() == t.dtype() || (is_floating(v.dtype()) && is_floating(t.dtype())), CheckpointError, what,
              ": ", show(name), " is ", v.dtype(), " in the checkpoint but ", t.dtype(),
              " in the model; floating types convert as they load, other types must agree: convert one so they "
              "agree (e.g. fmap with t.to(", v.dtype(), ") on the model)");
  }
  for (const auto& [name, v] : s)
    FLX_CHECK(wanted.count(name), CheckpointError, what, ": the checkpoint holds ", show(name),
              ", which the model has no place for; it is a checkpoint of another model", hint);
  // Every key checked: now copy, so a bad checkpoint changes nothing.
  autograd::PauseScope pause;
  for (const auto& [name, t] : targets) {
    Tensor v = s.at(name).to(t.dtype()).to(t.device());
    if (const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype()); bytes && v.id() != t.id()) {
      const auto& b = be(t);
      b.copy_d2d(dev(t), mem(t), mem(v), bytes);
    }
  }
}

void load_model(const std::vector<State::Entry>& targets, const State& s, const KeyMap* key_map) {
  auto kind = s.metadata().find(kKind);
  FLX_CHECK(kind == s.metadata().end() || kind->second != kOptKind, CheckpointError,
            "loadmodel: this checkpoint holds an optimiser state, not a model; load it with loadmodel(opt_state, s) "
            "into the state that setup() made");
  if (!key_map) return load_into(targets, s, "loadmodel", nullptr, foreign_names_hint(targets, s));
  std::map<std::string, std::string> from;
  const State renamed = rename_recording(s, *key_map, from);
  load_into(targets, renamed, "loadmodel", &from,
            " The names are those after the key map: check that it gives each of the model's tensors a checkpoint key");
}

}  // namespace detail

State load(const std::string& path) {
  // read_file and load_bytes turn running out of memory into a
  // CheckpointError that says how much was needed.
  const auto bytes = safetensors::read_file(path);
  return detail::load_bytes(bytes, path);
}

// ---- optimiser state --------------------------------------------------------------

namespace {

std::string rule_text(const OptRule& r) {
  std::ostringstream os;
  os << r;
  return os.str();
}
std::string rule_name(const std::string& text) { return text.substr(0, text.find('(')); }

Tensor scalars_tensor(const std::vector<double>& v) { return tensor(v, Shape{int64_t(v.size())}); }

}  // namespace

State state(const OptState& opt) {
  State s;
  internal::walk_opt_state(
      opt, [&](const std::string& name, const Tensor& t) { s.insert(name, t); },
      [&](const std::string& name, const std::vector<double>& v) { s.insert(name, scalars_tensor(v)); });
  s.metadata()[kKind] = kOptKind;
  s.metadata()[kRule] = rule_text(opt.rule().state_rule());
  std::string frozen;
  for (const OptState::Leaf& leaf : opt.entries())
    if (leaf.frozen) frozen += (frozen.empty() ? "" : "\n") + leaf.path;
  s.metadata()[kFrozen] = frozen;
  return s;
}

void loadmodel(OptState& opt, const State& s) {
  auto kind = s.metadata().find(kKind);
  FLX_CHECK(kind != s.metadata().end() && kind->second == kOptKind, CheckpointError,
            "loadmodel: this checkpoint holds no optimiser state (its metadata has no \"", kKind, "\": \"", kOptKind,
            "\"); load it into a model instead, or load the file that save(path, opt_state) wrote");
  const std::string mine = rule_text(opt.rule().state_rule());
  auto rule = s.metadata().find(kRule);
  const std::string theirs = rule == s.metadata().end() ? "(none)" : rule->second;
  FLX_CHECK(rule_name(theirs) == rule_name(mine), CheckpointError, "loadmodel: the checkpoint holds the state of ",
            theirs, " but the optimiser is ", mine, "; setup() the same rule before loading");
  // Step counts are host numbers: they load into temporary tensors, checked
  // and copied with the rest, then go back into the rule states.
  std::vector<State::Entry> targets;
  std::vector<std::pair<Tensor, std::vector<double>*>> scalars;
  internal::walk_opt_state(
      opt, [&](const std::string& name, const Tensor& t) { targets.emplace_back(name, t); },
      [&](const std::string& name, std::vector<double>& v) {
        targets.emplace_back(name, scalars_tensor(v));
        scalars.emplace_back(targets.back().second, &v);
      });
  // The frozen flags, checked before anything changes: each path names a
  // leaf of this state. A checkpoint without them leaves the flags as they are.
  const auto frozen_entry = s.metadata().find(kFrozen);
  std::set<std::string> frozen;
  if (frozen_entry != s.metadata().end()) {
    std::istringstream lines(frozen_entry->second);
    for (std::string path; std::getline(lines, path);)
      if (!path.empty()) frozen.insert(path);
    for (const std::string& path : frozen)
      FLX_CHECK(std::any_of(opt.entries().begin(), opt.entries().end(),
                            [&](const OptState::Leaf& l) { return l.path == path; }),
                CheckpointError, "loadmodel: the checkpoint's optimiser state has its leaf \"", path,
                "\" frozen, but this state has no leaf of that name; it is the state of another model");
  }
  detail::load_into(targets, s, "loadmodel (optimiser state)");
  for (auto& [t, dst] : scalars) *dst = t.to_vector<double>();
  if (frozen_entry != s.metadata().end())
    for (OptState::Leaf& leaf : opt.entries()) leaf.frozen = frozen.count(leaf.path) > 0;
}

}  // namespace flx
