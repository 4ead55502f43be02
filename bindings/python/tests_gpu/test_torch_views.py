"""Issue 34: a small torch MLP whose parameters and gradients are torch views of the library's memory (torch.from_dlpack,
no copy), trained by the library's AdamW, equals torch.optim.AdamW on the same MLP within 1e-6 after 20 steps; and the
same MLP trained by optimize() with the model on the device (device_batches) equals it too. Two variants of one code:
"cpu" (host memory, an in-memory backend: runs wherever torch is, ctest bindings.python_torch_views) and "cuda" (CUDA
memory on the NCCL backend, the optimizer's compute stream torch's: needs a GPU, ctest bindings.python_gpu, label gpu)."""
import numpy as np
import pytest

import shardopt as so

torch = pytest.importorskip("torch")
SHAPES = [("w1", (16, 8)), ("b1", (16,)), ("w2", (1, 16)), ("b2", (1,))]
X = torch.linspace(-1, 1, 64 * 8, dtype=torch.float32).reshape(64, 8).sin()
Y = (X @ torch.linspace(-0.5, 0.5, 8)).unsqueeze(1).cos()


def forward(params, x):
    w1, b1, w2, b2 = params
    return torch.tanh(x @ w1.T + b1) @ w2.T + b2


def initial():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(shape, generator=g) * 0.3 for _, shape in SHAPES]


def reference(device, steps=20):
    """torch.optim.AdamW over the same MLP and batches: the parameters after `steps` steps."""
    params = [p.to(device).requires_grad_() for p in initial()]
    opt = torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for step in range(steps):
        rows = slice(8 * (step % 8), 8 * (step % 8) + 8)
        opt.zero_grad()
        torch.nn.functional.mse_loss(forward(params, X[rows].to(device)), Y[rows].to(device)).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in params]).cpu()


@pytest.fixture(params=["cpu", "cuda"])
def place(request):
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available())")
    backend = so.NCCLCommunicationBackend(0, 1) if request.param == "cuda" else so.InMemoryCommunicationBackend(0, 1)
    cfg = so.ShardingConfiguration(backend)
    if request.param == "cuda":
        torch.cuda.set_device(backend.device_id)
        cfg.memory, cfg.cuda_stream = so.MemorySpace.CUDA, torch.cuda.current_stream()
    yield request.param, cfg
    backend.close()


def make(cfg, device_batches=False):
    layout = so.ParameterLayout(np.float32)
    for name, shape in SHAPES:
        layout.add(name, int(np.prod(shape)))
    options = so.AdamWOptimizerOptions(learning_rate=1e-2, beta1=0.9, beta2=0.999, epsilon=1e-8, weight_decay=0.01,
                                       batch_size=8, max_iterations=20 // 8 + 1, max_steps=20, shuffle_data=False,
                                       use_early_stopping=False, evaluate_best_solution=False,
                                       device_batches=device_batches)
    start = torch.cat([p.flatten() for p in initial()]).numpy()
    return so.DDPOptimizer(so.AdamWOptimizer(options), cfg).initialize(layout, start)


def test_torch_views_of_the_librarys_memory_train_as_torch_adamw(place):
    device, cfg = place
    with make(cfg) as opt:
        params = [torch.from_dlpack(opt.tensor_parameters(t)).view(shape) for t, (_, shape) in enumerate(SHAPES)]
        assert all(p.device.type == device for p in params)
        for step in range(20):
            rows = slice(8 * (step % 8), 8 * (step % 8) + 8)
            leaves = [p.detach().requires_grad_() for p in params]  # the library's memory, no copy
            torch.nn.functional.mse_loss(forward(leaves, X[rows].to(device)), Y[rows].to(device)).backward()
            opt.zero_grad()
            for t, leaf in enumerate(leaves):
                torch.from_dlpack(opt.tensor_grad(t)).copy_(leaf.grad.flatten())  # into the library's gradient
            opt.step()
        got = torch.from_numpy(opt.get_parameters())
        seen = torch.cat([p.flatten() for p in params]).cpu()  # the views see the library's update
    want = reference(device)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(seen, want, rtol=1e-6, atol=1e-7)


def test_the_model_on_the_device_trains_as_torch_adamw(place):
    device, cfg = place

    def model(p, g, samples):  # the library's packed parameters and gradient, viewed by torch
        flat = torch.from_dlpack(p)
        sizes = [int(np.prod(shape)) for _, shape in SHAPES]
        leaves = [t.view(shape).detach().requires_grad_() for t, (_, shape) in zip(flat.split(sizes), SHAPES)]
        rows = torch.as_tensor(np.array(samples))
        loss = torch.nn.functional.mse_loss(forward(leaves, X[rows].to(device)), Y[rows].to(device))
        if g is not None:
            loss.backward()
            torch.from_dlpack(g).copy_(torch.cat([leaf.grad.flatten() for leaf in leaves]))
        return float(loss.detach())

    with make(cfg, device_batches=device == "cuda") as opt:
        result = opt.optimize(model, so.OptimizationInputData(num_samples=64))
        assert result.steps == 20
        got = torch.from_numpy(opt.get_parameters())
    torch.testing.assert_close(got, reference(device), rtol=1e-6, atol=1e-7)
