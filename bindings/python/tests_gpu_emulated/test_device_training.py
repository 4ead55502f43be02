"""Issue 34, label gpu_emulated: optimize(model, ...) with the model on the device (device_batches). The optimizer is in
CUDA memory on the CUDA stand-in; the model gets DeviceArray views of the library's device memory and moves them as a
CUDA consumer would (the stand-in's cudaMemcpy): its training equals the same training with host copies, the views
expire when the call returns, and what cannot work is refused up front."""
import numpy as np
import pytest

import shardopt as so
from standin import INITIAL, copy, needed

pytestmark = needed
TARGET = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def make(backend, memory, device_batches):
    cfg = so.ShardingConfiguration(backend)
    cfg.memory = memory
    options = so.AdamOptimizerOptions(learning_rate=0.05, max_iterations=5, batch_size=4, random_seed=11,
                                      device_batches=device_batches)
    return so.ZeRO2Optimizer(so.AdamOptimizer(options), cfg).initialize(so.ParameterLayout(np.float32).add("w", 4),
                                                                          INITIAL)


def loss_and_gradient(p, samples):
    """Sample s pulls the parameters towards TARGET * (1 + s / 10): the mean loss and gradient over `samples`."""
    scale = (1 + samples.astype(np.float32) / 10)[:, None]
    d = p[None, :] - TARGET[None, :] * scale
    return float(0.5 * (d.astype(np.float64) ** 2).sum(1).mean()), d.mean(0).astype(np.float32)


def host_model(p, g, samples, dataset):
    loss, grad = loss_and_gradient(np.asarray(p), samples)
    if g is not None:
        g[:] = grad
    return loss


class DeviceModel:
    """The model on the device: reads params and writes grad through their device addresses, keeps every view."""

    def __init__(self):
        self.views, self.calls = [], 0

    def __call__(self, p, g, samples, dataset):
        self.calls += 1
        assert isinstance(p, so.DeviceArray) and (g is None or isinstance(g, so.DeviceArray))
        assert p.__cuda_array_interface__["data"][1] is True  # the parameters are read-only to the model
        host = np.empty(4, np.float32)
        copy(host.ctypes.data, p.__cuda_array_interface__["data"][0], 16)
        loss, grad = loss_and_gradient(host, samples)
        if g is not None:
            copy(g.__cuda_array_interface__["data"][0], grad.ctypes.data, 16)
        self.views.append(p)
        return loss


def test_the_model_on_the_device_trains_as_with_host_copies():
    data = so.OptimizationInputData(num_samples=12, num_validation_samples=5, num_test_samples=3)
    with so.StagedCommunicationBackend(0, 1) as b:
        with make(b, so.MemorySpace.CUDA, False) as host_copies:
            expected = host_copies.optimize(host_model, data)
        model = DeviceModel()
        with make(b, so.MemorySpace.CUDA, True) as on_device:
            got = on_device.optimize(model, data)
            assert model.calls > 0
            with pytest.raises(so.ObjectDisposedError, match="only during the model call"):
                model.views[0].__cuda_array_interface__  # a view kept past its call
    np.testing.assert_allclose(got.best_solution, expected.best_solution, rtol=1e-6)
    assert got.best_epoch == expected.best_epoch and got.steps == expected.steps
    np.testing.assert_allclose(got.validation_loss_history, expected.validation_loss_history, rtol=1e-6)
    assert got.validation_loss_history[-1] < got.validation_loss_history[0]


def test_device_batches_refusals():
    data = so.OptimizationInputData(num_samples=4)
    with so.StagedCommunicationBackend(0, 1) as b:
        with make(b, so.MemorySpace.HOST, True) as on_host:
            with pytest.raises(so.InvalidArgumentError, match="device_batches needs an optimizer in cuda memory"):
                on_host.optimize(DeviceModel(), data)
        cfg = so.ShardingConfiguration(b)
        cfg.memory = so.MemorySpace.CUDA
        numpy_model = so.Model([("w", 4)], np.float32)  # AiDotNet's form: the wrapped optimizer's (numpy) model
        adam = so.AdamOptimizer(numpy_model, so.AdamOptimizerOptions(device_batches=True))
        with so.ZeRO2Optimizer(adam, cfg) as on_device:
            with pytest.raises(TypeError, match="device_batches: the library hands the model device memory"):
                on_device.optimize(so.OptimizationInputData(x_train=np.zeros((4, 1)), y_train=np.zeros(4)))
