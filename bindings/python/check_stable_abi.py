"""ctest bindings.python_abi3: the SWIG module is what the build says it is (bindings/python/python.cmake).

Usage: check_stable_abi.py MODULE LIMITED
  MODULE   the built module (_shardopt_native.abi3.so or _shardopt_native.so)
  LIMITED  ON when the build made it against the limited API (Py_LIMITED_API=0x030B0000, abi3)

Limited: the file is named .abi3.so (what every CPython >= 3.11 imports), the module was compiled with
Py_LIMITED_API=0x030B0000 (its SO_PY_LIMITED_API, from the compiler's view of the define), and abi3audit finds no
symbol outside the stable ABI and none newer than 3.11's (the limited API hides the interpreter's structs; a symbol
check alone would miss a struct read, the define check alone a function the stable ABI does not have). Exits 77
(skipped) after the first two checks when abi3audit is not installed (./dev deps installs it), and when the build is
not limited (SWIG < 4.2, Python < 3.11), after checking the module is then the version-specific one."""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

LIMITED_API = 0x030B0000
SKIP = 77


def load(path):
    loader = importlib.machinery.ExtensionFileLoader("_shardopt_native", path)
    spec = importlib.util.spec_from_file_location("_shardopt_native", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main(path, limited):
    name, folder = os.path.basename(path), os.path.dirname(path)
    expected, other = ("_shardopt_native.abi3.so", "_shardopt_native.so") if limited else \
        ("_shardopt_native.so", "_shardopt_native.abi3.so")
    if name != expected:
        sys.exit(f"FAIL: the module is {name}, expected {expected} (limited API: {limited})")
    if os.path.exists(os.path.join(folder, other)):
        sys.exit(f"FAIL: {other} beside {name}: Python would import one of them")
    defined = load(path).SO_PY_LIMITED_API
    if defined != (LIMITED_API if limited else 0):
        sys.exit(f"FAIL: {name} was compiled with Py_LIMITED_API={defined:#x}, expected "
                 f"{LIMITED_API if limited else 0:#x}")
    if not limited:
        print(f"SKIP: {name} is not built against the limited API (needs SWIG >= 4.2 and CPython >= 3.11)")
        return SKIP
    print(f"{name}: compiled with Py_LIMITED_API={defined:#x}")
    if importlib.util.find_spec("abi3audit") is None:
        print("SKIP: abi3audit is not installed (./dev deps, or pip install abi3audit)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        run = subprocess.run([sys.executable, "-m", "abi3audit", "--assume-minimum-abi3", "3.11", "--report",
                              "--output", report_path, path], capture_output=True, text=True)
        if not os.path.exists(report_path):
            sys.exit(f"FAIL: abi3audit gave no report (exit {run.returncode}):\n{run.stdout}{run.stderr}")
        with open(report_path) as f:
            report = json.load(f)
    result = report["specs"][path]["object"]["result"]
    print(f"abi3audit: {json.dumps(result)}")
    if run.returncode != 0 or result["non_abi3_symbols"] or not result["is_abi3_baseline_compatible"] \
            or tuple(map(int, result["computed"].split("."))) > (3, 11):
        sys.exit(f"FAIL: {name} uses what the stable ABI of CPython 3.11 does not have (abi3audit exit "
                 f"{run.returncode}):\n{run.stdout}{run.stderr}")
    print(f"{name}: stable ABI of CPython 3.11, no other symbol")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(os.path.abspath(sys.argv[1]), sys.argv[2].upper() in ("ON", "1", "TRUE", "YES")))
