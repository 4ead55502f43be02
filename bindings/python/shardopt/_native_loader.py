"""Before the SWIG module loads, in an installed wheel: UCX from the libucx-cu13 wheel when installed (its
load_library(); RAPIDS_LIBUCX_PREFER_SYSTEM_LIBRARY=true prefers the system's), and $SHARDOPT_NCCL_LIBRARY pointed at
the nvidia-nccl wheel's libnccl.so.2 when that is installed and the variable unset (NCCL is opened at run time)."""
import os


def _load_ucx():
    try:
        import libucx
        return libucx.load_library()
    except (ImportError, OSError):
        return None  # the system's UCX (build trees, distribution packages)


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
