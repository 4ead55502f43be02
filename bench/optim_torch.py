#!/usr/bin/env python3
"""shardopt's CPU Adam against torch.optim.Adam(fused=True) on the CPU, in one process.

Both update f32 tensors of the same size from the same allocator (torch's), with 1 and 2
threads (torch.set_num_threads; shardopt's update threads), one step each in alternation, the
order swapped every round, with a pause between steps so neither side's idle threads still
spin while the other runs. shardopt's step runs through build/bench/libshardopt_bench_optim.so
(bench/optim_kernel_lib.cpp). Per size and thread count it prints the best step of each side,
the median over rounds of the per-round ratio (steps measured moments apart, robust on a shared
machine) and whether shardopt reaches 1.1x torch's fused Adam:

  name=optim peer=torch_fused params=67108864 threads=1 shardopt_params_per_s=... torch_params_per_s=...
        ratio=1.12 per_round=1.10,1.12,1.15 met=yes

It also says whether one step of each from the same state gives bitwise the same parameters.
Without torch it prints one line saying so and exits 0.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True, help="libshardopt_bench_optim.so")
    parser.add_argument("--sizes", default="64,256", help="Mi-parameters")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--required", type=float, default=1.1)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print('name=optim peer=torch_fused skipped=yes reason="python3 has no torch (./dev bench optim installs it)"')
        return 0
    lib = ctypes.CDLL(os.path.abspath(args.lib))
    step_fn = lib.shardopt_bench_adam_step
    step_fn.restype = ctypes.c_double
    step_fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_size_t, ctypes.c_int, ctypes.c_longlong]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"name=optim peer=torch_fused context=torch version={torch.__version__} "
          f"interop_threads={torch.get_num_interop_threads()}")
    for mi in (int(s) for s in args.sizes.split(",")):
        n = mi << 20
        gen = torch.Generator().manual_seed(mi)
        param = torch.rand(n, generator=gen) - 0.5
        grad = torch.rand(n, generator=gen) * 1e-2
        # shardopt's arrays: copies of torch's starting state, the gradient shared (read only).
        ours_p, ours_m, ours_v = param.clone(), torch.zeros(n), torch.zeros(n)
        param.grad = grad
        opt = torch.optim.Adam([param], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, fused=True)
        ours_step = 0

        def ours(t):
            nonlocal ours_step
            ours_step += 1
            return step_fn(ours_p.data_ptr(), grad.data_ptr(), ours_m.data_ptr(), ours_v.data_ptr(), n, t,
                           ours_step)

        def theirs(t):
            torch.set_num_threads(t)
            t0 = time.perf_counter()
            opt.step()
            return time.perf_counter() - t0

        # The first step from the same state: same bits? (informative; torch may fuse operations)
        theirs(threads[0])
        ours(threads[0])
        same = torch.equal(param.view(torch.int32), ours_p.view(torch.int32))
        diff = (param - ours_p).abs().max().item()
        print(f"name=optim peer=torch_fused params={n} first_step_bitwise_equal={'yes' if same else 'no'} "
              f"max_abs_diff={diff:.3g}")
        for t in threads:  # warm-up: thread pools started, pages touched
            theirs(t)
            ours(t)
        best = {(side, t): float("inf") for side in ("ours", "torch") for t in threads}
        ratios = {t: [] for t in threads}
        for r in range(args.rounds):
            for t in threads:
                times = {}
                for side in (("torch", "ours") if r % 2 == 0 else ("ours", "torch")):
                    time.sleep(0.02)  # the other side's threads stop spinning
                    times[side] = theirs(t) if side == "torch" else ours(t)
                    best[(side, t)] = min(best[(side, t)], times[side])
                ratios[t].append(times["torch"] / times["ours"])
        for t in threads:
            med = statistics.median(ratios[t])
            per_round = ",".join(f"{x:.2f}" for x in ratios[t])
            print(f"name=optim peer=torch_fused params={n} threads={t} "
                  f"shardopt_params_per_s={n / best[('ours', t)]:.4g} torch_params_per_s={n / best[('torch', t)]:.4g} "
                  f"ratio={med:.2f} per_round={per_round} required={args.required} "
                  f"met={'yes' if med >= args.required else 'no'}")
        del opt, param, grad, ours_p, ours_m, ours_v
    return 0


if __name__ == "__main__":
    sys.exit(main())
