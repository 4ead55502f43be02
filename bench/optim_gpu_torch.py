#!/usr/bin/env python3
"""torch.optim.Adam(fused=True) on the GPU, the peer of bench_optim_gpu, timed in the same run.

Adam over one f32 tensor of 16M, 64M and 256M parameters (28 bytes per parameter, as counted
for shardopt), best of several batches of steps timed with CUDA events. With --ours FILE (the
output of bench_optim_gpu) it also prints shardopt's speed relative to torch's per size.
bf16 mixed precision has no torch.optim counterpart (fused Adam on bf16 parameters keeps bf16
state and no fp32 master weights), so only f32 is compared.

Without torch or without a CUDA device it prints one line saying so and exits 0.
"""
import argparse
import re
import sys


def parse_ours(path):
    """params -> params_per_s of shardopt's f32 Adam with full-precision state, without gradient checks (the low-bit
    rows, state=8bit / 4bit, are another comparison)."""
    ours = {}
    with open(path) as f:
        for line in f:
            fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
            if (fields.get("name") == "optim_gpu" and fields.get("optimizer") == "adam"
                    and fields.get("dtype") == "f32" and fields.get("grad_checks") == "off"
                    and fields.get("state", "full") == "full"):
                ours[int(fields["params"])] = float(fields["params_per_s"])
    return ours


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="16,64,256", help="Mi-parameters")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--ours", help="bench_optim_gpu output to compare with")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print('name=optim_gpu_torch skipped=yes reason="python3 has no torch"')
        return 0
    if not torch.cuda.is_available():
        print('name=optim_gpu_torch skipped=yes reason="torch sees no CUDA device"')
        return 0

    ours = parse_ours(args.ours) if args.ours else {}
    print(f'name=optim_gpu_torch context=torch version={torch.__version__} device="{torch.cuda.get_device_name(0)}"')
    for mi in (int(s) for s in args.sizes.split(",")):
        n = mi << 20
        param = torch.full((n,), 0.0115, device="cuda", dtype=torch.float32, requires_grad=True)
        param.grad = torch.full_like(param, 0.0115)
        opt = torch.optim.Adam([param], lr=1e-3, fused=True)
        for _ in range(3):  # warm-up (state allocation, kernel loading)
            opt.step()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(args.reps):
            start.record()
            for _ in range(args.steps):
                opt.step()
            stop.record()
            stop.synchronize()
            best = min(best, start.elapsed_time(stop) / 1e3 / args.steps)
        rate = n / best
        line = (f"name=optim_gpu_torch optimizer=adam dtype=f32 impl=torch_fused params={n} bytes_per_param=28 "
                f"params_per_s={rate:.4g} eff_GBps={28 * rate / 1e9:.1f}")
        if n in ours:
            ratio = ours[n] / rate
            line += f" shardopt_vs_torch={ratio:.3f}"
            print(line)
            print(f"name=optim_gpu target=adam_f32_{mi}M_vs_torch_fused value={ratio:.3f} required=1.00 "
                  f"met={'yes' if ratio >= 1.0 else 'no'}")
        else:
            print(line)
        del opt, param
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
