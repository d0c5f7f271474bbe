"""Builds the `_drx` extension with CMake for `pip wheel` (metadata: pyproject.toml).

The C++ core and the module are built by the project's own CMake (Release, no tests, examples
or benchmarks) in build-wheel/, against the interpreter running pip; the module is copied into
the wheel next to the package's Python files.
"""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        root = os.path.dirname(os.path.abspath(__file__))
        build = os.path.join(root, "build-wheel")
        jobs = os.environ.get("DRX_JOBS", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "-S", root, "-B", build, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release", "-DDRX_BUILD_TESTS=OFF",
                        "-DDRX_BUILD_EXAMPLES=OFF", "-DDRX_BUILD_BENCH=OFF", "-DDRX_MPI=OFF",
                        f"-DPython3_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "drx_python"],
                       check=True)
        built = os.path.join(build, "python", "drx")
        module = next(f for f in os.listdir(built) if f.startswith("_drx.") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self.copy_file(os.path.join(built, module), target)
        stub = os.path.join(built, "_drx.pyi")
        if os.path.exists(stub):
            self.copy_file(stub, os.path.join(os.path.dirname(target), "_drx.pyi"))


# setuptools' own build folder goes inside build-wheel/, not in CMake's build/.
setup(ext_modules=[CMakeExtension("drx._drx")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build-wheel/setuptools"},
               "egg_info": {"egg_base": "build-wheel"}})
