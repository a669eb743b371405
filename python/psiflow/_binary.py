"""Where the psiflow program is: the one place the package looks for it."""

import os
import shutil

# Installed with the package (pip install ./python, or the wheel from `make wheel`).
PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "psiflow")


def packaged():
    """The psiflow program installed with this package, or None."""
    return PACKAGED if os.path.isfile(PACKAGED) and os.access(PACKAGED, os.X_OK) else None


def find(explicit=None):
    """Returns the psiflow program to run and says nothing else: explicit (an
    argument) first, then $PSIFLOW_BIN, then the program installed with this
    package, then ``psiflow`` on PATH. None of them is an error naming each
    place looked at."""
    if explicit:
        return str(explicit)
    env = os.environ.get("PSIFLOW_BIN")
    if env:
        return env
    p = packaged()
    if p is not None:
        return p
    on_path = shutil.which("psiflow")
    if on_path is not None:
        return on_path
    raise FileNotFoundError(
        "no psiflow program: not given (psiflow_bin=), $PSIFLOW_BIN is unset, %s is missing "
        "(install the package with `pip install --no-build-isolation --no-index ./python`, which builds it), "
        "and there is no psiflow on PATH" % PACKAGED)
