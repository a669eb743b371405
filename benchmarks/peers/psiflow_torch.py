#!/usr/bin/env python3
"""psiflow's PyTorch consumer as a peer for psiflow's benchmark harness.

The same loop as dataloader.py, fed by psiflow.Loader (python/psiflow): it
starts `psiflow serve -data DIR` (read → decode → Resize(256) → CenterCrop(224)
→ batch 64 in Go) and receives each batch as a view of shared memory. Reports
the harness's JSON-lines protocol on standard output (package
internal/harness/protocol):

    {"event":"start","files":2000,"epochs":1,"t":0.2}
    {"event":"batch","n":64,"keys":["class0/img1.jpg",...],"t":1.234}    after each batch reaches this loop
    {"event":"done","samples":2000,"t":9.8}

(the keys, the samples' paths under --data, let the harness check that every sample
arrives exactly once: `psiflow serve` runs every epoch, and the harness assigns the
samples to epochs by position from the start event's files).

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
        args = ["-epochs", str(a.epochs), "-keys"] + a.serve_arg
        root = os.path.abspath(a.data)
        files = 0
        for _dir, _subdirs, names in os.walk(a.data, followlinks=True):
            files += sum(1 for f in names if f.lower().endswith((".jpg", ".jpeg", ".png")))
        if a.limit:
            args += ["-limit", str(a.limit)]
        with psiflow.Loader(data=a.data, psiflow_bin=a.psiflow, batch_size=a.batch, slots=a.slots,
                            torch=a.torch, args=args) as dl:
            # With --limit an epoch may be cut short: no files, so nothing counts as missing.
            emit("start", files=0 if a.limit else files, epochs=a.epochs, slots=a.slots, batch=a.batch, torch=a.torch)
            samples = 0
            for b in dl:
                n = len(b)
                samples += n
                if b.keys:
                    emit("batch", n=n, keys=[os.path.relpath(os.path.abspath(k), root) for k in b.keys])
                else:
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
