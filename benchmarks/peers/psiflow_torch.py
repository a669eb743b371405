#!/usr/bin/env python3
"""psiflow's PyTorch consumer as a peer for psiflow's benchmark harness.

The same loop as dataloader.py, fed by psiflow.Loader (python/psiflow): it
starts `psiflow serve -data DIR` (read → decode → Resize(256) → CenterCrop(224)
→ batch 64 in Go) and receives each batch as a view of shared memory. Reports
the harness's JSON-lines protocol on standard output (package
internal/harness/protocol):

    {"event":"batch","n":64,"t":1.234}    after each batch reaches this loop
    {"event":"done","samples":2000,"t":9.8}

t is seconds since this process started (before numpy is imported). The Go
process is this one's child, so a harness cgroup measures both together.

    /usr/bin/python3 benchmarks/peers/psiflow_torch.py --data DIR --psiflow bin/psiflow [--torch]
"""

import time

T0 = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def emit(event, **fields):
    fields["event"] = event
    fields["t"] = round(time.monotonic() - T0, 6)
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="image folder root with class subdirectories")
    p.add_argument("--psiflow", default="bin/psiflow", help="the psiflow program (default bin/psiflow)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    p.add_argument("--slots", type=int, default=2, help="batches outstanding in Python (default 2)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the folder (default 1)")
    p.add_argument("--limit", type=int, default=0, help="stop after this many samples (0: all)")
    p.add_argument("--torch", action="store_true", help="yield torch tensors (imports torch) instead of numpy arrays")
    p.add_argument("--serve-arg", action="append", default=[], help="extra `psiflow serve` flag (repeatable)")
    a = p.parse_args()

    try:
        import psiflow
    except ImportError as e:
        emit("done", error="import: %s (install python3-numpy)" % e)
        return 1
    try:
        args = ["-epochs", str(a.epochs)] + a.serve_arg
        if a.limit:
            args += ["-limit", str(a.limit)]
        with psiflow.Loader(data=a.data, psiflow_bin=a.psiflow, batch_size=a.batch, slots=a.slots,
                            torch=a.torch, args=args) as dl:
            emit("start", slots=a.slots, batch=a.batch, torch=a.torch)
            samples = 0
            for x, y in dl:
                n = int(y.shape[0])
                samples += n
                emit("batch", n=n)
        if dl.returncode != 0:
            raise psiflow.PsiflowError("psiflow serve exited with %d: %s" % (dl.returncode, dl.stderr()))
        emit("done", samples=samples)
    except Exception as e:  # reported to the harness, then re-raised for the traceback
        emit("done", error="%s: %s" % (type(e).__name__, e))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
