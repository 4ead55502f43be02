#!/usr/bin/env python3
"""Writes reference_values.hpp: parameters after 1, 2, 5 and 10 steps of every base optimizer.

An independent float64 numpy implementation of each rule, written from the algorithm boxes in
the torch.optim documentation (torch 2.x) and, for LAMB, from the paper (You et al. 2019) with
the bias-corrected Adam direction; NAdam, Adamax, Adadelta, Adafactor and Muon from torch 2.15's
single-tensor code (torch/optim/nadam.py, adamax.py, adadelta.py, _adafactor.py, _muon.py, in
float64 where torch's Muon runs Newton-Schulz in bfloat16), Lion from the paper (Chen et al.
2023) as lion-pytorch writes it. It shares no code with the C++ rules, so the unit tests compare
two implementations. Run it from anywhere: python3 make_reference.py

As in torch 2.x, `maximize` negates the gradient before anything else, so weight decay still
pulls parameters toward zero.
"""
import os

import numpy as np

STEPS = 10
CHECKPOINTS = (1, 2, 5, 10)

# torch.optim's defaults for the fields each rule reads (LAMB: common defaults of its
# implementations with decoupled weight decay off).
DEFAULTS = {
    "sgd": dict(lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False),
    "adam": dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False),
    "adamw": dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False),
    "rmsprop": dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                    maximize=False),
    "adagrad": dict(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                    maximize=False),
    "lamb": dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.0, maximize=False),
    "lion": dict(lr=1e-4, beta1=0.9, beta2=0.99, weight_decay=0.0, maximize=False),
    "nadam": dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                  decoupled_weight_decay=False, maximize=False),
    "adamax": dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, maximize=False),
    "adadelta": dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False),
    "adafactor": dict(lr=1e-2, beta2_decay=-0.8, eps=0.0, eps2=1e-3, clip_threshold=1.0, weight_decay=0.0,
                      maximize=False),
    "muon": dict(lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, eps=1e-7, ns_steps=5, ns_a=3.4445,
                 ns_b=-4.7750, ns_c=2.0315, adjust_lr="original", adamw_lr=1e-3, adamw_weight_decay=1e-2,
                 adamw_eps=1e-8, beta1=0.9, beta2=0.999, maximize=False),
}


def sgd(params, grads, h):
    bufs = [None] * len(params)
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            if h["momentum"] != 0:
                if t > 1:
                    bufs[i] = h["momentum"] * bufs[i] + (1 - h["dampening"]) * g
                else:
                    bufs[i] = g
                g = g + h["momentum"] * bufs[i] if h["nesterov"] else bufs[i]
            theta -= h["lr"] * g
        yield t


def adam(params, grads, h, decoupled):
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    v_max = [np.zeros_like(p) for p in params]
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if decoupled:
                theta *= 1 - h["lr"] * h["weight_decay"]
            elif h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1**t)
            if h["amsgrad"]:
                v_max[i] = np.maximum(v_max[i], v[i])
                v_hat = v_max[i] / (1 - b2**t)
            else:
                v_hat = v[i] / (1 - b2**t)
            theta -= h["lr"] * m_hat / (np.sqrt(v_hat) + h["eps"])
        yield t


def rmsprop(params, grads, h):
    square_avg = [np.zeros_like(p) for p in params]
    grad_avg = [np.zeros_like(p) for p in params]
    buf = [np.zeros_like(p) for p in params]
    a = h["alpha"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            square_avg[i] = a * square_avg[i] + (1 - a) * g * g
            v_tilde = square_avg[i]
            if h["centered"]:
                grad_avg[i] = a * grad_avg[i] + (1 - a) * g
                v_tilde = v_tilde - grad_avg[i] ** 2
            if h["momentum"] > 0:
                buf[i] = h["momentum"] * buf[i] + g / (np.sqrt(v_tilde) + h["eps"])
                theta -= h["lr"] * buf[i]
            else:
                theta -= h["lr"] * g / (np.sqrt(v_tilde) + h["eps"])
        yield t


def adagrad(params, grads, h):
    state_sum = [np.full_like(p, h["initial_accumulator_value"]) for p in params]
    for t, step_grads in enumerate(grads, start=1):
        lr_t = h["lr"] / (1 + (t - 1) * h["lr_decay"])
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            state_sum[i] = state_sum[i] + g * g
            theta -= lr_t * g / (np.sqrt(state_sum[i]) + h["eps"])
        yield t


def lamb(params, grads, h):
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1**t)
            v_hat = v[i] / (1 - b2**t)
            r = m_hat / (np.sqrt(v_hat) + h["eps"]) + h["weight_decay"] * theta
            w_norm, r_norm = np.linalg.norm(theta), np.linalg.norm(r)
            trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
            theta -= h["lr"] * trust * r
        yield t


def lion(params, grads, h):
    m = [np.zeros_like(p) for p in params]
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            update = np.sign(b1 * m[i] + (1 - b1) * g)
            theta *= 1 - h["lr"] * h["weight_decay"]
            theta -= h["lr"] * update
            m[i] = b2 * m[i] + (1 - b2) * g
        yield t


def nadam(params, grads, h):
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    mu_product = 1.0
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        mu = b1 * (1 - 0.5 * 0.96 ** (t * h["momentum_decay"]))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * h["momentum_decay"]))
        mu_product *= mu
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                if h["decoupled_weight_decay"]:
                    theta *= 1 - h["lr"] * h["weight_decay"]
                else:
                    g = g + h["weight_decay"] * theta
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            denom = np.sqrt(v[i] / (1 - b2**t)) + h["eps"]
            theta -= h["lr"] * (1 - mu) / (1 - mu_product) * g / denom
            theta -= h["lr"] * mu_next / (1 - mu_product * mu_next) * m[i] / denom
        yield t


def adamax(params, grads, h):
    m = [np.zeros_like(p) for p in params]
    u = [np.zeros_like(p) for p in params]
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            m[i] = b1 * m[i] + (1 - b1) * g
            u[i] = np.maximum(b2 * u[i], np.abs(g) + h["eps"])
            theta -= h["lr"] / (1 - b1**t) * m[i] / u[i]
        yield t


def adadelta(params, grads, h):
    sq = [np.zeros_like(p) for p in params]
    acc = [np.zeros_like(p) for p in params]
    rho = h["rho"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if h["weight_decay"] != 0:
                g = g + h["weight_decay"] * theta
            sq[i] = rho * sq[i] + (1 - rho) * g * g
            delta = np.sqrt(acc[i] + h["eps"]) / np.sqrt(sq[i] + h["eps"]) * g
            acc[i] = rho * acc[i] + (1 - rho) * delta * delta
            theta -= h["lr"] * delta
        yield t


def adafactor(params, grads, h, rows):
    eps1 = h["eps"] if h["eps"] > 0 else np.finfo(np.float64).eps
    state = []
    for p, r in zip(params, rows):
        if r:
            state.append((np.zeros(r), np.zeros(p.size // r)))
        else:
            state.append(np.zeros_like(p))
    for t, step_grads in enumerate(grads, start=1):
        beta2_t = t ** h["beta2_decay"]
        rho_t = min(h["lr"], 1 / t**0.5)
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            alpha = max(h["eps2"], np.linalg.norm(theta) / theta.size**0.5) * rho_t
            theta *= 1 - h["lr"] * h["weight_decay"]
            if rows[i]:
                gm = g.reshape(rows[i], -1)
                row_var, col_var = state[i]
                row_var += beta2_t * ((gm * gm).mean(axis=1) - row_var)
                col_var += beta2_t * ((gm * gm).mean(axis=0) - col_var)
                var = np.outer(row_var, col_var) / max(row_var.mean(), eps1)
                var = var.reshape(-1)
            else:
                state[i] += beta2_t * (g * g - state[i])
                var = state[i].copy()
            update = g / np.sqrt(np.maximum(var, eps1 * eps1))
            denom = max(1.0, np.linalg.norm(update) / (update.size**0.5 * h["clip_threshold"]))
            theta -= alpha / denom * update
        yield t


def newton_schulz(g, h):
    a, b, c = h["ns_a"], h["ns_b"], h["ns_c"]
    x = g.copy()
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / max(np.linalg.norm(x), h["eps"])
    for _ in range(h["ns_steps"]):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def muon(params, grads, h, rows):
    bufs = [np.zeros_like(p) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    b1, b2 = h["beta1"], h["beta2"]
    for t, step_grads in enumerate(grads, start=1):
        for i, (theta, grad) in enumerate(zip(params, step_grads)):
            g = -grad if h["maximize"] else grad.copy()
            if rows[i]:
                r, c = rows[i], theta.size // rows[i]
                bufs[i] = bufs[i] + (1 - h["momentum"]) * (g - bufs[i])
                u = g + h["momentum"] * (bufs[i] - g) if h["nesterov"] else bufs[i]
                o = newton_schulz(u.reshape(r, c), h).reshape(-1)
                scale = {"original": max(1, r / c) ** 0.5, "match_rms_adamw": 0.2 * max(r, c) ** 0.5,
                         "spectral_unclamped": (r / c) ** 0.5}[h["adjust_lr"]]
                theta *= 1 - h["lr"] * h["weight_decay"]
                theta -= h["lr"] * scale * o
            else:  # AdamW
                theta *= 1 - h["adamw_lr"] * h["adamw_weight_decay"]
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g * g
                m_hat, v_hat = m[i] / (1 - b1**t), v[i] / (1 - b2**t)
                theta -= h["adamw_lr"] * m_hat / (np.sqrt(v_hat) + h["adamw_eps"])
        yield t


RULES = {
    "sgd": sgd,
    "adam": lambda p, g, h: adam(p, g, h, decoupled=False),
    "adamw": lambda p, g, h: adam(p, g, h, decoupled=True),
    "rmsprop": rmsprop,
    "adagrad": adagrad,
    "lamb": lamb,
    "lion": lion,
    "nadam": nadam,
    "adamax": adamax,
    "adadelta": adadelta,
}
SHAPED_RULES = {"adafactor": adafactor, "muon": muon}  # these also take each tensor's rows (0: not a matrix)

# (name, kind, overrides of DEFAULTS[kind], tensor sizes, initial values of the last tensor)
CASES = [
    ("sgd_plain", "sgd", dict(lr=0.1), [9], None),
    ("sgd_momentum_dampening", "sgd", dict(lr=0.05, momentum=0.9, dampening=0.3), [9], None),
    ("sgd_nesterov_weight_decay", "sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1), [9], None),
    ("sgd_maximize", "sgd", dict(lr=0.1, momentum=0.5, weight_decay=0.05, maximize=True), [9], None),
    ("adam_plain", "adam", dict(lr=0.05), [9], None),
    ("adam_default_lr", "adam", dict(), [9], None),
    ("adam_amsgrad", "adam", dict(lr=0.05, amsgrad=True), [9], None),
    ("adam_weight_decay_maximize", "adam", dict(lr=0.05, weight_decay=0.1, beta1=0.8, beta2=0.95,
                                                eps=1e-3, maximize=True), [9], None),
    ("adamw_plain", "adamw", dict(lr=0.05, weight_decay=0.1), [9], None),
    ("adamw_amsgrad", "adamw", dict(lr=0.05, weight_decay=0.2, amsgrad=True), [9], None),
    ("rmsprop_plain", "rmsprop", dict(), [9], None),
    ("rmsprop_centered_momentum", "rmsprop", dict(lr=0.01, alpha=0.9, momentum=0.9, centered=True,
                                                  weight_decay=0.05), [9], None),
    ("rmsprop_momentum_maximize", "rmsprop", dict(lr=0.02, momentum=0.5, maximize=True), [9], None),
    ("adagrad_plain", "adagrad", dict(lr=0.1), [9], None),
    ("adagrad_lr_decay_initial_accumulator", "adagrad", dict(lr=0.1, lr_decay=0.05,
                                                             initial_accumulator_value=0.5,
                                                             weight_decay=0.1), [9], None),
    ("lamb_two_tensors", "lamb", dict(lr=0.05), [7, 3], None),
    ("lamb_weight_decay_zero_tensor", "lamb", dict(lr=0.05, weight_decay=0.1, beta2=0.99), [6, 4], 0.0),
    ("lion_plain", "lion", dict(lr=0.05), [9], None),
    ("lion_weight_decay_maximize", "lion", dict(lr=0.02, beta1=0.8, beta2=0.95, weight_decay=0.3, maximize=True),
     [9], None),
    ("nadam_plain", "nadam", dict(lr=0.05), [9], None),
    ("nadam_l2_momentum_decay", "nadam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.05, beta2=0.95),
     [9], None),
    ("nadam_decoupled_maximize", "nadam", dict(lr=0.05, weight_decay=0.2, decoupled_weight_decay=True,
                                              maximize=True), [9], None),
    ("adamax_plain", "adamax", dict(lr=0.05), [9], None),
    ("adamax_weight_decay_maximize", "adamax", dict(lr=0.05, weight_decay=0.1, beta1=0.8, eps=1e-3,
                                                    maximize=True), [9], None),
    ("adadelta_plain", "adadelta", dict(), [9], None),
    ("adadelta_weight_decay_maximize", "adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1,
                                                        maximize=True), [9], None),
    ("adafactor_vector", "adafactor", dict(), [9], None),
    ("adafactor_matrix_and_vector", "adafactor", dict(lr=0.05, weight_decay=0.1), [(3, 4), 5], None),
    ("adafactor_eps_clip_maximize", "adafactor", dict(eps=1e-3, eps2=1e-2, clip_threshold=1.5, beta2_decay=-0.5,
                                                      maximize=True), [(4, 2), (1, 3), 2], None),
    ("muon_matrix_and_vector", "muon", dict(lr=0.02), [(3, 4), 5], None),
    ("muon_tall_plain_momentum", "muon", dict(lr=0.05, nesterov=False, momentum=0.9, weight_decay=0.0,
                                              adjust_lr="match_rms_adamw"), [(5, 2), (2, 3)], None),
    ("muon_spectral_adamw_settings", "muon", dict(lr=0.03, adjust_lr="spectral_unclamped", ns_steps=3,
                                                  adamw_lr=0.05, adamw_weight_decay=0.0, adamw_eps=1e-3,
                                                  maximize=True), [(2, 6), 4], None),
]

# Gradient scale per step: large and small steps mix, so AMSGrad's running maximum differs from
# v. Dyadic scales keep every gradient exact in float32.
GRAD_SCALE = [1.0, 0.25, 1.5, 0.0625, 0.5, 2.0, 0.125, 0.75, 0.375, 1.0]


def dyadic(rng, n, lo, hi):
    """Multiples of 1/1024 in [lo, hi): exact in float32 and float64, so both start equal."""
    return np.round(rng.uniform(lo, hi, n) * 1024) / 1024


def make_inputs(seed, sizes, last_tensor_value):
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    magnitude = dyadic(rng, total, 0.25, 2.0)
    initial = magnitude * rng.choice([-1.0, 1.0], total)
    if last_tensor_value is not None:
        initial[total - sizes[-1]:] = last_tensor_value
    grads = []
    for scale in GRAD_SCALE:
        g = dyadic(rng, total, -1.0, 1.0) * scale
        g[rng.integers(total)] = 0.0  # a zero gradient somewhere in every step
        grads.append(g)
    return initial, grads


def split(flat, sizes):
    return np.split(flat, np.cumsum(sizes)[:-1])


def run_case(kind, hyper, sizes, rows, initial, grads):
    params = [p.copy() for p in split(initial, sizes)]
    per_tensor_grads = [split(g, sizes) for g in grads]
    snapshots = {}
    steps = SHAPED_RULES[kind](params, per_tensor_grads, hyper, rows) if kind in SHAPED_RULES else \
        RULES[kind](params, per_tensor_grads, hyper)
    for t in steps:
        if t in CHECKPOINTS:
            snapshots[t] = np.concatenate(params)
    return snapshots


def literal(x):
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, str):
        return "MuonLrAdjust::" + x
    return repr(float(x))  # shortest repr round-trips exactly through strtod


INT_FIELDS = {"ns_steps"}


def doubles(values):
    return "{" + ", ".join(literal(v) for v in values) + "}"


def emit_case(out, name, kind, hyper, sizes, rows, initial, grads, snapshots):
    out.append("    {")
    out.append(f'        ReferenceCase c;')
    out.append(f'        c.name = "{name}";')
    out.append(f"        c.options.kind = OptimizerKind::{kind};")
    for field in sorted(hyper):
        value = str(hyper[field]) if field in INT_FIELDS else literal(hyper[field])
        out.append(f"        c.options.{field} = {value};")
    out.append(f"        c.tensor_sizes = {{{', '.join(str(s) for s in sizes)}}};")
    if any(rows):
        out.append(f"        c.tensor_rows = {{{', '.join(str(r) for r in rows)}}};")
    out.append(f"        c.initial = {doubles(initial)};")
    for g in grads:
        out.append(f"        c.grads.push_back({doubles(g)});")
    for t in CHECKPOINTS:
        out.append(f"        c.expected.push_back({{{t}, {doubles(snapshots[t])}}});")
    out.append("        cases.push_back(std::move(c));")
    out.append("    }")


def main():
    out = [
        "// Generated by make_reference.py: do not edit. Regenerate with python3 make_reference.py.",
        "// Parameters after 1, 2, 5 and 10 steps of each base optimizer, from an independent float64",
        "// implementation of torch.optim's update rules.",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <utility>",
        "#include <vector>",
        "",
        '#include "shardopt/optim.hpp"',
        "",
        "namespace shardopt::reference {",
        "",
        "struct ReferenceCase {",
        "    const char *name = nullptr;",
        "    OptimizerOptions options; // every field the rule reads is set below",
        "    std::vector<std::size_t> tensor_sizes;",
        "    std::vector<std::size_t> tensor_rows;    // matrices' rows, 0 for other tensors (empty: none)",
        "    std::vector<double> initial;             // all tensors, concatenated",
        "    std::vector<std::vector<double>> grads;  // one flat gradient per step",
        "    std::vector<std::pair<int, std::vector<double>>> expected; // (step, parameters after it)",
        "};",
        "",
        "inline std::vector<ReferenceCase> reference_cases() {",
        "    std::vector<ReferenceCase> cases;",
    ]
    for seed, (name, kind, overrides, shapes, last_value) in enumerate(CASES):
        hyper = dict(DEFAULTS[kind], **overrides)
        sizes = [s[0] * s[1] if isinstance(s, tuple) else s for s in shapes]
        rows = [s[0] if isinstance(s, tuple) else 0 for s in shapes]
        initial, grads = make_inputs(1000 + seed, sizes, last_value)
        snapshots = run_case(kind, hyper, sizes, rows, initial, grads)
        emit_case(out, name, kind, hyper, sizes, rows, initial, grads, snapshots)
    out += ["    return cases;", "}", "", "} // namespace shardopt::reference", ""]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_values.hpp")
    with open(path, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
