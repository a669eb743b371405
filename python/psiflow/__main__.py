"""``python -m psiflow ARGS`` (and the ``psiflow`` command pip installs) runs
the psiflow program installed with this package: ``psiflow doctor``,
``psiflow serve``, ``psiflow run FILE.yaml``."""

import os
import sys

from . import _binary


def main():
    exe = _binary.packaged() or os.environ.get("PSIFLOW_BIN")
    if not exe:
        sys.exit("psiflow: the psiflow program is not installed with this package (%s is missing) "
                 "and $PSIFLOW_BIN is unset" % _binary.PACKAGED)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
