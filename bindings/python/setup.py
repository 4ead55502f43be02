"""Builds the shardopt wheel: runs CMake on the repository (or reuses $SHARDOPT_BUILD_DIR) for the
SWIG module and libshardopt.so, and packs them beside the Python layer.

    pip install ./bindings/python                      # configures and builds build-python/
    SHARDOPT_BUILD_DIR=build pip install ./bindings/python --no-build-isolation   # reuse a build
"""
import glob
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class CMakeBuildPy(build_py):
    def run(self):
        build = os.environ.get("SHARDOPT_BUILD_DIR") or os.path.join(ROOT, "build-python")
        build = os.path.abspath(os.path.join(ROOT, build))
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DSHARDOPT_BUILD_TESTS=OFF", "-DSHARDOPT_BUILD_SAMPLES=OFF",
                                   "-DSHARDOPT_BUILD_BENCH=OFF"])
        subprocess.check_call(["cmake", "--build", build, "--target", "shardopt_python",
                               "-j", os.environ.get("JOBS", "1")])
        super().run()
        built = os.path.join(build, "bindings", "python", "shardopt")
        dest = os.path.join(self.build_lib, "shardopt")
        os.makedirs(dest, exist_ok=True)
        for f in glob.glob(os.path.join(built, "*")):
            name = os.path.basename(f)
            if re.search(r"\.so\.\d+\.\d+\.\d+$", name):
                continue  # the soname link (libshardopt.so.2) is what the module loads
            if name.endswith(".py") or name.endswith(".so") or ".so." in name:
                shutil.copy2(os.path.realpath(f), os.path.join(dest, name))  # symlinks as files


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it carries native libraries


setup(packages=["shardopt"], package_dir={"shardopt": "shardopt"}, cmdclass={"build_py": CMakeBuildPy},
      distclass=BinaryDistribution)
