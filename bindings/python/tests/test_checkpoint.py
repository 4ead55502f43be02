"""Checkpoints on 4 in-process ranks: serialize/deserialize resumes bit for bit, save_model/load_model
(both forms) reshards across strategies, and IO/corrupt failures raise OSError and change nothing; serialize_to
streams serialize's bytes to a file object (1 and 2 ranks), and a writer's exception fails every rank."""
import io
import os
import socket
import threading

import numpy as np
import pytest

import shardopt as so
from ranks import launch_in_memory
from mlp_demo import MlpDemo

MODEL = MlpDemo()
BATCH = 128


def train(opt, rank, first, count):
    """Steps [first, first + count) with the step protocol: each rank's slice of a fixed batch."""
    per = BATCH // opt.world_size
    grad = np.zeros(MODEL.layout().element_count, np.float32)
    for step in range(first, first + count):
        b0 = step * BATCH % MODEL.samples
        samples = np.arange(b0 + rank * per, b0 + (rank + 1) * per)
        params = opt.get_parameters()
        grad[:] = 0
        MODEL(params, grad, samples)
        opt.zero_grad()
        off, tensors = 0, opt.tensor_count
        for t in range(tensors):
            g = opt.tensor_grad(t)
            g[:] = grad[off:off + g.size]
            off += g.size
            bucket = opt.tensor_bucket(t)
            if t + 1 == tensors or opt.tensor_bucket(t + 1) != bucket:
                opt.grad_ready(bucket)  # frees its staging buffer for the next bucket
        assert opt.step().applied


def make(cls, backend):
    return cls(so.AdamOptimizer(learning_rate=3e-3), so.ShardingConfiguration(backend), layout=MODEL.layout(),
               initial=MODEL.initial_parameters())


@pytest.mark.parametrize("cls", [so.DDPOptimizer, so.ZeRO2Optimizer, so.FSDPOptimizer])
def test_serialize_deserialize_resumes_bitwise(cls):
    def rank(backend):
        with make(cls, backend) as opt:
            train(opt, backend.rank, 0, 3)
            data = opt.serialize()
            assert isinstance(data, bytes) and len(data) > 0
            train(opt, backend.rank, 3, 3)
            straight = opt.get_parameters().copy()
            opt.deserialize(data)
            assert opt.step_count == 3
            train(opt, backend.rank, 3, 3)
            resumed = opt.get_parameters().copy()
            return data, straight, resumed
    results = launch_in_memory(4, rank)
    for data, straight, resumed in results:
        assert data == results[0][0]  # the same bytes on every rank
        assert straight.tobytes() == resumed.tobytes()
        assert straight.tobytes() == results[0][1].tobytes()


@pytest.mark.parametrize("consolidated", [False, True])
def test_save_zero2_load_fsdp(tmp_path, consolidated):
    path = tmp_path / ("consolidated" if consolidated else "sharded")

    def rank(backend):
        with make(so.ZeRO2Optimizer, backend) as saved:
            train(saved, backend.rank, 0, 4)
            saved.save_model(path if consolidated else str(path), consolidated=consolidated)
            expected = saved.get_parameters().copy()
        with so.FSDPOptimizer(so.AdamOptimizer(learning_rate=3e-3), so.ShardingConfiguration(backend),
                              layout=MODEL.layout()) as fresh:
            assert fresh.get_parameters().tobytes() != expected.tobytes()
            fresh.load_model(path)
            assert fresh.step_count == 4
            return expected, fresh.get_parameters().copy()
    for expected, loaded in launch_in_memory(4, rank):
        assert expected.tobytes() == loaded.tobytes()
    assert os.listdir(path)


def test_io_and_corrupt_errors_are_os_errors(tmp_path):
    missing = tmp_path / "never-written"

    def rank(backend):
        with make(so.ZeRO2Optimizer, backend) as opt:
            train(opt, backend.rank, 0, 2)
            data = bytearray(opt.serialize())
            before = opt.get_parameters().copy()
            with pytest.raises(OSError, match="SHARDOPT_ERR_IO: .*never-written"):
                opt.load_model(missing)
            data[0] ^= 0xFF  # wrong magic
            with pytest.raises(OSError, match="SHARDOPT_ERR_CORRUPT: .*magic"):
                opt.deserialize(bytes(data))
            data[0] ^= 0xFF
            with pytest.raises(OSError, match="SHARDOPT_ERR_CORRUPT"):
                opt.deserialize(bytes(data[:len(data) // 2]))  # truncated
            data[len(data) // 2] ^= 0x01  # a flipped bit in the payload: checksum
            with pytest.raises(OSError, match="SHARDOPT_ERR_CORRUPT"):
                opt.deserialize(data)
            with pytest.raises(OSError, match="SHARDOPT_ERR_CORRUPT"):
                opt.deserialize(b"")
            with pytest.raises(TypeError):
                opt.deserialize(None)
            with pytest.raises(TypeError):
                opt.load_model(None)
            assert opt.get_parameters().tobytes() == before.tobytes()  # failed loads change nothing
            assert opt.step_count == 2
    launch_in_memory(4, rank)
    assert not missing.exists()


def test_layout_mismatch_is_value_error():
    def rank(backend):
        with make(so.DDPOptimizer, backend) as opt:
            data = opt.serialize()
        with so.DDPOptimizer(so.AdamOptimizer(), so.ShardingConfiguration(backend),
                             layout=so.ParameterLayout().add("w", 4)) as other:
            with pytest.raises(ValueError, match="SHARDOPT_ERR_INVALID_ARGUMENT"):
                other.deserialize(data)
    launch_in_memory(4, rank)


WINDOW = 4096  # SHARDOPT_CHECKPOINT_WINDOW_BYTES's least: the demo model's checkpoint streams in several pieces


def without_generation(data):
    """data with what every serialize makes anew blanked: the head's checksum (bytes 24-31) and its generation."""
    at = data.index(b'"generation":"') + len(b'"generation":"')
    return data[:24] + bytes(8) + data[32:at] + bytes(16) + data[at + 16:]


class Pieces:
    """A writer keeping each piece it is given."""
    def __init__(self):
        self.pieces = []

    def write(self, data):
        self.pieces.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("world_size", [1, 2])
def test_serialize_to_streams_serialize_bytes(world_size, monkeypatch):
    monkeypatch.setenv("SHARDOPT_CHECKPOINT_WINDOW_BYTES", str(WINDOW))

    def rank(backend):
        with make(so.FSDPOptimizer, backend) as opt:
            train(opt, backend.rank, 0, 2)
            data, sink, buffer = opt.serialize(), Pieces(), io.BytesIO()
            opt.serialize_to(sink)
            opt.serialize_to(buffer)
            return data, sink.pieces, buffer.getvalue()
    results = launch_in_memory(world_size, rank)
    for data, pieces, buffered in results:
        streamed = b"".join(pieces)
        assert len(pieces) > 2 and max(map(len, pieces)) <= WINDOW  # a window at most per call
        assert streamed == b"".join(results[0][1])  # the same bytes on every rank
        assert without_generation(streamed) == without_generation(data)
        assert without_generation(buffered) == without_generation(data)


@pytest.mark.parametrize("world_size", [1, 2])
def test_serialize_to_file_then_deserialize_resumes(tmp_path, world_size):
    def rank(backend):
        path = tmp_path / f"rank{backend.rank}.ckpt"
        with make(so.ZeRO2Optimizer, backend) as opt:
            train(opt, backend.rank, 0, 3)
            with open(path, "wb") as f:
                opt.serialize_to(f)
            train(opt, backend.rank, 3, 2)
            straight = opt.get_parameters().copy()
        with make(so.ZeRO2Optimizer, backend) as fresh:
            fresh.deserialize(path.read_bytes())
            assert fresh.step_count == 3
            train(fresh, backend.rank, 3, 2)
            return straight, fresh.get_parameters().copy()
    for straight, resumed in launch_in_memory(world_size, rank):
        assert straight.tobytes() == resumed.tobytes()


def test_serialize_to_one_rank_and_a_socket():
    """None on rank 1: rank 0 alone gets the bytes, here through a socket's makefile('wb')."""
    def rank(backend):
        with make(so.DDPOptimizer, backend) as opt:
            train(opt, backend.rank, 0, 2)
            data = opt.serialize()
            if backend.rank == 1:
                opt.serialize_to(None)
                return data, None
            ours, theirs = socket.socketpair()
            received = []
            reader = threading.Thread(target=lambda: received.append(theirs.makefile("rb").read()))
            reader.start()
            with ours, theirs:
                with ours.makefile("wb") as out:
                    opt.serialize_to(out)
                ours.shutdown(socket.SHUT_WR)
                reader.join()
            return data, received[0]
    (data, streamed), (_, nothing) = launch_in_memory(2, rank)
    assert nothing is None and without_generation(streamed) == without_generation(data)


def test_serialize_to_writer_exception_fails_every_rank(monkeypatch):
    """Rank 0's writer raises on its second piece: it gets its own exception back, no more calls after it; rank 1
    FileIOError naming it; both go on (the next serialize_to works)."""
    monkeypatch.setenv("SHARDOPT_CHECKPOINT_WINDOW_BYTES", str(WINDOW))

    class Failing(Pieces):
        def write(self, data):
            if self.pieces:
                raise ValueError("disk full")
            return super().write(data)

    def rank(backend):
        with make(so.DDPOptimizer, backend) as opt:
            train(opt, backend.rank, 0, 2)
            sink = Failing() if backend.rank == 0 else Pieces()
            with pytest.raises(ValueError if backend.rank == 0 else so.FileIOError) as raised:
                opt.serialize_to(sink)
            if backend.rank == 0:
                assert str(raised.value) == "disk full" and len(sink.pieces) == 1
            else:
                assert isinstance(raised.value, OSError) and raised.value.status_name == "SHARDOPT_ERR_IO"
                assert "writer returned 1 on rank 0: ValueError: disk full" in str(raised.value)
            with pytest.raises(OSError, match="took 1 of"):  # a short write is refused, never bytes lost
                opt.serialize_to(type("Short", (), {"write": lambda self, data: 1})())
            buffer = io.BytesIO()
            opt.serialize_to(buffer)
            return without_generation(buffer.getvalue()) == without_generation(opt.serialize())
    assert launch_in_memory(2, rank) == [True, True]


def test_offline_tool_from_python(tmp_path):
    """shardopt.ckpt (the tool shardopt-ckpt): a sharded checkpoint converted to consolidated and to
    3 ranks has the same digests and loads to the same parameters; `python -m shardopt.ckpt` runs."""
    import subprocess
    import sys
    from shardopt import ckpt
    if not os.environ.get("SHARDOPT_CKPT"):
        pytest.skip("SHARDOPT_CKPT (the tool's path) not set")
    src, cons, s3 = tmp_path / "src", tmp_path / "cons", tmp_path / "s3"

    def save(backend):
        with make(so.ZeRO2Optimizer, backend) as opt:
            train(opt, backend.rank, 0, 3)
            opt.save_model(str(src))
            return opt.get_parameters().copy()
    expected = launch_in_memory(4, save)[0]
    ckpt.convert(src, cons)
    ckpt.convert(src, s3, consolidated=False, world_size=3)
    info = ckpt.verify(src)
    assert info["form"] == "sharded" and info["world_size"] == 4 and info["step_count"] == 3
    assert ckpt.verify(cons)["digests"] == info["digests"] == ckpt.verify(s3)["digests"]
    assert ckpt.inspect(s3)["world_size"] == 3

    def load(backend):
        with so.FSDPOptimizer(so.AdamOptimizer(learning_rate=3e-3), so.ShardingConfiguration(backend),
                              layout=MODEL.layout()) as fresh:
            fresh.load_model(str(s3))
            return fresh.get_parameters().copy()
    for loaded in launch_in_memory(3, load):
        assert loaded.tobytes() == expected.tobytes()
    ckpt.export(cons, tmp_path / "p.safetensors", state=tmp_path / "s.safetensors")
    assert (tmp_path / "s.safetensors").stat().st_size > (tmp_path / "p.safetensors").stat().st_size
    with pytest.raises(ckpt.CheckpointToolError) as refused:
        ckpt.verify(tmp_path / "none")
    assert refused.value.status == 1
    run = subprocess.run([sys.executable, "-m", "shardopt.ckpt", "verify", str(cons)], stdout=subprocess.PIPE,
                         universal_newlines=True)
    assert run.returncode == 0 and ": ok (consolidated, step 3" in run.stdout
