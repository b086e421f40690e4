// Checkpoints: models and optimiser states as safetensors files.
//
//   save("model.safetensors", model);            // from any device, atomically
//   State s = load("model.safetensors");          // CPU tensors by name
//   loadmodel(model, s);                          // into a model on any device
//   save("opt.safetensors", opt_state);           // optimiser state too, so
//   loadmodel(opt_state, load("opt.safetensors"));  // training resumes exactly
//
// Names are the model's dotted paths ("layers.0.weight", field names from
// FLX_FUNCTOR). Files hold flx's shapes with row-major bytes, as the format
// requires: a Dense weight (out, in) is [out, in] in the file, like PyTorch's
// nn.Linear.weight. Loading validates the whole header before allocating.
// Checkpoints of other libraries load with a key mapping (see loadmodel
// below and docs/checkpoints.md).
#pragma once

#include "flx/export.hpp"

#include <functional>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flx/functor.hpp"
#include "flx/optimisers.hpp"
#include "flx/tensor.hpp"

namespace flx {

// A named set of tensors (in insertion order) with string metadata: what a
// checkpoint file holds.
class FLX_API State {
 public:
  using Entry = std::pair<std::string, Tensor>;
  State() = default;

  // Adds a tensor; an empty or repeated name is an ArgumentError.
  void insert(const std::string& name, const Tensor& t);
  bool contains(const std::string& name) const;
  // The tensor called name; a CheckpointError naming it when there is none.
  const Tensor& at(const std::string& name) const;
  size_t size() const { return entries_.size(); }
  const std::vector<Entry>& entries() const { return entries_; }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  std::map<std::string, std::string>& metadata() { return metadata_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};
FLX_API std::ostream& operator<<(std::ostream& os, const State& s);

// Maps a checkpoint's key to the model's name for it ("" leaves the tensor out).
using KeyMap = std::function<std::string(const std::string& key)>;
// Prefix renames {{"0.", "layers.0."}, ...}: a key's longest matching prefix is
// replaced; a key that matches none keeps its name.
using PrefixMap = std::map<std::string, std::string>;

namespace detail {
// Every tensor of a model with its name (a bare tensor is called "tensor").
template <class M>
std::vector<State::Entry> named_tensors(const M& model) {
  std::vector<State::Entry> out;
  auto visit = [&](const std::string& path, const Tensor& t) {
    if (t.defined()) out.emplace_back(path.empty() ? "tensor" : path, t);
  };
  walk<false>(visit, "", model);
  return out;
}
// Check every name, shape and dtype of `targets` against s (nothing extra,
// nothing missing), then copy the values in place, on the targets' devices.
// from (if given) holds the checkpoint key each renamed key came from, for
// messages; hint ends the message of a missing or unexpected key.
FLX_API void load_into(const std::vector<State::Entry>& targets, const State& s, const char* what,
               const std::map<std::string, std::string>* from = nullptr, const std::string& hint = "");
// load_into for a model: also refuses an optimiser state with a clear word,
// and renames the checkpoint's keys first when given a key map.
FLX_API void load_model(const std::vector<State::Entry>& targets, const State& s, const KeyMap* key_map = nullptr);
FLX_API KeyMap prefix_key_map(const PrefixMap& prefixes);
// load() on bytes in memory; origin names them in errors (fuzzing, tests).
FLX_API State load_bytes(std::span<const uint8_t> bytes, const std::string& origin);
}  // namespace detail

// The named tensors of a model (shared storage, on the model's device).
template <class M>
State state(const M& model) {
  State s;
  for (const auto& [name, t] : detail::named_tensors(model)) s.insert(name, t);
  return s;
}
// An optimiser state's tensors and step counts, named after its parameters
// ("layers.0.weight.state.t0"), with the rule in the metadata.
FLX_API State state(const OptState& opt);

// Writes a safetensors file atomically (a temporary file in the same
// directory, fsync, rename): a crash leaves the old file or the new one.
FLX_API void save(const std::string& path, const State& s);
// The temporary files that save(path, ...) left beside path when a process
// was killed while writing it (hidden: ".<name>.<16 hex digits>.tmp"). They
// are stale once no process is saving to path: remove them then.
FLX_API std::vector<std::string> interrupted_saves(const std::string& path);
inline void save(const std::string& path, const OptState& opt) { save(path, state(opt)); }
template <class M>
void save(const std::string& path, const M& model) {
  save(path, state(model));
}

// Reads a safetensors file into CPU tensors (CheckpointError on any defect).
FLX_API State load(const std::string& path);

// Copies a state into a model on any device, in place. Every tensor of the
// model must be in the state with the same shape, and the state must hold
// nothing else; otherwise a CheckpointError names the key and nothing is
// changed. Element types must agree too, except that floating types convert
// as they load (as Flux's loadmodel! and PyTorch's load_state_dict): a
// checkpoint of bf16(model) loads into the Float32 model, each value
// widened exactly; a Float32 one into a BFloat16 model, each rounded to
// nearest even.
template <class M>
const M& loadmodel(const M& model, const State& s) {
  detail::load_model(detail::named_tensors(model), s);
  return model;
}

// ---- checkpoints of other libraries ----
// Other libraries name tensors their own way: PyTorch's
// nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) saves "0.weight",
// "0.bias", "2.weight", "2.bias" (the ReLU is module 1), where
// Chain(Dense(3 => 4, relu), Dense(4 => 2)) has "layers.0.weight", ...,
// "layers.1.bias". Map the names as you load, by prefix or by function:
//
//   loadmodel(model, s, {{"0.", "layers.0."}, {"2.", "layers.1."}});
//
// or, into Chain(Dense(3 => 4), relu, Dense(4 => 2)), whose layers are
// numbered as the modules are:
//
//   loadmodel(model, s, [](const std::string& key) -> std::string {
//     if (key.ends_with("num_batches_tracked")) return "";   // leave it out
//     return "layers." + key;
//   });
//
// The renamed state is then checked as strictly as by loadmodel(model, s)
// (names, shapes, dtypes; nothing missing, nothing extra), errors name the
// checkpoint's key too, and a refused load changes nothing.
template <class M>
const M& loadmodel(const M& model, const State& s, const KeyMap& key_map) {
  detail::load_model(detail::named_tensors(model), s, &key_map);
  return model;
}
template <class M>
const M& loadmodel(const M& model, const State& s, const PrefixMap& prefixes) {
  return loadmodel(model, s, detail::prefix_key_map(prefixes));
}
// The same renaming on its own: the same tensors under the new names, the
// same metadata. Two keys that map to one name are a CheckpointError.
FLX_API State rename(const State& s, const KeyMap& key_map);
FLX_API State rename(const State& s, const PrefixMap& prefixes);

// ---- tensors in another library's layout ----
// A file's bytes are row-major under the file's shape, and a tensor loads
// with that shape (column-major in memory), so a tensor whose layout differs
// from flx's must be converted as it loads. f(name, t) gets each tensor and
// its name, and returns it as the model needs it (or t itself):
//
//   State s = rename(load("torch.safetensors"), key_map);
//   loadmodel(model, map_tensors(s, [](const std::string& name, const Tensor& t) {
//     return t.ndims() == 4 ? torch_to_crosscor(t) : t;     // Conv2d weights
//   }));
//
// Returns the same names in the same order with the same metadata.
using TensorMap = std::function<Tensor(const std::string& name, const Tensor& t)>;
FLX_API State map_tensors(const State& s, const TensorMap& f);

// PyTorch's ConvNd weight [out, in / groups, k1, ..., kN] (as load() reads
// it: that shape) as flx's CrossCor weight (kN, ..., k1, in / groups, out):
// the dims reversed, so its bytes are the file's, unchanged. PyTorch's Conv2d
// is a cross-correlation, as CrossCor is. An ArgumentError unless w has 3 to
// 5 dims (1 to 3 spatial).
FLX_API Tensor torch_to_crosscor(const Tensor& w);
// The same as flx's Conv weight: also flipped along the spatial dims
// (flip_kernel), since Conv convolves; Conv then computes what Conv2d does.
// PyTorch's ConvTranspose2d weight [in, out / groups, kH, kW] loads into
// flx's ConvTranspose (kW, kH, out / groups, in) this way too (flipped, as
// Flux's ConvTranspose is the transpose of its Conv).
FLX_API Tensor torch_to_conv(const Tensor& w);

// PyTorch's nn.RNN, nn.LSTM and nn.GRU state_dicts as flx's RNN, LSTM and
// GRU name them (docs/checkpoints.md has the whole map). The gates are in
// the same order (LSTM: i, f, g, o; GRU: r, z, n) and the weights
// weight_ih_l0 [k·H, in] and weight_hh_l0 [k·H, H] load as flx's Wi and Wh
// as they are; PyTorch's two biases become flx's one: bias_ih + bias_hh,
// except the GRU candidate's b_hn (bias_hh's last H), which PyTorch applies
// inside the reset gate: it becomes cell.bh, so the GRU to load into is
// GRU(in, H, {.recurrent_bias = true}). Without biases (bias=False) there
// are none to convert (flx's {.bias = false}).
//
//   loadmodel(model, torch_to_lstm(load("lstm.safetensors"), {.prefix = "lstm.", .into = "layers.0."}));
//
// The layer's four entries (under `prefix`, for PyTorch's layer `layer`:
// weight_ih_l<layer>, ...) become into + "cell.Wi", "cell.Wh", "cell.bias"
// (GRU: "cell.b" and "cell.bh"); every other entry is kept as it is, in
// order, so several layers convert one call after another. A missing entry,
// a shape that is not the layer's, or what flx's layers do not have (a
// bidirectional layer's _reverse entries, LSTM's proj_size weight_hr) is a
// CheckpointError naming the entry.
struct FLX_API TorchRecurrentNames {
  std::string prefix;  // before PyTorch's names: "lstm." for a submodule called lstm, "" for the module itself
  std::string into;    // before flx's names: "layers.0." for a Chain's first layer, "" for the layer itself
  int layer = 0;       // which layer of a stacked PyTorch module (num_layers > 1): the n of weight_ih_l<n>
};
FLX_API State torch_to_rnn(const State& s, const TorchRecurrentNames& names = {});
FLX_API State torch_to_lstm(const State& s, const TorchRecurrentNames& names = {});
FLX_API State torch_to_gru(const State& s, const TorchRecurrentNames& names = {});

// PyTorch's nn.MultiheadAttention state under `prefix` as flx's
// MultiHeadAttention names: in_proj_weight [3E, E] and in_proj_bias [3E]
// split into q_proj, k_proj and v_proj's weight and bias (or, for
// different key/value sizes, q_proj_weight, k_proj_weight and
// v_proj_weight renamed); out_proj.weight and out_proj.bias as they are;
// other keys unchanged. bias_k and bias_v (add_bias_kv) have no flx
// counterpart: an ArgumentError.
FLX_API State torch_to_mha(const State& s, const std::string& prefix = "");

// Restores an optimiser state saved with save(path, opt_state) into one
// made by setup() with the same rule for the same model. The learning rate
// is the rule's (adjust() it as the run that saved it did).
FLX_API void loadmodel(OptState& opt, const State& s);

}  // namespace flx
