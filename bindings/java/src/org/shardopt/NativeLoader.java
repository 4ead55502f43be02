package org.shardopt;

import java.io.File;
import java.io.InputStream;
import java.nio.file.*;

/** Loads libshardopt.so.2 and the JNI module libshardopt_java.so from the directory the system property
 *  shardopt.library.path names, else from this jar (org/shardopt/native/linux-x86_64/), extracted to a temporary directory. */
final class NativeLoader {
    private static final String[] LIBS = {"libshardopt.so.2", "libshardopt_java.so"}; // .2: SHARDOPT_ABI_VERSION
    private static boolean loaded;
    static synchronized void load() {
        if (loaded) return;
        String dir = System.getProperty("shardopt.library.path");
        try {
            if (dir == null) {
                Path tmp = Files.createTempDirectory("shardopt-native");
                tmp.toFile().deleteOnExit();
                for (String lib : LIBS) {
                    try (InputStream in = NativeLoader.class.getResourceAsStream("native/linux-x86_64/" + lib)) {
                        if (in == null) throw new UnsatisfiedLinkError("shardopt: " + lib + " is not in the jar; set -Dshardopt.library.path=<dir>");
                        Files.copy(in, tmp.resolve(lib), StandardCopyOption.REPLACE_EXISTING);
                        tmp.resolve(lib).toFile().deleteOnExit();
                    }
                }
                dir = tmp.toString();
            }
        } catch (java.io.IOException e) {
            throw new UnsatisfiedLinkError("shardopt: cannot extract native libraries: " + e);
        }
        for (String lib : LIBS) System.load(new File(dir, lib).getAbsolutePath());
        loaded = true;
    }
}
