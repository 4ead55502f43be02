#!/usr/bin/env python3
"""Low-bit Adam state against its peers, on one problem, in one run: what 8-bit and 4-bit state cost in
final loss with shardopt (through shardopt.torch) and with torchao's Adam8bit / Adam4bit (the scheme issue 37
follows: bitsandbytes' 8-bit maps, torchao's 4-bit ones), each against fp32 torch.optim.Adam.

The problem is bench_optimizer_quality's in torch: an MLP (inputs -> hidden ReLU -> classes, softmax cross
entropy) on 8192 Gaussian blobs (centers N(0, 4), unit noise) with every fifth label flipped, Adam lr 2e-3,
batch 256, the same initialization and sample order for every optimizer. The final loss is the mean over the
last epoch's batches. Per shape and precision:

  name=lowbit_peer mlp=128x512x16 precision=4bit fp32_loss=... shardopt_loss=... shardopt_vs_fp32=+x%
        torchao_loss=... torchao_vs_fp32=+y%

Needs torch; torchao is optional (pip install torchao; without it the torchao columns read "-").
  python3 bench/lowbit_peers.py [--epochs 12] [--shapes 64x256x10,128x512x16]
"""
import argparse
import sys


def blobs(torch, n, features, classes, seed=7):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g, dtype=torch.float64) * 2.0
    y = torch.randint(0, classes, (n,), generator=g)
    x = (centers[y] + torch.randn(n, features, generator=g, dtype=torch.float64)).float()
    i = torch.arange(n)
    flip = (i * 2654435761) % 5 == 0  # every fifth sample, scrambled, as bench_optimizer_quality flips them
    y = torch.where(flip, (y + 1 + i % (classes - 1)) % classes, y)
    return x, y


def train(torch, shape, data, make_optimizer, epochs, batch=256):
    features, hidden, classes = shape
    torch.manual_seed(11)
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
    opt = make_optimizer(model)
    x, y = data
    order = torch.Generator().manual_seed(5)
    last = 0.0
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=order)
        total, batches = 0.0, 0
        for start in range(0, len(y), batch):
            idx = perm[start:start + batch]
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, batches = total + loss.item(), batches + 1
        last = total / batches
    closer = getattr(opt, "close", None)
    if closer:
        closer()
    return last


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--shapes", default="64x256x10,128x512x16")
    parser.add_argument("--lr", type=float, default=2e-3)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print('name=lowbit_peer skipped=yes reason="python3 has no torch"')
        return 0
    import shardopt.torch as st
    try:
        import torchao.optim as ao
    except ImportError:
        ao = None
    torch.set_num_threads(1)
    for text in args.shapes.split(","):
        shape = tuple(int(v) for v in text.split("x"))
        data = blobs(torch, 8192, shape[0], shape[2])
        fp32 = train(torch, shape, data, lambda m: torch.optim.Adam(m.parameters(), lr=args.lr), args.epochs)
        for precision in ("8bit", "4bit"):
            ours = train(torch, shape, data, lambda m: st.ShardedOptimizer(
                m, optimizer="adam", lr=args.lr, strategy="ddp", state_precision=precision), args.epochs)
            theirs = None
            if ao is not None:
                cls = ao.Adam8bit if precision == "8bit" else ao.Adam4bit
                theirs = train(torch, shape, data, lambda m: cls(m.parameters(), lr=args.lr), args.epochs)

            def rel(v):
                return f"{100.0 * (v - fp32) / fp32:+.2f}%"
            print(f"name=lowbit_peer mlp={text} epochs={args.epochs} precision={precision} fp32_loss={fp32:.6g} "
                  f"shardopt_loss={ours:.6g} shardopt_vs_fp32={rel(ours)} "
                  f"torchao_loss={'-' if theirs is None else f'{theirs:.6g}'} "
                  f"torchao_vs_fp32={'-' if theirs is None else rel(theirs)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
