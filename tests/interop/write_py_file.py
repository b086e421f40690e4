"""Python -> flx: safetensors.numpy.save_file writes a checkpoint; the C++
program parses it with flx::safetensors::parse and checks every entry.
usage: write_py_file.py INTEROP_EXE PATH"""
import subprocess
import sys

import numpy as np
from safetensors.numpy import save_file

exe, path = sys.argv[1], sys.argv[2]
save_file(
    {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(1.25),
        "f64": -np.arange(3, dtype=np.float64) / 8.0,
        "i64": np.array([[-(1 << 50)], [123]], dtype=np.int64),
        "u8": np.array([0, 60, 120, 180], dtype=np.uint8),
        "mask": np.array([True, False, True]),
        "f16": np.array([0.5, -3.0], dtype=np.float16),
    },
    path,
    metadata={"source": "numpy"},
)
sys.exit(subprocess.run([exe, "check", path]).returncode)
