"""The model of the cross-language conformance suite (tests/bindings/conformance/README.md, "The model") as a
shardopt.Model, its data sets, and the suite's output format. Every operation is one IEEE double operation in
the README's order (plain Python floats, no numpy sums), so every language computes the same bits."""
import struct

import numpy as np

import shardopt as so

FEATURES, TRAIN, VALIDATION, TEST = 8, 64, 32, 16


def feature(r, j):
    return ((7 * r + 3 * j) % 11 - 5) / 8.0


def target(r):
    acc = 0.0
    for j in range(FEATURES):
        acc += 0.125 * (j + 1) * feature(r, j)
    return acc + 0.25 + ((37 * r) % 17 - 8) / 16.0


def dataset(first, count):
    """(x, y) of rows first .. first + count - 1: the training set is dataset(0, TRAIN), the validation set
    dataset(TRAIN, VALIDATION), the test set dataset(TRAIN + VALIDATION, TEST)."""
    rows = range(first, first + count)
    return (np.array([[feature(r, j) for j in range(FEATURES)] for r in rows]), np.array([target(r) for r in rows]))


class ConformanceModel(so.Model):
    """A linear model: tensors weight (8, or declared as a (rows, cols) matrix of 8) and bias (1), initially 0; the
    mean of 0.5 err^2."""

    def __init__(self, dtype=np.float64, weight_shape=FEATURES):
        super().__init__([("weight", weight_shape), ("bias", 1)], dtype)

    def loss(self, parameters, x, y):
        return self.loss_and_gradient(parameters, None, x, y)

    def loss_and_gradient(self, parameters, gradient, x, y):
        p = parameters.tolist()
        loss, gw, gb = 0.0, [0.0] * FEATURES, 0.0
        for xi, yi in zip(x.tolist(), y.tolist()):
            pred = 0.0
            for j in range(FEATURES):
                pred += p[j] * xi[j]
            err = pred + p[FEATURES] - yi
            loss += 0.5 * err * err
            for j in range(FEATURES):
                gw[j] += err * xi[j]
            gb += err
        n = float(len(y))
        if gradient is not None:  # written as the element type (rounded to float32 for float32 parameters)
            gradient[:] = [g / n for g in gw] + [gb / n]
        return loss / n


def _doubles(word, values):
    return word + "".join(" " + struct.pack(">d", float(v)).hex() for v in values)


def run_output(name, result, params):
    """The suite's lines for a run: rank 0's result of optimize() and the optimizer's final parameters."""
    loss = lambda r: r.loss if r is not None else float("nan")  # noqa: E731 - a set not given: NaN, as in C
    return "\n".join([f"run {name}", _doubles("params", params), _doubles("best", result.best_solution),
                      _doubles("training", result.training_loss_history),
                      _doubles("validation", result.validation_loss_history), _doubles("lr", result.learning_rate_history),
                      f"counts {result.iterations} {result.steps} {result.best_epoch} {int(result.stopped_early)}",
                      _doubles("losses", [result.best_fitness_score, loss(result.training_result),
                                          loss(result.validation_result), loss(result.test_result)])]) + "\n"
