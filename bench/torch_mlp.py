"""The model of the torch benches (bench/torch_step.py, bench/torch_gpu_step.py): `layers` linear layers of
width x width with a ReLU between each two, initialised from torch's seed 0 (about 100M parameters at 4096 x 6)."""
import torch


def mlp(width, layers):
    torch.manual_seed(0)
    modules = []
    for i in range(layers):
        modules.append(torch.nn.Linear(width, width))
        if i < layers - 1:
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)
