"""The reference linear model of the porting programs (bindings/README.md, "The reference model";
tests/bindings/reference_f64.cpp): exact data and arithmetic in a fixed order, so its f64
training is bit for bit the C++ core's. A shardopt.Model: the class an AiDotNet program's model
is replaced with."""
import numpy as np

import shardopt as so

SAMPLES, FEATURES = 64, 8


def feature(i, j):
    return float((7 * i + 3 * j) % 11 - 5) / 8.0


def target(i):
    acc = 0.0
    for j in range(FEATURES):
        acc += 0.125 * float(j + 1) * feature(i, j)
    return acc + 0.25


def dataset(first=0, count=SAMPLES):
    """(x, y) for samples first .. first + count - 1 (x: count x 8 float64, y: count float64)."""
    rows = range(first, first + count)
    x = np.array([[feature(i, j) for j in range(FEATURES)] for i in rows], dtype=np.float64)
    y = np.array([target(i) for i in rows], dtype=np.float64)
    return x, y


class LinearModel(so.Model):
    """y = weight . x + bias, mean squared error / 2. Parameters "weight" (8), "bias" (1), zeros."""

    def __init__(self, dtype=np.float64):
        super().__init__([("weight", FEATURES), ("bias", 1)], dtype=dtype)

    def loss_and_gradient(self, parameters, gradient, x, y):
        # plain Python floats, in the reference's order (numpy's pairwise sums would round differently)
        p = parameters.tolist()
        w, b = p[:FEATURES], p[FEATURES]
        rows, targets = x.tolist(), y.tolist()
        m = len(rows)
        loss, gw, gb = 0.0, [0.0] * FEATURES, 0.0
        for xi, yi in zip(rows, targets):
            pred = 0.0
            for j in range(FEATURES):
                pred += w[j] * xi[j]
            err = pred + b - yi
            loss += 0.5 * err * err
            for j in range(FEATURES):
                gw[j] += err * xi[j]
            gb += err
        for j in range(FEATURES):
            gradient[j] = gw[j] / float(m)
        gradient[FEATURES] = gb / float(m)
        return loss / float(m)

    def predict(self, x, parameters=None):
        p = self.get_parameters() if parameters is None else np.asarray(parameters)
        return x @ p[:FEATURES] + p[FEATURES]
