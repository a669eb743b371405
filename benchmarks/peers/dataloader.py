#!/usr/bin/env python3
"""PyTorch DataLoader peer for psiflow's benchmark harness.

Loads an image folder the way a typical training script does:
ImageFolder + Resize(256) + CenterCrop(224) + PILToTensor, batched by a
DataLoader with worker processes, and reports progress in the harness's
JSON-lines protocol on standard output (package internal/harness/protocol):

    {"event":"start","files":2000,"epochs":1,"t":0.9}
    {"event":"batch","n":64,"keys":["class0/img1.jpg",...],"t":1.234}    after each batch reaches this loop
    {"event":"epoch","epoch":1,"t":9.7}
    {"event":"done","samples":2000,"t":9.8}

(the keys, the samples' paths under --data, let the harness check that every sample
arrives exactly once).

t is seconds since this process started (before torch is imported).
ImageFolder needs class subdirectories: DATA/<class>/<image>.jpg.

Run with Debian's python3-torch and python3-torchvision:
    /usr/bin/python3 benchmarks/peers/dataloader.py --data DIR
"""

import time

T0 = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


def emit(event, **fields):
    fields["event"] = event
    fields["t"] = round(time.monotonic() - T0, 6)
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="image folder root with class subdirectories")
    p.add_argument("--workers", type=int, default=2, help="DataLoader num_workers (default 2)")
    p.add_argument("--prefetch", type=int, default=2, help="DataLoader prefetch_factor per worker (default 2; ignored with 0 workers)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the folder (default 1)")
    p.add_argument("--limit", type=int, default=0, help="stop after this many samples (0: all)")
    p.add_argument("--shuffle", action="store_true", help="shuffle (default: folder order)")
    p.add_argument("--size", type=int, default=256, help="Resize: shorter side (default 256)")
    p.add_argument("--crop", type=int, default=224, help="CenterCrop size (default 224)")
    a = p.parse_args()

    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
        from torchvision import datasets, transforms
    except ImportError as e:
        emit("done", error="import: %s (install python3-torch and python3-torchvision)" % e)
        return 1

    try:
        tf = transforms.Compose([
            transforms.Resize(a.size),
            transforms.CenterCrop(a.crop),
            transforms.PILToTensor(),
        ])
        ds = datasets.ImageFolder(a.data, transform=tf)
        root = os.path.abspath(a.data)

        class Keyed(Dataset):
            """ImageFolder with each sample's index, for its key."""

            def __len__(self):
                return len(ds)

            def __getitem__(self, i):
                x, y = ds[i]
                return x, y, i

        kw = {}
        if a.workers > 0:
            kw["prefetch_factor"] = a.prefetch
        dl = DataLoader(Keyed(), batch_size=a.batch, shuffle=a.shuffle, num_workers=a.workers, **kw)
        emit("start", files=len(ds), epochs=a.epochs, workers=a.workers, prefetch=a.prefetch, batch=a.batch,
             torch=torch.__version__)
        samples = 0
        for epoch in range(a.epochs):
            t0, before = time.monotonic(), samples
            for x, y, idx in dl:
                n = int(y.shape[0])
                samples += n
                emit("batch", n=n, keys=[os.path.relpath(ds.samples[int(i)][0], root) for i in idx])
                if a.limit and samples >= a.limit:
                    break
            if not (a.limit and samples >= a.limit):  # a cut epoch is not a whole one
                emit("epoch", epoch=epoch + 1)
            # The same per-epoch line as psiflow-imagefolder's, on standard error.
            print("dataloader: epoch %d: %.0f samples/s" % (epoch + 1, (samples - before) / max(time.monotonic() - t0, 1e-9)),
                  file=sys.stderr, flush=True)
            if a.limit and samples >= a.limit:
                break
        emit("done", samples=samples)
    except Exception as e:  # reported to the harness, then re-raised for the traceback
        emit("done", error="%s: %s" % (type(e).__name__, e))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
