"""Finds the native libraries an installed wheel needs before the SWIG module loads.

UCX: the wheel depends on `libucx-cu13` (the UCX wheel RAPIDS uses). Its `load_library()` opens
libucs/libuct/libucp from that package (RTLD_LOCAL: only the loader's cache learns them), so
`libshardopt.so`'s NEEDED libucp.so.0 etc. resolve to them; where the package is absent (a build
tree, a system install) the system's UCX is used as before. RAPIDS_LIBUCX_PREFER_SYSTEM_LIBRARY=true
prefers the system's UCX.

NCCL: optional (`pip install shardopt[nccl]` pulls `nvidia-nccl-cu13`). The core opens libnccl at
run time (dlopen) from $SHARDOPT_NCCL_LIBRARY or the loader's path; when the `nvidia.nccl` package
is installed and the variable is unset, it is pointed at that package's libnccl.so.2, as PyTorch
finds its NCCL. Without NCCL the `nccl` backend is reported unavailable, never a load failure.
"""
import os


def _load_ucx():
    try:
        import libucx
    except ImportError:
        return None  # the system's UCX (build trees, distribution packages)
    try:
        return libucx.load_library()
    except OSError:
        return None


def _nccl_library():
    try:
        import nvidia.nccl as nccl  # namespace package of nvidia-nccl-cu13 / -cu12
    except ImportError:
        return None
    for base in list(getattr(nccl, "__path__", [])):
        lib = os.path.join(base, "lib", "libnccl.so.2")
        if os.path.isfile(lib):
            return lib
    return None


_UCX = _load_ucx()
if not os.environ.get("SHARDOPT_NCCL_LIBRARY"):
    _lib = _nccl_library()
    if _lib:
        os.environ["SHARDOPT_NCCL_LIBRARY"] = _lib
