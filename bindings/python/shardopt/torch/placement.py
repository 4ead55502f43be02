"""Where a ShardedOptimizer's parameters live, and what follows from it (docs/torch.md, "CUDA").

CPU parameters: the library's host memory, UCX (or the backend given), and torch views of its memory through numpy.
CUDA parameters (all on one device): the library's CUDA memory on that device (f32), its compute stream torch's
current stream there, so the library's passes and torch's kernels are ordered by the stream itself, a GPU
communicator (NCCL, one GPU per rank; or the staged one, device buffers over UCX, for several ranks on one GPU), and
torch views of its device memory through DLPack (no copy: the parameters and gradients ARE the library's buffers)."""
import os

import numpy as np
import torch

from ..backends import (CommunicationBackend, NCCLCommunicationBackend, StagedCommunicationBackend,
                        UcxCommunicationBackend)
from ..configuration import MemorySpace

_LAUNCHERS = ("SHARDOPT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


def launched():
    """Whether a launcher (shardopt-run, torchrun, mpirun, srun) started this process as one rank of several."""
    return any(k in os.environ for k in _LAUNCHERS)


def device_of(named):
    """The one device of the parameters [(name, p)]: CPU, or one CUDA device. ValueError naming two parameters on
    different devices, or one on a device the library has no memory space for."""
    first_name, first = named[0]
    for name, p in named:
        if p.device.type not in ("cpu", "cuda"):
            raise ValueError(f"parameter '{name}' is on {p.device}: shardopt.torch takes CPU or CUDA tensors "
                             "(move the model with .cpu() or .cuda())")
        if p.device != first.device:
            raise ValueError(f"parameters '{first_name}' ({first.device}) and '{name}' ({p.device}) are on different "
                             "devices: one optimizer keeps all its parameters in one memory (move the model to one "
                             "device with .to(device))")
    device = first.device
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


class Placement:
    """The device's consequences for one optimizer: its backend, its memory settings, its views."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"

    def backend(self, backend):
        """(the communication backend, whether this optimizer made it and closes it). backend: a
        CommunicationBackend, or None / a name: CPU "ucx" (None: from the launcher's environment, or a world of one);
        CUDA "nccl" (None: one GPU per rank) or "staged" ("ucx" alike: device buffers over UCX, several ranks per
        GPU), from the launcher's environment, on this device."""
        if isinstance(backend, CommunicationBackend):
            if self.cuda and backend.device_id != self.device.index:
                where = "no GPU (a host backend)" if backend.device_id < 0 else f"GPU {backend.device_id}"
                raise ValueError(f"the parameters are on {self.device} and the backend's communicator on {where}: "
                                 "CUDA parameters need a GPU communicator of their device (NCCLCommunicationBackend "
                                 "or StagedCommunicationBackend with device_id=" f"{self.device.index})")
            return backend, False
        names = ("nccl", "staged", "ucx") if self.cuda else ("ucx",)
        if backend is not None and backend not in names:
            raise ValueError(f"backend must be None, {', '.join(map(repr, names))} or a shardopt CommunicationBackend "
                             f"for parameters on {self.device}, not {backend!r}")
        is_launched = launched()
        if is_launched:
            _torchrun_rendezvous()
        if not self.cuda:
            return UcxCommunicationBackend(single_process=not is_launched), True
        gpu = NCCLCommunicationBackend if backend in (None, "nccl") else StagedCommunicationBackend
        # -1, -1: the launcher's rank and size (without one: rank 0 of 1)
        return gpu(-1, -1, self.device.index), True

    def configure(self, config):
        """The sharding configuration's memory: CUDA memory on torch's current stream of the device."""
        if self.cuda:
            config.memory = MemorySpace.CUDA
            config.cuda_stream = torch.cuda.current_stream(self.device)

    def host_copy(self, tensors, np_dtype):
        """The tensors' values packed in one host array (the library's initial parameters)."""
        if not self.cuda:
            return np.concatenate([t.detach().reshape(-1).numpy().astype(np_dtype, copy=False) for t in tensors])
        return torch.cat([t.detach().reshape(-1) for t in tensors]).cpu().numpy().astype(np_dtype, copy=False)

    def view(self, array):
        """A torch tensor over a view of the library's memory (a NativeArray, or a DeviceArray in CUDA memory),
        holding the library's optimizer alive. CUDA: through DLPack, torch's current stream ordered after the
        library's work (the same stream here, so that costs an event only)."""
        if self.cuda:
            return torch.from_dlpack(array)
        return torch.from_numpy(array.view(np.ndarray))

    @staticmethod
    def host_collectives(backend):
        """Whether `backend` runs collectives on host arrays (the construction's agreement on the model): NCCL
        takes device buffers only, and there the library's own agreement at creation (MismatchError naming what
        differs) is the check."""
        return backend.device_id < 0


def _torchrun_rendezvous():
    """Under torchrun the agent's TCPStore holds MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE): rank 0 picks a free
    port for the library's rendezvous and publishes it there, under a key of this restart (the store outlives the
    restarts of an elastic run, so a port a dead group used is never read again)."""
    env = os.environ
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True" or "SHARDOPT_MASTER_PORT" in env:
        return
    import datetime
    from ..elastic_agent import free_port
    store = torch.distributed.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                                       timeout=datetime.timedelta(seconds=120))
    key = f"shardopt.torch/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/port"
    if int(env["RANK"]) == 0:
        store.set(key, str(free_port(env["MASTER_ADDR"])))  # the launcher's: below the ephemeral range
    env["SHARDOPT_MASTER_PORT"] = store.get(key).decode()
    env.setdefault("SHARDOPT_MASTER_ADDR", env["MASTER_ADDR"])
    # the job token (torchrun's run id and restart count) and the elastic generation (its restart count) are the
    # library's reading of torchrun's environment
