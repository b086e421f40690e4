// Key mappings for checkpoints of other libraries: rename(), prefix maps,
// the hint that tells a user with a PyTorch nn.Sequential file what to write,
// and the conversions of tensors in PyTorch's layout (map_tensors,
// torch_to_crosscor, torch_to_conv).
#include "key_mapping.hpp"

#include <charconv>
#include <set>
#include <utility>

#include "flx/dnn.hpp"
#include "flx/error.hpp"
#include "flx/ops.hpp"

namespace flx {

namespace detail {

State rename_recording(const State& s, const KeyMap& key_map, std::map<std::string, std::string>& from) {
  State out;
  for (const auto& [key, t] : s) {
    std::string name = key_map(key);
    if (name.empty()) continue;  // left out on purpose
    auto [it, fresh] = from.emplace(name, key);
    FLX_CHECK(fresh, CheckpointError, "rename: checkpoint keys \"", it->second, "\" and \"", key, "\" both map to \"",
              name, "\"; a key map must give each tensor its own name (or \"\" to leave one out)");
    out.insert(name, t);
  }
  out.metadata() = s.metadata();
  return out;
}

KeyMap prefix_key_map(const PrefixMap& prefixes) {
  return [prefixes](const std::string& key) {
    const std::pair<const std::string, std::string>* best = nullptr;  // the longest matching prefix
    for (const auto& p : prefixes)
      if (key.starts_with(p.first) && (!best || p.first.size() > best->first.size())) best = &p;
    return best ? best->second + key.substr(best->first.size()) : key;
  };
}

namespace {

// "12.weight" -> {12, "weight"}; false unless the key starts with a number and a dot.
bool numbered(const std::string& key, size_t from, uint64_t& n, std::string& rest) {
  const size_t dot = key.find('.', from);
  if (dot == std::string::npos || dot == from) return false;
  const char* b = key.data() + from;
  const char* e = key.data() + dot;
  auto [p, ec] = std::from_chars(b, e, n);
  if (ec != std::errc() || p != e) return false;
  rest = key.substr(dot + 1);
  return true;
}

// The exact call for numbered modules that pair up in order with a Chain's
// "layers.<i>." (the same leaf names in each pair), or "".
std::string sequential_call(const std::vector<State::Entry>& targets, const State& s) {
  std::map<uint64_t, std::set<std::string>> theirs, ours;
  uint64_t n;
  std::string rest;
  for (const auto& [key, t] : s) {
    if (!numbered(key, 0, n, rest)) return "";
    theirs[n].insert(rest);
  }
  const std::string layers = "layers.";
  for (const auto& [name, t] : targets) {
    if (!name.starts_with(layers) || !numbered(name, layers.size(), n, rest)) return "";
    ours[n].insert(rest);
  }
  if (theirs.empty() || theirs.size() != ours.size()) return "";
  std::string call = "loadmodel(model, s, {";
  for (auto a = theirs.begin(), b = ours.begin(); a != theirs.end(); ++a, ++b) {
    if (a->second != b->second) return "";
    call += (a == theirs.begin() ? "{\"" : ", {\"") + std::to_string(a->first) + ".\", \"layers." +
            std::to_string(b->first) + ".\"}";
  }
  return call + "})";
}

}  // namespace

std::string foreign_names_hint(const std::vector<State::Entry>& targets, const State& s) {
  for (const auto& [name, t] : targets)
    if (s.contains(name)) return "";
  const std::string call = sequential_call(targets, s);
  if (!call.empty())
    return " Its names are numbered modules, as PyTorch's nn.Sequential saves them: load it with " + call +
           ", which maps them to the model's layers in order (see docs/checkpoints.md)";
  return " If another library wrote it, map its names to the model's as you load: loadmodel(model, s, "
         "{{\"their.prefix.\", \"model.prefix.\"}, ...}) or loadmodel(model, s, key_function) "
         "(see docs/checkpoints.md)";
}

}  // namespace detail

State rename(const State& s, const KeyMap& key_map) {
  std::map<std::string, std::string> from;
  return detail::rename_recording(s, key_map, from);
}

State rename(const State& s, const PrefixMap& prefixes) { return rename(s, detail::prefix_key_map(prefixes)); }

State map_tensors(const State& s, const TensorMap& f) {
  State out;
  for (const auto& [name, t] : s) {
    Tensor v = f(name, t);
    FLX_CHECK(v.defined(), ArgumentError, "map_tensors: the function returned an undefined tensor for \"", name,
              "\"; return the tensor itself to keep it as it is (or leave it out with rename's key map)");
    out.insert(name, v);
  }
  out.metadata() = s.metadata();
  return out;
}

namespace {

// [out, in / groups, k1, ..., kN] -> (kN, ..., k1, in / groups, out).
Tensor reversed_conv_weight(const Tensor& w, const char* what) {
  FLX_CHECK(w.defined(), ArgumentError, what, ": the weight is an undefined tensor");
  const int n = w.ndims();
  FLX_CHECK(n >= 3 && n <= 5, ArgumentError, what, ": expected a PyTorch convolution weight [out, in / groups, ",
            "kernel...] with 1 to 3 spatial dims (3 to 5 dims), found shape ", w.shape(), " (", n, " dims)");
  std::vector<int> perm(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) perm[size_t(i)] = n - 1 - i;
  return permutedims(w, perm);
}

}  // namespace

Tensor torch_to_crosscor(const Tensor& w) { return reversed_conv_weight(w, "torch_to_crosscor"); }

Tensor torch_to_conv(const Tensor& w) {
  Tensor r = reversed_conv_weight(w, "torch_to_conv");
  return flip_kernel(r, r.ndims() - 2);
}

State torch_to_mha(const State& s, const std::string& prefix) {
  const char* const proj[] = {"q_proj", "k_proj", "v_proj"};
  State out;
  for (const auto& [name, t] : s) {
    const std::string key = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : "";
    if (key == "in_proj_weight" || key == "in_proj_bias") {
      const bool weight = key == "in_proj_weight";
      FLX_CHECK(t.ndims() == (weight ? 2 : 1) && t.shape()[0] % 3 == 0, ArgumentError, "torch_to_mha: \"", name,
                "\" should be PyTorch's ", weight ? "[3E, E] weight" : "[3E] bias",
                " of the q, k and v projections stacked; found shape ", t.shape());
      const int64_t e = t.shape()[0] / 3;
      // Rows [i E, (i + 1) E): the slice along dim 0, through the transpose
      // for the weight (slice_last cuts the last dim).
      for (int i = 0; i < 3; ++i)
        out.insert(prefix + proj[i] + (weight ? ".weight" : ".bias"),
                   weight ? transpose(transpose(t).slice_last(i * e, (i + 1) * e)) : t.slice_last(i * e, (i + 1) * e));
    } else if (key == "q_proj_weight" || key == "k_proj_weight" || key == "v_proj_weight") {
      out.insert(prefix + key.substr(0, 6) + ".weight", t);
    } else {
      FLX_CHECK(key != "bias_k" && key != "bias_v", ArgumentError, "torch_to_mha: \"", name,
                "\" comes from nn.MultiheadAttention(add_bias_kv=True), which flx's MultiHeadAttention (as Flux's) "
                "does not have; train without add_bias_kv");
      out.insert(name, t);
    }
  }
  out.metadata() = s.metadata();
  return out;
}

}  // namespace flx
