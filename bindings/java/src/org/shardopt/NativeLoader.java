package org.shardopt;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads libshardopt.so.2 and the SWIG JNI module libshardopt_java.so: from the directory named by
 * the system property {@code shardopt.library.path} when set, else from this jar
 * ({@code org/shardopt/native/linux-x86_64/}), extracted to a temporary directory.
 */
final class NativeLoader {
    // libshardopt.so.<SHARDOPT_ABI_VERSION>: the soname the JNI module was linked against
    private static final String[] LIBS = {"libshardopt.so.2", "libshardopt_java.so"};
    private static boolean loaded;

    private NativeLoader() {}

    static synchronized void load() {
        if (loaded) return;
        String dir = System.getProperty("shardopt.library.path");
        try {
            if (dir == null) {
                Path tmp = Files.createTempDirectory("shardopt-native");
                tmp.toFile().deleteOnExit();
                for (String lib : LIBS) {
                    try (InputStream in = NativeLoader.class.getResourceAsStream("native/linux-x86_64/" + lib)) {
                        if (in == null) throw new UnsatisfiedLinkError("shardopt: " + lib + " is not in the jar; "
                                + "set -Dshardopt.library.path=<dir with " + String.join(", ", LIBS) + ">");
                        Path out = tmp.resolve(lib);
                        Files.copy(in, out, StandardCopyOption.REPLACE_EXISTING);
                        out.toFile().deleteOnExit();
                    }
                }
                dir = tmp.toString();
            }
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("shardopt: cannot extract native libraries: " + e);
        }
        for (String lib : LIBS) System.load(new File(dir, lib).getAbsolutePath());
        loaded = true;
    }
}
