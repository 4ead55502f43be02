#!/usr/bin/env python3
"""The consolidated checkpoint's model.safetensors loads with the safetensors package and holds
the trained parameters. Usage: check_safetensors.py CHECKPOINT_TOOL WORKDIR
Exits 77 (ctest SKIP_RETURN_CODE) when python's numpy or safetensors is missing."""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:  # ./dev deps installs them; elsewhere the test is skipped
    print(f"skipping: {e}")
    sys.exit(77)


def check(tool, workdir, dtype):
    out = os.path.join(workdir, dtype)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    subprocess.run([tool, "export", out, dtype], check=True)
    tensors = load_file(os.path.join(out, "model.safetensors"))
    np_dtype = np.float32 if dtype == "f32" else np.float64
    expected = np.fromfile(os.path.join(out, "expected.bin"), dtype=np_dtype)
    names = [line.split() for line in open(os.path.join(out, "expected.txt"))]
    assert list(tensors.keys()) == sorted(n for n, _ in names) or set(tensors) == {n for n, _ in names}, tensors.keys()
    at = 0
    for name, count in names:
        count = int(count)
        arr = tensors[name]
        assert arr.dtype == np_dtype, (name, arr.dtype)
        assert arr.shape == (count,), (name, arr.shape)
        assert np.array_equal(arr, expected[at:at + count]), name
        at += count
    assert at == expected.size
    assert abs(expected).sum() > 0
    print(f"{dtype}: {len(names)} tensors, {at} values match")


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    for dtype in ("f32", "f64"):
        check(tool, workdir, dtype)


if __name__ == "__main__":
    main()
