"""Builds psiflow's Python package as a platform wheel that carries the psiflow
binary, as ruff and uv ship theirs: the binary is package data
(psiflow/bin/psiflow) and the wheel is tagged py3-none-<platform>, since the
binary runs on one platform only.

Where the binary comes from, in order:
  1. $PSIFLOW_BUILD_BIN, a psiflow program built elsewhere (copied as it is);
  2. `go build` of ../cmd/psiflow with CGO_ENABLED=0 (a static program that
     loads libjpeg-turbo at run time), when this folder sits in the psiflow
     repository and Go is on PATH.
Anything else is an error that says which of the two to provide: a package
without its binary would only fail later, at the first DataLoader.
"""

import atexit
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building without wheel (sdist only): no platform tag to set
    bdist_wheel = None

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(HERE)


def build_binary(dest):
    src = os.environ.get("PSIFLOW_BUILD_BIN")
    if src:
        if not os.path.isfile(src):
            raise SystemExit("psiflow: PSIFLOW_BUILD_BIN=%s is not a file" % src)
        shutil.copyfile(src, dest)
        return "copied %s" % src
    if not os.path.isfile(os.path.join(REPO, "go.mod")) or not os.path.isdir(os.path.join(REPO, "cmd", "psiflow")):
        raise SystemExit("psiflow: no psiflow binary to package: set PSIFLOW_BUILD_BIN to a built psiflow, "
                         "or build from the psiflow repository (%s has no go.mod)" % REPO)
    go = shutil.which("go")
    if go is None:
        raise SystemExit("psiflow: building the psiflow binary needs Go on PATH "
                         "(or set PSIFLOW_BUILD_BIN to a built psiflow)")
    env = dict(os.environ, CGO_ENABLED="0")
    cmd = [go, "build", "-trimpath", "-ldflags=-s -w", "-o", dest, "./cmd/psiflow"]
    r = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("psiflow: %s failed in %s:\n%s" % (" ".join(cmd), REPO, r.stdout.decode(errors="replace")))
    return "built with go build (CGO_ENABLED=0) from %s" % REPO


class build_py_with_binary(build_py):
    """build_py, then the psiflow binary into the built package."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "psiflow", "bin", "psiflow")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        how = build_binary(dest)
        os.chmod(dest, 0o755)
        self.announce("psiflow binary: %s" % how, level=2)


cmdclass = {"build_py": build_py_with_binary}

if bdist_wheel is not None:
    class platform_wheel(bdist_wheel):
        """A wheel for this platform only, for any Python 3: the package is pure
        Python beside one native program."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _python, _abi, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = platform_wheel

# Build in a fresh temporary folder, not in python/build: a stale build folder
# would carry deleted modules into the next install.
_scratch = tempfile.mkdtemp(prefix="psiflow-build-")
atexit.register(shutil.rmtree, _scratch, True)

setup(cmdclass=cmdclass, options={
    "build": {"build_base": os.path.join(_scratch, "build")},
    "egg_info": {"egg_base": _scratch},
})
