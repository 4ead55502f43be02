"""The demo model of the samples (and of the Python binding's tests): a 2-layer MLP (ReLU, softmax cross-entropy) on
synthetic Gaussian blobs, with numpy; parameters packed fc1.weight, fc1.bias, fc2.weight, fc2.bias, like
samples/c/train_mlp.c. A sample, as MlpDemo.cs and MlpDemo.java are: not part of the shardopt package."""
import numpy as np

from shardopt import ParameterLayout


class MlpDemo:
    def __init__(self, inputs=16, hidden=32, classes=4, samples=512, seed=7, dtype=np.float32):
        self.inputs, self.hidden, self.classes, self.samples, self.dtype = inputs, hidden, classes, samples, np.dtype(dtype)
        rng = np.random.RandomState(seed)
        centers = rng.normal(0, 2.0, (classes, inputs))
        self.y = rng.randint(0, classes, samples)
        self.x = centers[self.y] + rng.normal(0, 1.0, (samples, inputs))
        self.sizes = [hidden * inputs, hidden, classes * hidden, classes]

    def layout(self):
        # the weights are matrices (out x in, row-major): PowerSGD compression can approximate them
        return (ParameterLayout(self.dtype).add_matrix("fc1.weight", self.hidden, self.inputs).add("fc1.bias", self.hidden)
                .end_bucket().add_matrix("fc2.weight", self.classes, self.hidden).add("fc2.bias", self.classes).end_bucket())

    def initial_parameters(self, seed=11):
        rng = np.random.RandomState(seed)
        b1, b2 = 1 / np.sqrt(self.inputs), 1 / np.sqrt(self.hidden)
        parts = [rng.uniform(-b1, b1, self.sizes[0]), rng.uniform(-b1, b1, self.sizes[1]),
                 rng.uniform(-b2, b2, self.sizes[2]), rng.uniform(-b2, b2, self.sizes[3])]
        return np.concatenate(parts).astype(self.dtype)

    def _split(self, p):
        i, h, c = self.inputs, self.hidden, self.classes
        o = np.cumsum([0] + self.sizes)
        return (p[o[0]:o[1]].reshape(h, i), p[o[1]:o[2]], p[o[2]:o[3]].reshape(c, h), p[o[3]:o[4]])

    def __call__(self, params, grad, samples):
        """Mean loss over `samples`; the mean gradient into grad (the optimize() model signature)."""
        w1, b1, w2, b2 = (a.astype(np.float64) for a in self._split(params))
        x, y = self.x[samples], self.y[samples]
        n = max(len(samples), 1)
        a = x @ w1.T + b1
        hdn = np.maximum(a, 0)
        logits = hdn @ w2.T + b2
        prob = np.exp(logits - logits.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        loss = -np.log(np.maximum(prob[np.arange(len(y)), y], 1e-300)).sum() / n
        d = prob
        d[np.arange(len(y)), y] -= 1
        d /= n
        dh = (d @ w2) * (a > 0)
        gw1, gb1, gw2, gb2 = self._split(grad)
        gw2[...], gb2[...], gw1[...], gb1[...] = d.T @ hdn, d.sum(axis=0), dh.T @ x, dh.sum(axis=0)
        return float(loss)

    def loss(self, params):
        return self(params, np.zeros_like(params), np.arange(self.samples))
