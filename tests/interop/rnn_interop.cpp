// The C++ half of the recurrent interop test (rnn_interop.py drives it):
//   rnn_interop MODEL DATA OUT
// MODEL is the state_dict of PyTorch's
//   nn.ModuleDict({"lstm": nn.LSTM(5, 4), "gru": nn.GRU(5, 4), "stack": nn.LSTM(5, 4, num_layers=2)})
// (batch first), loaded with torch_to_lstm and torch_to_gru into
//   Model{LSTM(5 => 4), GRU(5 => 4; recurrent_bias=true), Chain(LSTM(5 => 4), LSTM(4 => 4))};
// DATA holds x [B, T, 5], h0 and c0 [1, B, 4] and the loss weights W
// [B, T, 4], V and U [B, 4]. For Float64 ("f64.") and Float32 ("f32."), OUT
// gets each layer's outputs and the gradients of
//   sum(y .* W) + sum(h_T .* V) (+ sum(c_T .* U), LSTM)
// by x, the initial state and the parameters, in flx's shapes and names; for
// the stacked LSTM, from zeros, y and the gradient of sum(y .* W) by x.
#include <flx/flx.hpp>

#include <cstdio>
#include <string>

using namespace flx;

namespace {

struct Model {
  LSTM lstm;
  GRU gru;
  Chain<LSTM, LSTM> stack;
};
FLX_FUNCTOR(Model, lstm, gru, stack)

Model make_model() {
  return {LSTM(5, 4), GRU(5, 4, {.recurrent_bias = true}), Chain(LSTM(5, 4), LSTM(4, 4))};
}

// PyTorch's names, module by module, as the Model's.
State from_torch(State s) {
  s = torch_to_lstm(s, {.prefix = "lstm.", .into = "lstm."});
  s = torch_to_gru(s, {.prefix = "gru.", .into = "gru."});
  s = torch_to_lstm(s, {.prefix = "stack.", .into = "stack.layers.0.", .layer = 0});
  return torch_to_lstm(s, {.prefix = "stack.", .into = "stack.layers.1.", .layer = 1});
}

void run(const std::string& tag, DType t, const State& torch_state, const State& data, State& out) {
  auto in_t = [t](const std::string&, const Tensor& w) { return w.to(t); };
  // Converted in t, so that Float64 sums PyTorch's two biases in Float64.
  Model model = fmap([t](const Tensor& w) { return w.to(t); }, make_model());
  loadmodel(model, from_torch(map_tensors(torch_state, in_t)));
  auto get = [&](const char* key) { return data.at(key).to(t); };
  const Tensor x = permutedims(get("x"), {2, 1, 0});  // [B, T, in] (batch first) -> (in, T, B)
  const int64_t batch = x.shape()[2];
  auto state_of = [&](const char* key) {  // [1, B, H] -> (H, B)
    const Tensor s = get(key);
    return reshape(permutedims(s, {2, 1, 0}), {s.shape()[2], batch});
  };
  const Tensor h0 = state_of("h0"), c0 = state_of("c0");
  const Tensor W = permutedims(get("W"), {2, 1, 0}), V = transpose(get("V")), U = transpose(get("U"));
  auto put = [&](const std::string& key, const Tensor& v) { out.insert(tag + "." + key, v); };

  auto lstm_loss = [&](const LSTM& m, const Tensor& xs, const LSTMState& s) {
    auto r = m.with_state(xs, s);
    return sum(r.output * W) + sum(r.state.h * V) + sum(r.state.c * U);
  };
  auto lr = model.lstm.with_state(x, {h0, c0});
  put("lstm.y", lr.output);
  put("lstm.hn", lr.state.h);
  put("lstm.cn", lr.state.c);
  auto [lm, lx, ls] = gradient(lstm_loss, model.lstm, x, LSTMState{h0, c0});
  put("lstm.dx", lx);
  put("lstm.dh0", ls.h);
  put("lstm.dc0", ls.c);
  put("lstm.dWi", lm.cell.Wi);
  put("lstm.dWh", lm.cell.Wh);
  put("lstm.dbias", lm.cell.bias);

  auto gru_loss = [&](const GRU& m, const Tensor& xs, const Tensor& h) {
    auto r = m.with_state(xs, h);
    return sum(r.output * W) + sum(r.state * V);
  };
  auto gr = model.gru.with_state(x, h0);
  put("gru.y", gr.output);
  put("gru.hn", gr.state);
  auto [gm, gx, gh] = gradient(gru_loss, model.gru, x, h0);
  put("gru.dx", gx);
  put("gru.dh0", gh);
  put("gru.dWi", gm.cell.Wi);
  put("gru.dWh", gm.cell.Wh);
  put("gru.db", gm.cell.b);
  put("gru.dbh", gm.cell.bh);

  put("stack.y", model.stack(x));
  put("stack.dx", std::get<0>(gradient([&](const Tensor& xs) { return sum(model.stack(xs) * W); }, x)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL DATA OUT\n", argv[0]);
    return 2;
  }
  try {
    const State torch_state = load(argv[1]), data = load(argv[2]);
    State out;
    run("f64", Float64, torch_state, data, out);
    run("f32", Float32, torch_state, data, out);
    save(argv[3], out);
    std::printf("rnn_interop: %zu results written\n", out.size());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
