#!/usr/bin/env python3
"""A training-style loop for `make bench-torch`, fed by psiflow.DataLoader or by
torch's DataLoader with the same transforms, speaking the JSON-lines protocol of
psiflow's benchmark harness (internal/harness/protocol) on standard output:

    {"event":"start","files":2000,"epochs":1,"t":1.1}
    {"event":"batch","n":64,"t":1.9}
    {"event":"done","samples":2000,"t":12.3}

--loader psiflow      psiflow.DataLoader(DATA, batch_size, shuffle=True, transform=...)
--loader dataloader   DataLoader(ImageFolder(DATA, transform), batch_size, shuffle=True,
                      num_workers=2, prefetch_factor=2), torchvision's transforms:
                      val   Resize(256), CenterCrop(224), PILToTensor()       (uint8)
                      train RandomResizedCrop(224), RandomHorizontalFlip(),
                            ToTensor(), Normalize(ImageNet)                   (float32)
--loader none         imports torch and touches the model, nothing else: what
                      `import torch` alone costs the cgroup (its peak is taken off
                      the others' in docs/BENCHMARKS.md)
--loader prewarm      imports torch, torchvision and psiflow, touches the model and
                      reads each --read file, printing nothing: the harness's
                      -prewarm command, run before every run outside its cgroup, so
                      that the libraries are cached (and charged to the harness) the
                      same way for every loader, whatever the host evicted between runs

Each batch gets the user's conversion (uint8 to float in [0, 1], for val) and a
step of a small model (forward, backward, SGD) unless --model none. t is seconds
since this process started, before torch is imported.

    /usr/bin/python3 python/bench/loop.py --loader psiflow --data DIR --transform train
"""

import time

T0 = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def emit(event, **fields):
    fields["event"] = event
    fields["t"] = round(time.monotonic() - T0, 6)
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def dataloader(a):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms as T

    if a.transform == "val":
        tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    else:
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(a.data, transform=tf)
    g = torch.Generator()
    g.manual_seed(0)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, prefetch_factor=a.prefetch,
                    generator=g)
    return dl, len(ds)


def psiflow_loader(a):
    import psiflow

    dl = psiflow.DataLoader(a.data, batch_size=a.batch, shuffle=True, seed=0, transform=a.transform,
                            psiflow_bin=a.psiflow, serve_args=a.serve_arg,
                            **({"prefetch": a.slots} if a.slots else {}))
    return dl, None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=["psiflow", "dataloader", "none", "prewarm"], required=True)
    p.add_argument("--data", required=True, help="an ImageFolder: DATA/<class>/<image>")
    p.add_argument("--transform", choices=["val", "train"], default="val")
    p.add_argument("--model", choices=["small", "none"], default="small",
                   help="small: a conv + linear model's training step per batch; none: the loop only")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--workers", type=int, default=2, help="DataLoader num_workers (default 2)")
    p.add_argument("--prefetch", type=int, default=2, help="DataLoader prefetch_factor (default 2)")
    p.add_argument("--psiflow", default=None, help="the psiflow program (default: the package's, $PSIFLOW_BIN)")
    p.add_argument("--slots", type=int, default=0, help="psiflow.DataLoader prefetch (ring slots; default: the loader's)")
    p.add_argument("--serve-arg", action="append", default=[], help="extra `psiflow serve` flag")
    p.add_argument("--read", action="append", default=[], help="with --loader prewarm: a file to read through")
    a = p.parse_args()
    try:
        import torch
    except ImportError as e:
        emit("done", error="import: %s (install python3-torch)" % e)
        return 1
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 5, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if a.loader == "prewarm":
        import numpy  # noqa: F401
        import psiflow  # noqa: F401
        import torchvision  # noqa: F401
        model(torch.zeros(1, 3, 224, 224)).sum().backward()
        for path in a.read:
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
        return 0
    if a.loader == "none":
        emit("start", files=0, epochs=0)
        model(torch.zeros(1, 3, 224, 224)).sum().backward()
        emit("done", samples=0)
        return 0
    try:
        dl, files = dataloader(a) if a.loader == "dataloader" else psiflow_loader(a)
        emit("start", files=files or 0, epochs=a.epochs, loader=a.loader, transform=a.transform,
             batch=a.batch, model=a.model, torch=torch.__version__)
        samples = 0
        for epoch in range(a.epochs):
            if hasattr(dl, "set_epoch"):
                dl.set_epoch(epoch)
            for x, y in dl:
                if a.model == "small":
                    if x.dtype == torch.uint8:
                        x = x.float().div_(255)  # the user's conversion
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                samples += int(y.shape[0])
                emit("batch", n=int(y.shape[0]))
            emit("epoch", epoch=epoch + 1)
        emit("done", samples=samples)
    except Exception as e:  # reported to the harness, then re-raised for the traceback
        emit("done", error="%s: %s" % (type(e).__name__, e))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
