package org.shardopt.tests;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.shardopt.*;
import org.shardopt.samples.MlpDemo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Checkpoints on 4 in-process ranks: serialize/deserialize resumes bit for bit, saveModel/loadModel reshards
 *  across strategies, and IO/corrupt failures throw IOException and change nothing; serialize(OutputStream) streams
 *  serialize()'s bytes (1 and 2 ranks), and a stream's exception fails every rank. */
class CheckpointTest {
    static final MlpDemo MODEL = new MlpDemo();
    static final int BATCH = 128;

    interface IoBody<T> { T apply(CommunicationBackend b) throws IOException; }

    static <T> List<T> ranks(IoBody<T> body) { return ranks(4, body); }

    static <T> List<T> ranks(int worldSize, IoBody<T> body) {
        return Ranks.run(worldSize, b -> {
            try { return body.apply(b); } catch (IOException e) { throw new UncheckedIOException(e); }
        });
    }

    static ShardedOptimizer make(String strategy, CommunicationBackend b, boolean initial) {
        AdamOptimizerOptions o = new AdamOptimizerOptions();
        o.setLearningRate(3e-3);
        ShardingConfiguration cfg = new ShardingConfiguration(b);
        AdamOptimizer adam = new AdamOptimizer(o);
        ShardedOptimizer opt = strategy.equals("ddp") ? new DDPOptimizer(adam, cfg)
            : strategy.equals("zero2") ? new ZeRO2Optimizer(adam, cfg) : new FSDPOptimizer(adam, cfg);
        return opt.initialize(MODEL.layout(), initial ? MODEL.initialParameters() : null);
    }

    /** Steps [first, first + count) with the step protocol: each rank's slice of a fixed batch. */
    static void train(ShardedOptimizer opt, int rank, int first, int count) {
        int per = BATCH / opt.getWorldSize();
        float[] grad = new float[(int) MODEL.layout().getElementCount()];
        for (int step = first; step < first + count; ++step) {
            int b0 = step * BATCH % MODEL.samples;
            long[] samples = new long[per];
            for (int i = 0; i < per; ++i) samples[i] = b0 + rank * per + i;
            Arrays.fill(grad, 0f);
            MODEL.evaluate(opt.getParametersFloat(), grad, samples);
            opt.zeroGrad();
            int off = 0, tensors = opt.getTensorCount();
            for (int t = 0; t < tensors; ++t) {
                NativeView g = opt.getTensorGradient(t);
                g.copyFrom(Arrays.copyOfRange(grad, off, off + g.size()));
                off += g.size();
                int bucket = opt.getTensorBucket(t);
                if (t + 1 == tensors || opt.getTensorBucket(t + 1) != bucket) opt.gradReady(bucket);
            }
            assertTrue(opt.step().applied);
        }
    }

    @Test
    void serializeDeserializeResumesBitwise() {
        for (String strategy : new String[] {"ddp", "zero2", "fsdp"}) {
            List<Object[]> res = ranks(b -> {
                try (ShardedOptimizer opt = make(strategy, b, true)) {
                    train(opt, b.getRank(), 0, 3);
                    byte[] data = opt.serialize();
                    assertTrue(data.length > 0);
                    train(opt, b.getRank(), 3, 3);
                    float[] straight = opt.getParametersFloat();
                    opt.deserialize(data);
                    assertEquals(3, opt.getStepCount());
                    train(opt, b.getRank(), 3, 3);
                    return new Object[] {data, straight, opt.getParametersFloat()};
                }
            });
            for (Object[] r : res) {
                assertArrayEquals((byte[]) res.get(0)[0], (byte[]) r[0], strategy + ": same bytes on every rank");
                assertArrayEquals((float[]) r[1], (float[]) r[2], strategy + ": resumed == straight");
                assertArrayEquals((float[]) res.get(0)[1], (float[]) r[1], strategy);
            }
        }
    }

    @Test
    void saveZero2LoadFsdp(@TempDir Path dir) {
        for (boolean consolidated : new boolean[] {false, true}) {
            String path = dir.resolve(consolidated ? "consolidated" : "sharded").toString();
            List<float[][]> res = ranks(b -> {
                float[] expected;
                try (ShardedOptimizer saved = make("zero2", b, true)) {
                    train(saved, b.getRank(), 0, 4);
                    if (consolidated) saved.saveModel(path, true); else saved.saveModel(path);
                    expected = saved.getParametersFloat();
                }
                try (ShardedOptimizer fresh = make("fsdp", b, false)) {
                    assertFalse(Arrays.equals(expected, fresh.getParametersFloat()));
                    fresh.loadModel(path);
                    assertEquals(4, fresh.getStepCount());
                    return new float[][] {expected, fresh.getParametersFloat()};
                }
            });
            for (float[][] r : res) assertArrayEquals(r[0], r[1], consolidated ? "consolidated" : "sharded");
            assertTrue(Files.isDirectory(Path.of(path)));
        }
    }

    @Test
    void ioAndCorruptErrorsAreIOExceptions(@TempDir Path dir) {
        String missing = dir.resolve("never-written").toString();
        ranks(b -> {
            try (ShardedOptimizer opt = make("zero2", b, true)) {
                train(opt, b.getRank(), 0, 2);
                byte[] data = opt.serialize();
                float[] before = opt.getParametersFloat();
                IOException io = assertThrows(IOException.class, () -> opt.loadModel(missing));
                assertTrue(io.getMessage().startsWith("SHARDOPT_ERR_IO: ") && io.getMessage().contains("never-written"),
                           io.getMessage());
                byte[] bad = data.clone();
                bad[0] ^= (byte) 0xff; // wrong magic
                IOException c = assertThrows(IOException.class, () -> opt.deserialize(bad));
                assertTrue(c.getMessage().startsWith("SHARDOPT_ERR_CORRUPT: ") && c.getMessage().contains("magic"),
                           c.getMessage());
                byte[] truncated = Arrays.copyOf(data, data.length / 2);
                assertTrue(assertThrows(IOException.class, () -> opt.deserialize(truncated)).getMessage()
                               .startsWith("SHARDOPT_ERR_CORRUPT"));
                byte[] flipped = data.clone();
                flipped[data.length / 2] ^= 1; // checksum
                assertTrue(assertThrows(IOException.class, () -> opt.deserialize(flipped)).getMessage()
                               .startsWith("SHARDOPT_ERR_CORRUPT"));
                assertThrows(IOException.class, () -> opt.deserialize(new byte[0]));
                assertThrows(NullPointerException.class, () -> opt.deserialize(null));
                assertThrows(NullPointerException.class, () -> opt.loadModel(null));
                assertArrayEquals(before, opt.getParametersFloat(), "failed loads change nothing");
                assertEquals(2, opt.getStepCount());
                return null;
            }
        });
        assertFalse(Files.exists(Path.of(missing)));
    }

    @Test
    void layoutMismatchIsIllegalArgument() {
        ranks(b -> {
            byte[] data;
            try (ShardedOptimizer opt = make("ddp", b, true)) { data = opt.serialize(); }
            try (DDPOptimizer other = new DDPOptimizer(new AdamOptimizer(), new ShardingConfiguration(b),
                                                       new ParameterLayout().add("w", 4), null)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> other.deserialize(data));
                assertTrue(e.getMessage().startsWith("SHARDOPT_ERR_INVALID_ARGUMENT"), e.getMessage());
            }
            return null;
        });
    }

    /** d with what every serialize makes anew blanked: the head's checksum (bytes 24-31) and its generation. */
    static byte[] withoutGeneration(byte[] d) {
        byte[] c = d.clone();
        Arrays.fill(c, 24, 32, (byte) 0);
        int at = new String(c, StandardCharsets.ISO_8859_1).indexOf("\"generation\":\"") + 14;
        assertTrue(at >= 14, "a generation in the head");
        Arrays.fill(c, at, at + 16, (byte) 0);
        return c;
    }

    /** A stream counting its writes; throws `failure` on the second when given one. */
    static final class Counting extends ByteArrayOutputStream {
        int writes;
        final Exception failure;
        Counting(Exception failure) { this.failure = failure; }
        @Override public void write(byte[] b, int off, int len) {
            if (++writes == 2 && failure instanceof RuntimeException) throw (RuntimeException) failure;
            if (writes == 2 && failure instanceof IOException) sneaky(failure);
            super.write(b, off, len);
        }
        @SuppressWarnings("unchecked") static <E extends Throwable> void sneaky(Throwable t) throws E { throw (E) t; }
    }

    @Test
    void serializeToStreamsSerializeBytes() {
        for (int ws : new int[] {1, 2}) {
            List<Object[]> res = ranks(ws, b -> {
                try (ShardedOptimizer opt = make("fsdp", b, true)) {
                    train(opt, b.getRank(), 0, 2);
                    byte[] data = opt.serialize();
                    Counting out = new Counting(null);
                    opt.serialize(out);
                    assertTrue(out.writes >= 2, "the head, then the data");
                    return new Object[] {data, out.toByteArray()};
                }
            });
            for (Object[] r : res) {
                assertArrayEquals((byte[]) res.get(0)[1], (byte[]) r[1], ws + " ranks: the same bytes on every rank");
                assertArrayEquals(withoutGeneration((byte[]) r[0]), withoutGeneration((byte[]) r[1]), ws + " ranks");
            }
        }
    }

    @Test
    void serializeToFileThenDeserializeResumes(@TempDir Path dir) {
        for (int ws : new int[] {1, 2}) {
            List<float[][]> res = ranks(ws, b -> {
                Path file = dir.resolve(ws + "-" + b.getRank() + ".ckpt");
                float[] straight;
                try (ShardedOptimizer opt = make("zero2", b, true)) {
                    train(opt, b.getRank(), 0, 3);
                    try (OutputStream out = new FileOutputStream(file.toFile())) { opt.serialize(out); }
                    train(opt, b.getRank(), 3, 2);
                    straight = opt.getParametersFloat();
                }
                try (ShardedOptimizer fresh = make("zero2", b, true)) {
                    fresh.deserialize(Files.readAllBytes(file));
                    assertEquals(3, fresh.getStepCount());
                    train(fresh, b.getRank(), 3, 2);
                    return new float[][] {straight, fresh.getParametersFloat()};
                }
            });
            for (float[][] r : res) assertArrayEquals(r[0], r[1], ws + " ranks: resumed == straight");
        }
    }

    @Test
    void serializeToStreamExceptionFailsEveryRank() {
        ranks(2, b -> {
            try (ShardedOptimizer opt = make("ddp", b, true)) {
                train(opt, b.getRank(), 0, 2);
                // rank 0's stream throws on its second write: it gets that exception back, rank 1 an IOException naming it
                for (Exception failure : new Exception[] {new IOException("disk full"), new IllegalStateException("closed")}) {
                    Counting out = new Counting(b.getRank() == 0 ? failure : null);
                    Exception e = assertThrows(Exception.class, () -> opt.serialize(out));
                    if (b.getRank() == 0) {
                        assertSame(failure, e);
                        assertEquals(2, out.writes, "no write after the failure");
                    } else {
                        assertTrue(e instanceof IOException && e.getMessage().startsWith("SHARDOPT_ERR_IO: ") &&
                                   e.getMessage().contains("writer returned 1 on rank 0: " + failure), e.getMessage());
                    }
                }
                // null on rank 1: rank 0 alone gets the bytes; both go on
                Counting out = new Counting(null);
                opt.serialize(b.getRank() == 0 ? out : null);
                byte[] again = opt.serialize();
                if (b.getRank() == 0) assertArrayEquals(withoutGeneration(again), withoutGeneration(out.toByteArray()));
                return null;
            }
        });
    }
}
