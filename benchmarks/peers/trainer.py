#!/usr/bin/env python3
"""A PyTorch training loop as a co-tenant for psiflow's benchmark harness.

The consumer is a real training step (a small model, forward, backward, SGD) on
every batch, and the process holds its own ballast, as a trainer holds its model,
optimizer state and activations: `--ballast BYTES` of a torch tensor, touched
before the first batch. The batches come from one of

    --loader psiflow      psiflow's Python loader (python/psiflow) over `psiflow serve`
    --loader dataloader   torch's DataLoader (ImageFolder + Resize(256) +
                          CenterCrop(224) + PILToTensor, 2 worker processes)

so that the same trainer, with the same ballast, can be run fed by each. `psiflow
bench -cotenant-shape trainer:SHARE` replaces {ballast} in the arguments with SHARE ×
the cgroup's limit. Reports the harness's JSON-lines protocol on standard output
(package internal/harness/protocol):

    {"event":"start","files":1000,"epochs":3,"t":0.9}
    {"event":"ballast","bytes":1073741824,"t":1.4}
    {"event":"batch","n":64,"keys":["class0/img00001.jpg",...],"t":1.234}
    {"event":"epoch","epoch":1,"t":9.8}            (the DataLoader, which knows its epochs)
    {"event":"pause","t":4.1} / {"event":"resume","t":9.0}   (psiflow, when its loader reports them)
    {"event":"done","samples":3000,"t":29.8}

t is seconds since this process started (before torch is imported). The keys let the
harness check that every sample of every epoch arrived exactly once. A loader that
fails (psiflow serve stopping or killed, a DataLoader worker killed) ends the run
with a done event naming the error and exit status 1; a SIGKILL of this process is
the trainer's own OOM kill.

    /usr/bin/python3 benchmarks/peers/trainer.py --loader psiflow --data DIR --ballast 0
"""

import time

T0 = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

EXTENSIONS = (".jpg", ".jpeg", ".png")


def emit(event, **fields):
    fields["event"] = event
    fields["t"] = round(time.monotonic() - T0, 6)
    print(json.dumps(fields, separators=(",", ":")), flush=True)


def count_files(root):
    """The samples of one epoch: image files under root, as both loaders see them."""
    n = 0
    for _dir, _subdirs, files in os.walk(root, followlinks=True):
        n += sum(1 for f in files if f.lower().endswith(EXTENSIONS))
    return n


def relkey(root, path):
    return os.path.relpath(path, root)


class Step:
    """One training step per batch: uint8 images → float, a small model, SGD."""

    def __init__(self, torch):
        nn = torch.nn
        self.torch = torch
        self.model = nn.Sequential(nn.AvgPool2d(8), nn.Flatten(), nn.Linear(3 * 28 * 28, 10))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss = nn.CrossEntropyLoss()

    def __call__(self, x, y):
        x = x.float().div_(255.0)
        self.opt.zero_grad(set_to_none=True)
        out = self.model(x)
        loss = self.loss(out, (y % 10).long())
        loss.backward()
        self.opt.step()
        return float(loss)


def feed_psiflow(a, step, psiflow):
    """Batches from psiflow's Python loader; `psiflow serve` runs every epoch."""
    args = ["-epochs", str(a.epochs), "-keys"] + a.serve_arg
    samples = 0
    root = os.path.abspath(a.data)
    def on_pause(info):
        # the loader's pause line on stderr, and the event the harness counts
        sys.stderr.write("psiflow serve: %s\n" % info.get("message", ""))
        sys.stderr.flush()
        if info.get("kind") == "paused":
            emit("pause")
        elif info.get("kind") == "resumed":
            emit("resume")

    with psiflow.Loader(data=a.data, psiflow_bin=a.psiflow, batch_size=a.batch, slots=a.slots,
                        torch=True, args=args, on_pause=on_pause) as dl:
        for b in dl:
            keys = [relkey(root, os.path.abspath(k)) for k in (b.keys or [])]
            step(b.data, b.labels)
            n = len(b)
            samples += n
            if keys:
                emit("batch", n=n, keys=keys)
            else:
                emit("batch", n=n)
    if dl.returncode != 0:
        raise psiflow.PsiflowError("psiflow serve exited with %d: %s" % (dl.returncode, dl.stderr().strip()[-500:]))
    return samples


def feed_dataloader(a, step, torch):
    """Batches from torch's DataLoader, the way a typical training script builds it."""
    from torch.utils.data import DataLoader, Dataset
    from torchvision import datasets, transforms

    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])
    folder = datasets.ImageFolder(a.data, transform=tf)
    root = os.path.abspath(a.data)

    class Keyed(Dataset):
        def __len__(self):
            return len(folder)

        def __getitem__(self, i):
            x, y = folder[i]
            return x, y, i

    kw = {"prefetch_factor": a.prefetch} if a.workers > 0 else {}
    dl = DataLoader(Keyed(), batch_size=a.batch, shuffle=False, num_workers=a.workers, **kw)
    samples = 0
    for epoch in range(a.epochs):
        for x, y, idx in dl:
            step(x, y)
            keys = [relkey(root, folder.samples[int(i)][0]) for i in idx]
            samples += len(keys)
            emit("batch", n=len(keys), keys=keys)
        emit("epoch", epoch=epoch + 1)
    return samples


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=("psiflow", "dataloader"), required=True, help="what feeds the trainer")
    p.add_argument("--data", required=True, help="image folder root with class subdirectories")
    p.add_argument("--ballast", type=int, default=0, help="bytes the trainer holds (a touched torch tensor); bench's {ballast}")
    p.add_argument("--epochs", type=int, default=1, help="passes over the folder (default 1)")
    p.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads of the training step (default 1)")
    p.add_argument("--psiflow", default="bin/psiflow", help="--loader psiflow: the psiflow program (default bin/psiflow)")
    p.add_argument("--slots", type=int, default=2, help="--loader psiflow: batches outstanding in Python (default 2)")
    p.add_argument("--serve-arg", action="append", default=[], help="--loader psiflow: extra `psiflow serve` flag (repeatable)")
    p.add_argument("--workers", type=int, default=2, help="--loader dataloader: num_workers (default 2)")
    p.add_argument("--prefetch", type=int, default=2, help="--loader dataloader: prefetch_factor (default 2)")
    a = p.parse_args()
    if a.ballast < 0:
        p.error("--ballast must not be negative")

    try:
        import torch
        if a.loader == "psiflow":
            import psiflow
    except ImportError as e:
        emit("done", error="import: %s (install python3-torch, python3-torchvision and python3-numpy)" % e)
        return 1
    torch.set_num_threads(a.threads)
    emit("start", files=count_files(a.data), epochs=a.epochs, loader=a.loader, ballast=a.ballast,
         torch=torch.__version__)
    try:
        ballast = torch.empty(a.ballast, dtype=torch.uint8)
        ballast.fill_(1)  # touched: charged to the cgroup, and without swap it stays
        emit("ballast", bytes=a.ballast)
        step = Step(torch)
        if a.loader == "psiflow":
            samples = feed_psiflow(a, step, psiflow)
        else:
            samples = feed_dataloader(a, step, torch)
        del ballast
        emit("done", samples=samples)
    except Exception as e:  # reported to the harness, then re-raised for the traceback
        emit("done", error="%s: %s" % (type(e).__name__, str(e)[:1000]))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
