"""Without the SWIG module: one training step through libshardopt.so with ctypes only."""
import ctypes
import os

import numpy as np
import pytest

c_size, c_int32, c_double = ctypes.c_size_t, ctypes.c_int32, ctypes.c_double


class OptimizerOptions(ctypes.Structure):  # shardopt_optimizer_options
    _fields_ = [("struct_size", c_size), ("kind", ctypes.c_int), ("lr", c_double), ("weight_decay", c_double),
                ("maximize", c_int32), ("momentum", c_double), ("dampening", c_double), ("nesterov", c_int32),
                ("beta1", c_double), ("beta2", c_double), ("eps", c_double), ("amsgrad", c_int32),
                ("alpha", c_double), ("centered", c_int32), ("lr_decay", c_double),
                ("initial_accumulator_value", c_double)]


class ShardingOptions(ctypes.Structure):  # shardopt_sharding_options
    _fields_ = [("struct_size", c_size), ("strategy", ctypes.c_int)] + [
        (n, c_int32) for n in ("gradient_accumulation_steps",)] + [("max_grad_norm", c_double)] + [
        (n, c_int32) for n in ("skip_nonfinite", "staging_buffers", "fsdp_prefetch", "pipeline_parallel_size",
                               "tensor_parallel_size", "data_parallel_size")] + [
        ("hybrid_data_strategy", ctypes.c_int), ("hsdp_replicas", c_int32), ("local_sgd_period", c_int32)]


def test_one_step_with_ctypes():
    path = os.environ.get("SHARDOPT_LIBRARY")
    if not path:
        pytest.skip("SHARDOPT_LIBRARY not set")
    lib = ctypes.CDLL(path)
    lib.shardopt_last_error_message.restype = ctypes.c_char_p

    def ok(status):
        assert status == 0, lib.shardopt_last_error_message().decode()

    comm, params, opt = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    ok(lib.shardopt_comm_create_inprocess(1, ctypes.byref(comm)))
    ok(lib.shardopt_params_create(0, c_size(0), ctypes.byref(params)))  # SHARDOPT_F32
    ok(lib.shardopt_params_add(params, b"w", c_size(4), 0, None))
    sgd, sharding = OptimizerOptions(), ShardingOptions()
    ok(lib.shardopt_optimizer_options_init_sized(ctypes.byref(sgd), c_size(ctypes.sizeof(sgd)), 0))  # SGD
    ok(lib.shardopt_sharding_options_init_sized(ctypes.byref(sharding), c_size(ctypes.sizeof(sharding))))
    sgd.lr = 0.5
    initial = np.ones(4, np.float32)
    ok(lib.shardopt_optimizer_create(comm, params, ctypes.byref(sgd), ctypes.byref(sharding),
                                     initial.ctypes.data_as(ctypes.c_void_p), ctypes.byref(opt)))
    ok(lib.shardopt_optimizer_zero_grad(opt))
    grad, count = ctypes.c_void_p(), c_size()
    ok(lib.shardopt_optimizer_bucket_grad(opt, 0, ctypes.byref(grad), ctypes.byref(count)))
    np.ctypeslib.as_array(ctypes.cast(grad, ctypes.POINTER(ctypes.c_float)), (count.value,))[:] = [1, 2, 3, 4]
    ok(lib.shardopt_optimizer_step(opt, None))
    out = np.empty(4, np.float32)
    ok(lib.shardopt_optimizer_get_parameters(opt, out.ctypes.data_as(ctypes.c_void_p), c_size(4)))
    np.testing.assert_allclose(out, [0.5, 0.0, -0.5, -1.0])
    ok(lib.shardopt_optimizer_destroy(opt))
    ok(lib.shardopt_params_destroy(params))
    ok(lib.shardopt_comm_destroy(comm))
