"""shardopt.torch: PyTorch models on shardopt (docs/torch.md).

    opt = shardopt.torch.ShardedOptimizer(model, optimizer="adamw", lr=1e-3, strategy="zero2")

A torch.optim.Optimizer whose parameters are views of the library's parameter memory and whose gradients
accumulate in the library's gradient buckets; step() is one step of the library's sharded optimizer (DDP, ZeRO-1,
ZeRO-2, FSDP, Local SGD) over UCX (separate processes: `python -m shardopt.run -n 4 train.py` or torchrun) or any
CommunicationBackend. CPU tensors, or CUDA tensors of one device (the library's CUDA memory, viewed through DLPack;
NCCL, or the staged communicator for several ranks on one GPU: placement.py)."""
from .optimizer import ShardedOptimizer

__all__ = ["ShardedOptimizer"]
