"""Without the SWIG module: training steps, and shardopt_optimizer_train with a Python callback, through
libshardopt.so with ctypes only (the layouts of shardopt.h's structs, ABI version 2)."""
import ctypes
import os
import threading

import numpy as np
import pytest

c_size, c_int32, c_int64, c_double, c_uint64 = ctypes.c_size_t, ctypes.c_int32, ctypes.c_int64, ctypes.c_double, ctypes.c_uint64

ABI_VERSION = 2
OPT_FIELD_LR = 1 << 1  # SHARDOPT_OPT_FIELD_LR
SHARDOPT_DISABLE = 2   # shardopt_switch


class OptimizerOptions(ctypes.Structure):  # shardopt_optimizer_options
    _fields_ = [("struct_size", c_size), ("field_mask", c_uint64), ("kind", ctypes.c_int), ("lr", c_double),
                ("weight_decay", c_double), ("maximize", c_int32), ("momentum", c_double), ("dampening", c_double),
                ("nesterov", c_int32), ("beta1", c_double), ("beta2", c_double), ("eps", c_double),
                ("amsgrad", c_int32), ("alpha", c_double), ("centered", c_int32), ("lr_decay", c_double),
                ("initial_accumulator_value", c_double)]


class ShardingOptions(ctypes.Structure):  # shardopt_sharding_options
    _fields_ = [("struct_size", c_size), ("strategy", ctypes.c_int), ("gradient_accumulation_steps", c_int32),
                ("max_grad_norm", c_double), ("skip_nonfinite", ctypes.c_int), ("staging_buffers", c_int32),
                ("fsdp_prefetch", ctypes.c_int), ("pipeline_parallel_size", c_int32),
                ("tensor_parallel_size", c_int32), ("data_parallel_size", c_int32),
                ("hybrid_data_strategy", ctypes.c_int), ("hsdp_replicas", c_int32), ("local_sgd_period", c_int32),
                ("memory", ctypes.c_int), ("cuda_stream", ctypes.c_void_p), ("update_threads", c_int32),
                ("overlap_param_gather", ctypes.c_int),
                ("broadcast_initial", ctypes.c_int)]


class StepResult(ctypes.Structure):  # shardopt_step_result
    _fields_ = [("struct_size", c_size), ("applied", c_int32), ("skipped_nonfinite", c_int32),
                ("accumulating", c_int32), ("grad_norm", c_double), ("reduce_wait_seconds", c_double),
                ("update_seconds", c_double), ("post_update_seconds", c_double)]


class TrainingOptions(ctypes.Structure):  # shardopt_training_options
    _fields_ = [("struct_size", c_size), ("num_samples", c_int64), ("num_validation_samples", c_int64),
                ("num_test_samples", c_int64), ("batch_size", c_int64), ("max_epochs", c_int32), ("max_steps", c_int64),
                ("shuffle", c_int32), ("seed", c_uint64), ("early_stopping", c_int32), ("patience", c_int32),
                ("tolerance", c_double), ("lr_schedule", ctypes.c_int), ("lr_per_step", c_int32), ("warmup", c_int64),
                ("decay_period", c_int64), ("min_lr", c_double), ("gamma", c_double), ("lr_fn", ctypes.c_void_p),
                ("lr_user_data", ctypes.c_void_p), ("evaluate_best", c_int32)]


class TrainingResult(ctypes.Structure):  # shardopt_training_result
    _fields_ = [("struct_size", c_size), ("best_parameters", ctypes.c_void_p), ("best_parameters_count", c_size),
                ("training_loss_history", ctypes.POINTER(c_double)), ("validation_loss_history", ctypes.POINTER(c_double)),
                ("learning_rate_history", ctypes.POINTER(c_double)), ("history_capacity", c_size), ("epochs", c_int32),
                ("steps", c_int64), ("best_epoch", c_int32), ("best_score", c_double), ("stopped_early", c_int32),
                ("training_loss", c_double), ("validation_loss", c_double), ("test_loss", c_double)]


class Batch(ctypes.Structure):  # shardopt_batch
    _fields_ = [("struct_size", c_size), ("dataset", ctypes.c_int), ("params", ctypes.POINTER(c_double)),
                ("grad", ctypes.POINTER(c_double)), ("samples", ctypes.POINTER(c_int64)), ("sample_count", c_size),
                ("epoch", c_int32), ("step", c_int64)]


BATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.POINTER(c_double))


@pytest.fixture(scope="module")
def lib():
    path = os.environ.get("SHARDOPT_LIBRARY")
    if not path:
        pytest.skip("SHARDOPT_LIBRARY not set")
    lib = ctypes.CDLL(path)
    lib.shardopt_last_error_message.restype = ctypes.c_char_p
    assert lib.shardopt_abi_version() == ABI_VERSION
    return lib


def check(lib, status):
    assert status == 0, lib.shardopt_last_error_message().decode()


def sgd_step(lib, comm, sgd, sharding, grad_values, n=4):
    """Creates an optimizer over `comm` with ones, takes one step with `grad_values`, returns the
    parameters and the step result."""
    params, opt = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib, lib.shardopt_params_create(0, c_size(0), ctypes.byref(params)))  # SHARDOPT_F32
    check(lib, lib.shardopt_params_add(params, b"w", c_size(n), 0, None))
    initial = np.ones(n, np.float32)
    check(lib, lib.shardopt_optimizer_create(comm, params, ctypes.byref(sgd), ctypes.byref(sharding),
                                             initial.ctypes.data_as(ctypes.c_void_p), ctypes.byref(opt)))
    check(lib, lib.shardopt_optimizer_zero_grad(opt))
    grad, count = ctypes.c_void_p(), c_size()
    check(lib, lib.shardopt_optimizer_bucket_grad(opt, 0, ctypes.byref(grad), ctypes.byref(count)))
    np.ctypeslib.as_array(ctypes.cast(grad, ctypes.POINTER(ctypes.c_float)), (count.value,))[:] = grad_values
    result = StepResult(struct_size=ctypes.sizeof(StepResult))
    check(lib, lib.shardopt_optimizer_step(opt, ctypes.byref(result)))
    out = np.empty(n, np.float32)
    check(lib, lib.shardopt_optimizer_get_parameters(opt, out.ctypes.data_as(ctypes.c_void_p), c_size(n)))
    check(lib, lib.shardopt_optimizer_destroy(opt))
    check(lib, lib.shardopt_params_destroy(params))
    return out, result


def test_one_step_with_ctypes(lib):
    comm = ctypes.c_void_p()
    check(lib, lib.shardopt_comm_create_inprocess(1, ctypes.byref(comm)))
    sgd, sharding = OptimizerOptions(), ShardingOptions()
    check(lib, lib.shardopt_optimizer_options_init_sized(ctypes.byref(sgd), c_size(ctypes.sizeof(sgd)), 0))  # SGD
    check(lib, lib.shardopt_sharding_options_init_sized(ctypes.byref(sharding), c_size(ctypes.sizeof(sharding))))
    assert sgd.field_mask == (1 << 15) - 1 and sharding.skip_nonfinite == 1 and sharding.overlap_param_gather == 2
    sgd.lr = 0.5
    out, r = sgd_step(lib, comm, sgd, sharding, [1, 2, 3, 4])
    np.testing.assert_allclose(out, [0.5, 0.0, -0.5, -1.0])
    assert r.applied == 1 and r.grad_norm == pytest.approx(30 ** 0.5)
    assert min(r.reduce_wait_seconds, r.update_seconds, r.post_update_seconds) >= 0
    check(lib, lib.shardopt_comm_destroy(comm))


def test_zeroed_structs_are_the_defaults(lib):
    """A caller that never calls _init: zeroed structs with struct_size set are SGD and DDP with
    their defaults; a field set without its field_mask bit is refused, naming it."""
    comm = ctypes.c_void_p()
    check(lib, lib.shardopt_comm_create_inprocess(1, ctypes.byref(comm)))
    sgd = OptimizerOptions(struct_size=ctypes.sizeof(OptimizerOptions))
    sharding = ShardingOptions(struct_size=ctypes.sizeof(ShardingOptions))
    out, r = sgd_step(lib, comm, sgd, sharding, [1, 2, 3, 4])
    np.testing.assert_allclose(out, 1 - 1e-3 * np.array([1, 2, 3, 4]), rtol=1e-6)  # SGD's lr 1e-3
    out, r = sgd_step(lib, comm, sgd, sharding, [np.nan, 0, 0, 0])  # skip_nonfinite: AUTO = on
    assert r.skipped_nonfinite == 1 and r.applied == 0
    np.testing.assert_array_equal(out, np.ones(4, np.float32))
    sharding.skip_nonfinite = SHARDOPT_DISABLE
    out, r = sgd_step(lib, comm, sgd, sharding, [np.nan, 0, 0, 0])
    assert r.applied == 1 and np.isnan(out[0])
    sharding.skip_nonfinite = 0

    sgd.lr = 0.5  # without its bit
    params, opt = ctypes.c_void_p(), ctypes.c_void_p()
    check(lib, lib.shardopt_params_create(0, c_size(0), ctypes.byref(params)))
    check(lib, lib.shardopt_params_add(params, b"w", c_size(4), 0, None))
    status = lib.shardopt_optimizer_create(comm, params, ctypes.byref(sgd), ctypes.byref(sharding), None,
                                           ctypes.byref(opt))
    assert status == 1 and b"SHARDOPT_OPT_FIELD_LR is not in field_mask" in lib.shardopt_last_error_message()
    check(lib, lib.shardopt_params_destroy(params))
    sgd.field_mask = OPT_FIELD_LR
    out, r = sgd_step(lib, comm, sgd, sharding, [1, 2, 3, 4])
    np.testing.assert_allclose(out, [0.5, 0.0, -0.5, -1.0])
    check(lib, lib.shardopt_comm_destroy(comm))


def test_inprocess_member_from_threads(lib):
    """The experimental in-process group registry: each thread claims its own rank by name."""
    sums, errors = [None] * 3, []

    def rank(r):
        try:
            comm = ctypes.c_void_p()
            check(lib, lib.shardopt_comm_create_inprocess_member(b"ctypes-group", r, 3, ctypes.byref(comm)))
            x = np.array([r + 1.0])
            check(lib, lib.shardopt_allreduce(comm, x.ctypes.data_as(ctypes.c_void_p),
                                              x.ctypes.data_as(ctypes.c_void_p), c_size(1), 1, 0))  # F64, SUM
            sums[r] = x[0]
            check(lib, lib.shardopt_comm_destroy(comm))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and sums == [6.0, 6.0, 6.0]


def test_train_with_a_ctypes_callback(lib):
    """shardopt_optimizer_train, the training loop every language shares, with AiDotNet's defaults from
    shardopt_training_options_init_sized: y = 2x fitted by SGD on one rank, the whole set per step."""
    comm, params, opt = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    check(lib, lib.shardopt_comm_create_inprocess(1, ctypes.byref(comm)))
    sgd, sharding = OptimizerOptions(), ShardingOptions()
    check(lib, lib.shardopt_optimizer_options_init_preset(ctypes.byref(sgd), c_size(ctypes.sizeof(sgd)), 0))  # SGD
    check(lib, lib.shardopt_sharding_options_init_sized(ctypes.byref(sharding), c_size(ctypes.sizeof(sharding))))
    sgd.lr = 0.1
    check(lib, lib.shardopt_params_create(1, c_size(0), ctypes.byref(params)))  # SHARDOPT_F64
    check(lib, lib.shardopt_params_add(params, b"w", c_size(1), 0, None))
    check(lib, lib.shardopt_optimizer_create(comm, params, ctypes.byref(sgd), ctypes.byref(sharding), None,
                                             ctypes.byref(opt)))
    t = TrainingOptions()
    check(lib, lib.shardopt_training_options_init_sized(ctypes.byref(t), c_size(ctypes.sizeof(t))))
    assert (t.max_epochs, t.batch_size, t.shuffle, t.early_stopping, t.patience, t.tolerance) == (100, 32, 1, 1, 10, 1e-6)
    t.num_samples, t.batch_size, t.max_epochs, t.shuffle = 8, 0, 3, 0
    xs = [float(i) / 8 for i in range(8)]

    @BATCH_FN
    def model(user, batch, loss):
        b = batch.contents
        w, n, total, g = b.params[0], b.sample_count, 0.0, 0.0
        for k in range(n):
            x = xs[b.samples[k]]
            total += 0.5 * (w * x - 2 * x) ** 2
            g += (w * x - 2 * x) * x
        if b.grad:
            b.grad[0] = g / n
        loss[0] = total / n
        return 0
    best, history = (c_double * 1)(), (c_double * 9)()
    r = TrainingResult(struct_size=ctypes.sizeof(TrainingResult), best_parameters=ctypes.cast(best, ctypes.c_void_p),
                       best_parameters_count=1, history_capacity=3)
    r.training_loss_history, r.validation_loss_history, r.learning_rate_history = (
        ctypes.cast(ctypes.byref(history, 8 * 3 * i), ctypes.POINTER(c_double)) for i in range(3))
    check(lib, lib.shardopt_optimizer_train(opt, model, None, ctypes.byref(t), ctypes.byref(r)))
    assert (r.epochs, r.steps, r.best_epoch, r.stopped_early) == (3, 3, 2, 0)
    assert history[0] > history[1] > history[2] and history[6:9] == [0.1, 0.1, 0.1]
    assert all(v != v for v in history[3:6])  # no validation set: NaN
    assert r.best_score == history[2] and 0 < best[0] < 2 and r.training_loss < history[2]
    check(lib, lib.shardopt_optimizer_destroy(opt))
    check(lib, lib.shardopt_params_destroy(params))
    check(lib, lib.shardopt_comm_destroy(comm))
