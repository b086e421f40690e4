"""flx's random draws, in numpy: the char-transformer's initial weights and the
char models' training windows as examples/char_transformer.cpp draws them,
so that bench/char_models_torch.py can start PyTorch from the same weights
and feed it the same windows (--init flx, --windows flx).

- flx's rand/randn (src/tensor.cpp, backends/backend_common/philox.hpp): fill number
  `offset` since set_seed(seed) (each fill takes the next), element i (in
  flx's column-major order) from Philox4x32-10 with counter (i, offset) and
  key seed; uniform: 53 bits in [0, 1) rounded to Float32 (kept below 1);
  normal: Box-Muller on lanes 2 and 3.
- Glorot-uniform Dense weights: rand(out, in) * 2a - a in Float32,
  a = sqrt(6 / (in + out)); Embedding(n, d): randn (d, n).
- The windows (examples/char_text.hpp's random_starts): std::mt19937_64(seed)
  and libstdc++'s std::uniform_int_distribution<int64_t>(0, n - seq - 2),
  which draws by Lemire's multiply-and-reject on 128 bits.

numpy only (no torch), so that tests/bench/check_flx_random.py can check it
against bench/transformer_steps in CI.
"""
import math

import numpy as np

M64 = (1 << 64) - 1


def philox4x32_10(i, offset, seed):
    """The four 32-bit lanes of Philox4x32-10 for counters (i, offset), key seed: uint64 arrays."""
    m32 = np.uint64(0xFFFFFFFF)
    c0 = i & m32
    c1 = i >> np.uint64(32)
    c2 = np.full_like(i, offset & 0xFFFFFFFF)
    c3 = np.full_like(i, offset >> 32)
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        n0 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0)
        n2 = (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1)
        c1, c3 = p1 & m32, p0 & m32
        c0, c2 = n0, n2
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


class Generator:
    """flx's global generator after set_seed(seed): each fill takes the next offset."""

    def __init__(self, seed):
        self.seed, self.offset = seed, 0

    def _lanes(self, n):
        lanes = philox4x32_10(np.arange(n, dtype=np.uint64), self.offset, self.seed)
        self.offset += 1
        return lanes

    def rand(self, *dims):
        """Float32 uniform in [0, 1), column-major dims (as flx's rand(dims...))."""
        x0, x1, _, _ = self._lanes(math.prod(dims))
        u = ((x0 << np.uint64(32) | x1) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        v = u.astype(np.float32)
        v[v >= 1] = np.nextafter(np.float32(1), np.float32(0))
        return v.reshape(dims[::-1]).T

    def randn(self, *dims):
        """Float32 standard normal, column-major dims (as flx's randn(dims...))."""
        _, _, x2, x3 = self._lanes(math.prod(dims))
        u1 = (x2.astype(np.float64) + 1.0) * 2.0 ** -32
        u2 = x3.astype(np.float64) * 2.0 ** -32
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)
        return z.astype(np.float32).reshape(dims[::-1]).T

    def glorot_uniform(self, out, inp):
        """A Dense(inp => out) weight (out, inp), as flx's Dense draws it."""
        a = math.sqrt(6.0 / (inp + out))
        return self.rand(out, inp) * np.float32(2 * a) - np.float32(a)


def char_transformer_init(seed, vocab, seq, d=64, layers=2):
    """examples/char_transformer.cpp's initial weights for --seed, under
    bench/char_models_torch.py's names and PyTorch's shapes (biases zero,
    layer norms one and zero), as numpy Float32 arrays."""
    g = Generator(seed)
    sd = {"emb.weight": g.randn(d, vocab).T.copy(), "pos.weight": g.randn(d, seq).T.copy()}
    for b in range(layers):
        p = f"blocks.{b}."
        q, k, v = (g.glorot_uniform(d, d) for _ in range(3))
        sd[p + "attn.in_proj_weight"] = np.concatenate([q, k, v])
        sd[p + "attn.out_proj.weight"] = g.glorot_uniform(d, d)
        sd[p + "mlp.0.weight"] = g.glorot_uniform(4 * d, d)
        sd[p + "mlp.0.bias"] = np.zeros(4 * d, np.float32)
        sd[p + "mlp.2.weight"] = g.glorot_uniform(d, 4 * d)
        sd[p + "mlp.2.bias"] = np.zeros(d, np.float32)
        for ln in ("ln1", "ln2"):
            sd[p + ln + ".weight"] = np.ones(d, np.float32)
            sd[p + ln + ".bias"] = np.zeros(d, np.float32)
    sd["ln.weight"], sd["ln.bias"] = np.ones(d, np.float32), np.zeros(d, np.float32)
    sd["out.weight"] = g.glorot_uniform(vocab, d)
    sd["out.bias"] = np.zeros(vocab, np.float32)
    return {k: np.ascontiguousarray(v) for k, v in sd.items()}


class MT19937_64:
    """std::mt19937_64."""

    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64)
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        x = self.mt[self.index]
        self.index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & M64


def uniform_int(rng, lo, hi):
    """libstdc++'s std::uniform_int_distribution<int64_t>(lo, hi)(rng) for a
    64-bit generator: Lemire's nearly divisionless method on 128 bits."""
    r = hi - lo + 1
    product = rng() * r
    low = product & M64
    if low < r:
        threshold = ((1 << 64) - r) % r
        while low < threshold:
            product = rng() * r
            low = product & M64
    return lo + (product >> 64)


class Windows:
    """examples/char_text.hpp's training windows: random_starts(n, seq, batch, rng)
    with rng = std::mt19937_64(seed), one call a step."""

    def __init__(self, seed):
        self.rng = MT19937_64(seed)

    def starts(self, n, seq, batch):
        return np.array([uniform_int(self.rng, 0, n - seq - 2) for _ in range(batch)], dtype=np.int64)
