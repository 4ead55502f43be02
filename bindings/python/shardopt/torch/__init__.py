"""shardopt.torch: PyTorch models on shardopt (docs/torch.md).

    opt = shardopt.torch.ShardedOptimizer(model, optimizer="adamw", lr=1e-3, strategy="zero2")

A torch.optim.Optimizer whose parameters are views of the library's parameter memory and whose gradients
accumulate in the library's gradient buckets; step() is one step of the library's sharded optimizer (DDP, ZeRO-1,
ZeRO-2, FSDP, Local SGD) over UCX (separate processes: `python -m shardopt.run -n 4 train.py` or torchrun) or any
CommunicationBackend. Host (CPU) tensors; CUDA tensors wait for the DLPack work of the GPU-bindings issue."""
from .optimizer import ShardedOptimizer

__all__ = ["ShardedOptimizer"]
