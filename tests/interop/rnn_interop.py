"""PyTorch's nn.LSTM and nn.GRU load into flx's LSTM and GRU and give PyTorch's
outputs and gradients.

The PyTorch model is
  nn.ModuleDict({"lstm": nn.LSTM(5, 4, batch_first=True),
                 "gru": nn.GRU(5, 4, batch_first=True),
                 "stack": nn.LSTM(5, 4, num_layers=2, batch_first=True)})
whose state_dict (PyTorch's names: lstm.weight_ih_l0, lstm.bias_hh_l0, ...,
stack.weight_ih_l1, ...) this script saves as a safetensors file. A second
file holds an input x [B, T, 5] (batch first), initial states h0, c0
[1, B, 4], fixed weights W [B, T, 4], V and U [B, 4], and for each layer its
outputs y [B, T, 4], final states hn (and cn) [B, 4], and the gradients of the
loss
    L = sum(y * W) + sum(hn * V) (+ sum(cn * U) for the LSTM)
with respect to x, h0, c0 and every parameter (PyTorch's names). The stacked
LSTM, from zero states, gives y and the gradient of sum(y * W) by x.

rnn_interop (C++) loads the file with torch_to_lstm / torch_to_gru into
  struct { LSTM lstm; GRU gru; Chain<LSTM, LSTM> stack; }
(GRU(5 => 4; recurrent_bias=true) for PyTorch's b_hn), runs the same inputs in
Float64 and in Float32 and writes its outputs and gradients (flx's names),
which must equal the reference: in Float64 to 1e-9 (PyTorch) or 1e-7 (numpy's
central differences), in Float32 to 1e-4. flx has
one bias where PyTorch has two: its gradient equals both of PyTorch's
(LSTM), or the GRU's bias_ih and the first two thirds of bias_hh, the last
third being the gradient of flx's bh.

With torch installed, the reference is PyTorch itself, run in float64 on the
float32 weights of the file. Without torch (CI installs numpy and safetensors
only), the weights are random numpy values in PyTorch's names and layouts
and the reference is numpy: PyTorch's equations (from its documentation) in
float64, and central differences of them for the gradients.

Exits 77 (ctest's skip) when numpy or safetensors is missing.

usage: rnn_interop.py RNN_INTEROP_EXE WORKDIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIPPED: the recurrent interop test needs numpy and safetensors in Python ({e}); "
          "scripts/install-deps.sh installs them")
    sys.exit(77)

try:
    import torch
except ImportError:
    torch = None

IN, H, B, T = 5, 4, 3, 6


# ---- numpy: PyTorch's equations ------------------------------------------------

def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def lstm_np(sd, p, layer, x, h, c):
    """nn.LSTM's layer `layer` (batch first): i, f, g, o = W_ih x + b_ih + W_hh h + b_hh."""
    n = str(layer)
    wi, wh = sd[p + "weight_ih_l" + n], sd[p + "weight_hh_l" + n]
    b = sd[p + "bias_ih_l" + n] + sd[p + "bias_hh_l" + n]
    ys = []
    for t in range(x.shape[1]):
        g = x[:, t] @ wi.T + h @ wh.T + b
        i, f, gg, o = np.split(g, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(gg)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys, axis=1), h, c


def gru_np(sd, p, x, h):
    """nn.GRU: r, z from both biases; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""
    wi, wh, bi, bh = sd[p + "weight_ih_l0"], sd[p + "weight_hh_l0"], sd[p + "bias_ih_l0"], sd[p + "bias_hh_l0"]
    ys = []
    for t in range(x.shape[1]):
        gi, gh = x[:, t] @ wi.T + bi, h @ wh.T + bh
        ir, iz, inn = np.split(gi, 3, axis=1)
        hr, hz, hn = np.split(gh, 3, axis=1)
        r, z = sigmoid(ir + hr), sigmoid(iz + hz)
        n = np.tanh(inn + r * hn)
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys, axis=1), h


def losses(sd, d):
    """The three losses as functions of (state_dict, data), in float64."""
    def lstm(sd, d):
        y, h, c = lstm_np(sd, "lstm.", 0, d["x"], d["h0"][0], d["c0"][0])
        return (y * d["W"]).sum() + (h * d["V"]).sum() + (c * d["U"]).sum()

    def gru(sd, d):
        y, h = gru_np(sd, "gru.", d["x"], d["h0"][0])
        return (y * d["W"]).sum() + (h * d["V"]).sum()

    def stack(sd, d):
        zero = np.zeros((B, H))
        y, _, _ = lstm_np(sd, "stack.", 0, d["x"], zero, zero)
        y, _, _ = lstm_np(sd, "stack.", 1, y, zero, zero)
        return (y * d["W"]).sum()
    return {"lstm": lstm, "gru": gru, "stack": stack}


def numeric_grad(f, sd, d, where, key, h=1e-6):
    """Central differences of f(sd, d) by the entry `key` of sd or d (where)."""
    base = (sd if where == "sd" else d)[key]
    g = np.zeros_like(base)
    for i in np.ndindex(base.shape):
        vals = []
        for step in (h, -h):
            moved = base.copy()
            moved[i] += step
            sd2 = dict(sd, **{key: moved}) if where == "sd" else sd
            d2 = dict(d, **{key: moved}) if where == "data" else d
            vals.append(f(sd2, d2))
        g[i] = (vals[0] - vals[1]) / (2 * h)
    return g


def numpy_reference(sd32, d):
    """Outputs and gradients, from numpy's equations in float64."""
    sd = {k: v.astype(np.float64) for k, v in sd32.items()}
    ref = {}
    y, h, c = lstm_np(sd, "lstm.", 0, d["x"], d["h0"][0], d["c0"][0])
    ref.update({"lstm.y": y, "lstm.hn": h, "lstm.cn": c})
    y, h = gru_np(sd, "gru.", d["x"], d["h0"][0])
    ref.update({"gru.y": y, "gru.hn": h})
    zero = np.zeros((B, H))
    y, _, _ = lstm_np(sd, "stack.", 0, d["x"], zero, zero)
    ref["stack.y"], _, _ = lstm_np(sd, "stack.", 1, y, zero, zero)
    for name, f in losses(sd, d).items():
        ref[name + ".dx"] = numeric_grad(f, sd, d, "data", "x")
        if name == "stack":
            continue
        ref[name + ".dh0"] = numeric_grad(f, sd, d, "data", "h0")
        if name == "lstm":
            ref[name + ".dc0"] = numeric_grad(f, sd, d, "data", "c0")
        for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            ref[f"{name}.d{k}"] = numeric_grad(f, sd, d, "sd", f"{name}.{k}")
    return ref


# ---- PyTorch -------------------------------------------------------------------

def torch_model():
    torch.manual_seed(0)
    nn = torch.nn
    m = nn.ModuleDict({"lstm": nn.LSTM(IN, H, batch_first=True), "gru": nn.GRU(IN, H, batch_first=True),
                       "stack": nn.LSTM(IN, H, num_layers=2, batch_first=True)})
    return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}, m


def torch_reference(m, d):
    """Outputs and gradients from PyTorch, in float64 on the file's float32 weights."""
    m = m.double()
    t = {k: torch.from_numpy(v).requires_grad_() for k, v in d.items()}
    ref = {}
    for name in ("lstm", "gru", "stack"):
        mod = m[name]
        mod.zero_grad()
        x = t["x"].detach().requires_grad_()
        h0 = t["h0"].detach().requires_grad_()
        c0 = t["c0"].detach().requires_grad_()
        if name == "lstm":
            y, (hn, cn) = mod(x, (h0, c0))
            loss = (y * t["W"]).sum() + (hn[0] * t["V"]).sum() + (cn[0] * t["U"]).sum()
            ref.update({"lstm.cn": cn[0]})
        elif name == "gru":
            y, hn = mod(x, h0)
            loss = (y * t["W"]).sum() + (hn[0] * t["V"]).sum()
        else:
            y, _ = mod(x)
            loss = (y * t["W"]).sum()
        loss.backward()
        ref[name + ".y"] = y
        ref[name + ".dx"] = x.grad
        if name != "stack":
            ref[name + ".hn"] = hn[0]
            ref[name + ".dh0"] = h0.grad
            for k in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
                ref[f"{name}.d{k}"] = getattr(mod, k).grad
        if name == "lstm":
            ref[name + ".dc0"] = c0.grad
    return {k: v.detach().numpy() for k, v in ref.items()}


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    model_path = os.path.join(work, "torch_rnn.safetensors")
    data_path = os.path.join(work, "torch_rnn_data.safetensors")
    out_path = os.path.join(work, "flx_rnn_outputs.safetensors")
    rng = np.random.default_rng(0)
    d = {"x": rng.standard_normal((B, T, IN)), "h0": rng.standard_normal((1, B, H)) * 0.5,
         "c0": rng.standard_normal((1, B, H)) * 0.5, "W": rng.standard_normal((B, T, H)),
         "V": rng.standard_normal((B, H)), "U": rng.standard_normal((B, H))}
    d = {k: v.astype(np.float32).astype(np.float64) for k, v in d.items()}  # float32 values, used in float64
    if torch is not None:
        print(f"torch {torch.__version__}: PyTorch's nn.LSTM and nn.GRU, run in float64, are the reference")
        sd, m = torch_model()
        ref = torch_reference(m, d)
        reference = "PyTorch"
    else:
        print("torch is not installed: the weights are numpy's and the reference is numpy's equations with "
              "central differences")
        sd = {}
        for name, k, layers in (("lstm", 4, 1), ("gru", 3, 1), ("stack", 4, 2)):
            for n in range(layers):
                fan = IN if n == 0 else H
                for key, shape in ((f"weight_ih_l{n}", (k * H, fan)), (f"weight_hh_l{n}", (k * H, H)),
                                   (f"bias_ih_l{n}", (k * H,)), (f"bias_hh_l{n}", (k * H,))):
                    sd[f"{name}.{key}"] = rng.uniform(-0.5, 0.5, shape).astype(np.float32)
        ref = numpy_reference(sd, d)
        reference = "numpy"
    if torch is not None:  # numpy's equations are PyTorch's: its forward passes, against torch
        sd64 = {k: v.astype(np.float64) for k, v in sd.items()}
        np.testing.assert_allclose(lstm_np(sd64, "lstm.", 0, d["x"], d["h0"][0], d["c0"][0])[0], ref["lstm.y"],
                                   rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gru_np(sd64, "gru.", d["x"], d["h0"][0])[0], ref["gru.y"], rtol=1e-10, atol=1e-12)
    save_file(sd, model_path, metadata={"format": "pt"})
    save_file({k: v.astype(np.float32) for k, v in d.items()}, data_path)

    run = subprocess.run([exe, model_path, data_path, out_path], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, f"rnn_interop exited with {run.returncode}"
    out = load_file(out_path)

    def flx_value(key):
        """flx's result in PyTorch's layout. The file holds flx's shapes: y (H, T, B), hn (H, B), dx (in, T, B),
        dh0 (H, B) become [B, T, H], [B, H], [B, T, in], [1, B, H]; parameter gradients are PyTorch's shapes."""
        v, last = out[key].astype(np.float64), key.split(".")[-1]
        if last.startswith("dW") or last.startswith("db"):
            return v
        if last in ("dh0", "dc0"):
            return v.T[None]
        return v.transpose(*reversed(range(v.ndim)))

    # flx's parameter gradients against PyTorch's two biases.
    def expected(name, key):
        if key == "dWi":
            return ref[f"{name}.dweight_ih_l0"]
        if key == "dWh":
            return ref[f"{name}.dweight_hh_l0"]
        if key in ("dbias", "db"):
            if name == "lstm":
                np.testing.assert_allclose(ref["lstm.dbias_ih_l0"], ref["lstm.dbias_hh_l0"], rtol=exact, atol=exact)
            return ref[f"{name}.dbias_ih_l0"]
        if key == "dbh":
            return ref["gru.dbias_hh_l0"][2 * H:]
        return ref[f"{name}.{key}"]

    checks = {"lstm": ["y", "hn", "cn", "dx", "dh0", "dc0", "dWi", "dWh", "dbias"],
              "gru": ["y", "hn", "dx", "dh0", "dWi", "dWh", "db", "dbh"],
              "stack": ["y", "dx"]}
    # Central differences (numpy) are good to about 1e-9; PyTorch's float64 gradients to rounding.
    exact = 1e-9 if torch is not None else 1e-7
    # GRU: bias_hh's r and z thirds have the gradient of flx's b (the same biases, summed).
    np.testing.assert_allclose(ref["gru.dbias_hh_l0"][:2 * H], ref["gru.dbias_ih_l0"][:2 * H], rtol=exact, atol=exact)
    for precision, rtol, atol in (("f64", exact, exact * 1e-2), ("f32", 1e-4, 1e-5)):
        worst = 0.0
        for name, keys in checks.items():
            for key in keys:
                got, want = flx_value(f"{precision}.{name}.{key}"), expected(name, key)
                np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{precision} {name} {key}")
                worst = max(worst, float(np.abs(got - want).max()))
        print(f"flx in {'Float64' if precision == 'f64' else 'Float32'} matches {reference}'s outputs and gradients "
              f"(LSTM, GRU, 2-layer LSTM): max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
