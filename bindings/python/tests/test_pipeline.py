"""Pipeline parallelism from Python: a 4-layer tanh MLP cut into 2 stages (threads as ranks, the
in-process backend) trains under GPipe, 1F1B and interleaved 1F1B to the parameters of the same
SGD in one process (f64, <= 1e-12); a stage that raises, and activations of the wrong size, fail
every stage with a clear error instead of hanging."""
import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory

WIDTHS = [3, 4, 4, 4, 2]  # layer l maps WIDTHS[l] -> WIDTHS[l + 1]; tanh after every layer but the last
LAYERS = len(WIDTHS) - 1
SAMPLES, MICRO, STEPS, LR = 16, 4, 4, 0.1
PER = SAMPLES // MICRO

X = np.array([[((i * 7 + j * 3) % 11) / 5.0 - 1.0 for j in range(WIDTHS[0])] for i in range(SAMPLES)])
Y = np.array([[((i * 5 + o * 2) % 7) / 3.0 - 1.0 for o in range(WIDTHS[-1])] for i in range(SAMPLES)])


def initial(layer):
    """(weight, bias) of a layer, deterministic."""
    n_in, n_out = WIDTHS[layer], WIDTHS[layer + 1]
    w = np.array([((layer * 31 + i * 7) % 19) / 19.0 - 0.5 for i in range(n_out * n_in)]).reshape(n_out, n_in)
    b = np.array([((layer * 13 + i * 5) % 7) / 14.0 - 0.25 for i in range(n_out)])
    return w, b


def layer_forward(layer, w, b, a):
    z = a @ w.T + b
    return z if layer == LAYERS - 1 else np.tanh(z)


def layers_backward(layers, params, acts, d, grads):
    """Back through `layers` (in order) given their inputs acts[i] and outputs acts[i + 1]; d is the
    gradient of the last output (pre-activation for the model's last layer). Adds into grads."""
    for i in reversed(range(len(layers))):
        w, _ = params[i]
        if layers[i] != LAYERS - 1:
            d = d * (1.0 - acts[i + 1] ** 2)
        gw, gb = grads[i]
        gw += d.T @ acts[i]
        gb += d.sum(axis=0)
        d = d @ w
    return d


def loss_and_grad(out, y):
    diff = out - y
    return 0.5 * float(np.mean(np.sum(diff * diff, axis=1))), diff / len(y)


def reference():
    """The same SGD in one process: per micro-batch mean gradients, averaged over the batch."""
    params = [initial(l) for l in range(LAYERS)]
    for _ in range(STEPS):
        total = [(np.zeros_like(w), np.zeros_like(b)) for w, b in params]
        for mb in range(MICRO):
            acts = [X[mb * PER:(mb + 1) * PER]]
            for l in range(LAYERS):
                acts.append(layer_forward(l, *params[l], acts[-1]))
            _, d = loss_and_grad(acts[-1], Y[mb * PER:(mb + 1) * PER])
            layers_backward(list(range(LAYERS)), params, acts, d, total)
        params = [(w - LR * gw / MICRO, b - LR * gb / MICRO) for (w, b), (gw, gb) in zip(params, total)]
    return params


class MlpStage(so.PipelineStage):
    """Pipeline rank `rank` of `stages`, holding model chunks rank, rank + stages, ...; each model
    chunk is a run of layers. Backward recomputes the chunk's forward from its input."""

    def __init__(self, rank, stages, virtual):
        chunks = stages * virtual
        self.layers = []  # per local chunk: its layers
        for c in range(virtual):
            k = c * stages + rank
            self.layers.append(list(range(k * LAYERS // chunks, (k + 1) * LAYERS // chunks)))
        self.tensor_of = {}  # layer -> index of its weight in this rank's layout (bias follows)
        for layers in self.layers:
            for l in layers:
                self.tensor_of[l] = 2 * len(self.tensor_of)

    def layout(self):
        layout = so.ParameterLayout(np.float64)
        for layers in self.layers:
            for l in layers:
                layout.add_matrix(f"fc{l}.weight", WIDTHS[l + 1], WIDTHS[l]).add(f"fc{l}.bias", WIDTHS[l + 1])
        return layout

    def initial(self):
        return np.concatenate([np.concatenate([w.ravel(), b]) for layers in self.layers for w, b in map(initial, layers)])

    def params(self, call, l):
        t = self.tensor_of[l]
        return call.parameters(t).reshape(WIDTHS[l + 1], WIDTHS[l]), call.parameters(t + 1)

    def run(self, call, input):
        layers = self.layers[call.chunk]
        a = X[call.micro_batch * PER:(call.micro_batch + 1) * PER] if call.first else input.reshape(PER, -1)
        acts = [a]
        for l in layers:
            acts.append(layer_forward(l, *self.params(call, l), acts[-1]))
        return layers, acts

    def forward(self, call, input):
        layers, acts = self.run(call, input)
        if call.last:
            call.loss, _ = loss_and_grad(acts[-1], Y[call.micro_batch * PER:(call.micro_batch + 1) * PER])
            return None
        return acts[-1]

    def backward(self, call, input, output_gradient):
        layers, acts = self.run(call, input)
        if call.last:
            _, d = loss_and_grad(acts[-1], Y[call.micro_batch * PER:(call.micro_batch + 1) * PER])
        else:
            d = output_gradient.reshape(PER, -1)
        params = [self.params(call, l) for l in layers]
        grads = [(call.grad(self.tensor_of[l]).reshape(WIDTHS[l + 1], WIDTHS[l]), call.grad(self.tensor_of[l] + 1))
                 for l in layers]
        d = layers_backward(layers, params, acts, d, grads)
        return None if call.first else d


def make_optimizer(backend, stage, stages=2):
    sgd = so.StochasticGradientDescentOptimizer(learning_rate=LR)
    return so.HybridShardedOptimizer(sgd, so.ShardingConfiguration(backend), pipeline_parallel_size=stages,
                                     layout=stage.layout(), initial=stage.initial())


@pytest.mark.parametrize("schedule,virtual", [(so.PipelineSchedule.GPIPE, 1), (so.PipelineSchedule.ONE_F_ONE_B, 1),
                                              ("interleaved_1f1b", 2)])
def test_two_stages_equal_single_process(schedule, virtual):
    want = reference()

    def rank(backend):
        backend.set_timeout(30000)
        stage = MlpStage(backend.rank, 2, virtual)
        with make_optimizer(backend, stage) as opt, \
                so.PipelineRunner(opt, stage, num_micro_batches=MICRO, schedule=schedule) as runner:
            results = [runner.run_batch() for _ in range(STEPS)]
            params = opt.get_parameters()
        diff = 0.0
        off = 0
        for layers in stage.layers:
            for l in layers:
                w, b = want[l]
                n = w.size + b.size
                diff = max(diff, float(np.max(np.abs(params[off:off + n] - np.concatenate([w.ravel(), b])))))
                off += n
        return diff, results

    out = launch_in_memory(2, rank)
    for r, (diff, results) in enumerate(out):
        assert diff <= 1e-12, f"rank {r}: max abs diff {diff}"
        assert all(res.step_applied for res in results)
        assert all(res.loss > 0 for res in results)
        assert results[0].loss == out[1 - r][1][0].loss  # every stage reports the last chunk's loss
        chunks_held = MICRO * virtual
        assert results[-1].sends == chunks_held * 2 - MICRO  # activations out, gradients back; one end is open
        if schedule == so.PipelineSchedule.GPIPE:
            assert results[-1].peak_activations == MICRO
        elif virtual == 1:
            assert results[-1].peak_activations == 2 - r  # 1F1B: p - r in flight


class Raising(MlpStage):
    """Stage 1's backward raises on micro-batch 1."""

    def backward(self, call, input, output_gradient):
        if call.model_chunk == 1 and call.micro_batch == 1:
            raise KeyError("the chain broke")
        return super().backward(call, input, output_gradient)


def run_all(world, fn):
    """fn(backend) on every rank (no abort on failure: the pipeline must stop every rank itself);
    returns each rank's exception or result."""
    import threading
    import uuid
    env = f"pipe-{uuid.uuid4()}"
    out = [None] * world

    def body(r):
        try:
            with so.InMemoryCommunicationBackend(r, world, env) as b:
                b.set_timeout(20000)
                out[r] = fn(b)
        except BaseException as e:  # noqa: BLE001 - checked by the test
            out[r] = e
    threads = [threading.Thread(target=body, args=(r,)) for r in range(world)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return out


def test_exception_in_a_stage_fails_every_stage():
    def rank(backend):
        stage = Raising(backend.rank, 2, 1)
        with make_optimizer(backend, stage) as opt, so.PipelineRunner(opt, stage, num_micro_batches=MICRO) as runner:
            runner.run_batch()

    errors = run_all(2, rank)
    # the raising stage gets its own exception back, the other the library's error naming it
    assert isinstance(errors[1], KeyError) and "the chain broke" in str(errors[1])
    assert isinstance(errors[0], RuntimeError), errors[0]
    assert "KeyError" in str(errors[0]) and "the chain broke" in str(errors[0]), str(errors[0])


class Resizing(MlpStage):
    """Stage 0 outputs one element more from the second batch on."""
    forwards = 0

    def forward(self, call, input):
        out = super().forward(call, input)
        if call.model_chunk == 0:
            self.forwards += 1
            if self.forwards > MICRO:
                return np.append(out.ravel(), 0.0)
        return out


def test_wrong_activation_size_fails_every_stage():
    def rank(backend):
        stage = Resizing(backend.rank, 2, 1)
        with make_optimizer(backend, stage) as opt, so.PipelineRunner(opt, stage, num_micro_batches=MICRO) as runner:
            runner.run_batch()  # agrees the sizes
            runner.run_batch()

    errors = run_all(2, rank)
    for e in errors:
        assert isinstance(e, RuntimeError) and "SHARDOPT_ERR_MISMATCH" in str(e), repr(e)
        assert "model chunk 0 output 17 elements" in str(e) and "agreed 16" in str(e), str(e)


class Mistaken(MlpStage):
    """Stage 1 returns an input gradient of the wrong size, or a float32 output from stage 0."""

    def __init__(self, rank, mistake):
        super().__init__(rank, 2, 1)
        self.mistake = mistake

    def forward(self, call, input):
        out = super().forward(call, input)
        return out.astype(np.float32) if self.mistake == "dtype" and out is not None else out

    def backward(self, call, input, output_gradient):
        g = super().backward(call, input, output_gradient)
        return g.ravel()[:-1] if self.mistake == "size" and g is not None else g


@pytest.mark.parametrize("mistake,error,text", [
    ("size", ValueError, "returned 15 elements for an input of 16"),
    ("dtype", TypeError, "holds float32 elements"),
])
def test_bad_returns_are_errors(mistake, error, text):
    def rank(backend):
        stage = Mistaken(backend.rank, mistake)
        with make_optimizer(backend, stage) as opt, so.PipelineRunner(opt, stage, num_micro_batches=MICRO) as runner:
            runner.run_batch()

    errors = run_all(2, rank)
    culprit = 1 if mistake == "size" else 0
    assert isinstance(errors[culprit], error) and text in str(errors[culprit]), repr(errors[culprit])
    other = errors[1 - culprit]
    assert isinstance(other, RuntimeError) and text in str(other), repr(other)


def test_runner_lifetime_and_arguments():
    with so.InMemoryCommunicationBackend(0, 1, "pipe-single") as b:
        stage = MlpStage(0, 1, 1)  # one stage holding the whole model
        opt = make_optimizer(b, stage, stages=1)
        with pytest.raises(TypeError, match="PipelineStage"):
            so.PipelineRunner(opt, object())
        with pytest.raises(ValueError, match="unknown pipeline schedule"):
            so.PipelineRunner(opt, stage, schedule="zigzag")
        with pytest.raises(ValueError, match="num_micro_batches must be >= 0"):
            so.PipelineRunner(opt, stage, num_micro_batches=-1)
        runner = so.PipelineRunner(opt, stage, num_micro_batches=MICRO)
        kept = []

        class Keeper(MlpStage):
            def backward(self, call, input, output_gradient):
                kept.append(call.grad(0))
                return super().backward(call, input, output_gradient)
        with so.PipelineRunner(opt, Keeper(0, 1, 1), num_micro_batches=MICRO) as keeper:
            assert keeper.run_batch().step_applied
        with pytest.raises(so.ObjectDisposedError, match="during its forward/backward only"):
            kept[0][0]
        with pytest.raises(ValueError, match="not a pipeline callback's"):  # the C ABI, called outside a callback
            so.native.shardopt_stage_call_grad(None, 0)
        opt.close()
        with pytest.raises(so.ObjectDisposedError, match="optimizer was closed or reset"):
            runner.run_batch()
        runner.close()
        with pytest.raises(so.ObjectDisposedError, match="PipelineRunner was closed"):
            runner.run_batch()
