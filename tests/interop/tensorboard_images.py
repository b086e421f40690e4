"""TensorBoardLogger::log_image: the tensorboard package reads back exactly the pixels flx wrote.

Runs tensorboard_images (C++), which logs images of every accepted layout
((W, H), (W, H, C) with C = 1 to 4, grids of (W, H, C, N)) and element type
(Float32, Float64, BFloat16, UInt8) into WORKDIR/run and lists each one's
values in WORKDIR/run/images.json. Then reads the event file with
tensorboard's EventAccumulator and, for every image, checks its step, its
width, height and colour space, and its PNG's pixels, exactly, against the
pixels computed here: floating values clamped to [0, 1] (NaN as 0), stored
as floor(255 v + 0.5); UInt8 as they are; pixel (x, y) of channel c of
image k from values[x, y, c, k] (column-major); a grid of `columns` images
per row (ceil(sqrt(N)) when 0) with `padding` zero pixels between them. The
PNG is decoded here with zlib (every chunk's CRC checked, every filter type
understood) and, when Pillow is installed, by Pillow too.

Exits 77 (ctest's skip) when tensorboard or numpy is missing
(scripts/install-deps.sh installs both).

usage: tensorboard_images.py TENSORBOARD_IMAGES_EXE WORKDIR
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import zlib

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator as ea
except ImportError as e:
    print(f"SKIPPED: {e.name} is not installed (scripts/install-deps.sh installs tensorboard and numpy)")
    sys.exit(77)

try:
    from PIL import Image
    import io
except ImportError:
    Image = None

exe, work = sys.argv[1], sys.argv[2]
run = os.path.join(work, "run")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
subprocess.run([exe, run], check=True)
want = json.load(open(os.path.join(run, "images.json")))


def decode_png(data):
    """(pixels [height, width, channels] uint8, colour type) of an 8-bit, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    at, chunks = 8, []
    while at < len(data):
        n, = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        crc, = struct.unpack(">I", data[at + 8 + n:at + 12 + n])
        assert crc == zlib.crc32(kind + body), f"bad CRC in chunk {kind}"
        chunks.append((kind, body))
        at += 12 + n
    assert at == len(data), "bytes after the last chunk"
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b""), [k for k, _ in chunks]
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, comp, filt, inter) == (8, 0, 0, 0), (depth, comp, filt, inter)
    ch = {0: 1, 4: 2, 2: 3, 6: 4}[ctype]
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = w * ch
    assert len(raw) == h * (stride + 1), "IDAT holds the wrong number of bytes"
    out = np.zeros((h, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        f, row = raw[y * (stride + 1)], np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, dtype=np.int32)
        for i in range(stride):
            a = cur[i - ch] if i >= ch else 0
            b, c = prev[i], (prev[i - ch] if i >= ch else 0)
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            else:
                raise AssertionError(f"unknown filter type {f}")
            cur[i] = (row[i] + pred) & 0xFF
        out[y], prev = cur, cur
    return out.reshape(h, w, ch).astype(np.uint8), ctype


def expected(entry):
    shape = entry["shape"] + [1] * (4 - len(entry["shape"]))
    w, h, c, n = shape
    v = np.array(entry["values"], dtype=np.float64).reshape(shape, order="F")  # [x, y, c, k]
    if entry["dtype"] == "UInt8":
        px = v.astype(np.uint8)
    else:
        v = np.where(np.isnan(v), 0.0, np.clip(v, 0.0, 1.0))
        px = np.floor(v * 255.0 + 0.5).astype(np.uint8)
    cols = min(entry["columns"], n) if entry["columns"] > 0 else math.ceil(math.sqrt(n))
    rows, pad = -(-n // cols), entry["padding"]
    gw, gh = cols * w + (cols - 1) * pad, rows * h + (rows - 1) * pad
    grid = np.zeros((gh, gw, c), dtype=np.uint8)
    for k in range(n):
        x0, y0 = (k % cols) * (w + pad), (k // cols) * (h + pad)
        grid[y0:y0 + h, x0:x0 + w, :] = px[:, :, :, k].transpose(1, 0, 2)  # [y, x, c]
    return grid


acc = ea.EventAccumulator(run, size_guidance={ea.IMAGES: 0})
acc.Reload()
tags = sorted(set(e["tag"] for e in want))
assert sorted(acc.Tags()["images"]) == tags, (acc.Tags()["images"], tags)
checked = 0
for tag in tags:
    events = acc.Images(tag)
    mine = [e for e in want if e["tag"] == tag]
    assert [e.step for e in events] == [e["step"] for e in mine], (tag, [e.step for e in events])
    for ev, entry in zip(events, mine):
        grid = expected(entry)
        got, ctype = decode_png(ev.encoded_image_string)
        assert (ev.height, ev.width) == grid.shape[:2], (tag, ev.height, ev.width, grid.shape)
        assert got.shape == grid.shape, (tag, got.shape, grid.shape)
        bad = np.argwhere(got != grid)
        assert len(bad) == 0, f"{tag} step {entry['step']}: {len(bad)} pixels differ, first at [y, x, c] = " \
                              f"{bad[0].tolist()}: PNG {got[tuple(bad[0])]}, expected {grid[tuple(bad[0])]}"
        if Image is not None:
            pil = np.asarray(Image.open(io.BytesIO(ev.encoded_image_string)))
            assert np.array_equal(pil.reshape(grid.shape), grid), f"{tag}: Pillow decodes other pixels"
        checked += 1
print(f"{checked} images in {len(tags)} tags read back exactly by tensorboard's EventAccumulator"
      f"{' (and Pillow)' if Image is not None else ''}")
