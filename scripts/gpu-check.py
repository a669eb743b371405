#!/usr/bin/env python3
"""PyTorch references for scripts/gpu-check.sh (a machine with an NVIDIA GPU).

Each subcommand prints one JSON object on standard output:

    h2d --bytes N [N ...]       host-to-device copies of a pinned tensor
                                (torch.empty(n, dtype=torch.uint8, pin_memory=True)
                                .to('cuda', non_blocking=True)), timed with CUDA events
    dataloader --data DIR       the image pipeline psiflow-gpubench runs (ImageFolder,
                                Resize(256), CenterCrop(224), PILToTensor, batch 64),
                                through a DataLoader with pin_memory=True, every batch
                                moved with .to('cuda', non_blocking=True)
    psiflow-pin --data DIR      psiflow's Python DataLoader with pin_memory=True (each batch
                                pinned, moved with non_blocking=True, the first --verify read
                                back and compared), then with device="cuda" (samples/s)

It never fails silently: a missing torch, CUDA or feature gives {"error": "..."}.
"""

import argparse
import json
import os
import sys
import time


def out(**kw):
    print(json.dumps(kw), flush=True)


def need_cuda():
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch %s sees no CUDA device" % torch.__version__)
    return torch


def h2d(a):
    torch = need_cuda()
    res = []
    for n in a.bytes:
        src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        src.random_(0, 255)
        dst = torch.empty(n, dtype=torch.uint8, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            for _ in range(3):
                dst.copy_(src, non_blocking=True)
            s.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(s)
            for _ in range(a.iters):
                dst.copy_(src, non_blocking=True)
            end.record(s)
            end.synchronize()
        ms = start.elapsed_time(end)
        ok = bool(torch.equal(dst.cpu(), src))
        res.append({"bytes": n, "iters": a.iters, "gbps": n * a.iters / (ms / 1e3) / 1e9, "copy_back_equal": ok})
    out(torch=torch.__version__, device=torch.cuda.get_device_name(0), h2d=res)


def dataloader(a):
    torch = need_cuda()
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()])
    ds = datasets.ImageFolder(a.data, transform=tf)
    workers = a.workers if a.workers > 0 else (os.cpu_count() or 1)
    dl = DataLoader(ds, batch_size=a.batch, num_workers=workers, pin_memory=True, prefetch_factor=2)
    samples, t0, warm_t, warm_n = 0, time.monotonic(), None, 0
    for i, (x, y) in enumerate(dl):
        x = x.to("cuda", non_blocking=True)
        samples += int(y.shape[0])
        if i == 2:  # after the warm-up batches, like the harness
            torch.cuda.synchronize()
            warm_t, warm_n = time.monotonic(), samples
    torch.cuda.synchronize()
    t1 = time.monotonic()
    rate = (samples - warm_n) / (t1 - warm_t) if warm_t and t1 > warm_t else samples / (t1 - t0)
    out(samples=samples, wall_s=t1 - t0, samples_per_s=rate, workers=workers, pin_memory=True)


def psiflow_pin(a):
    torch = need_cuda()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    try:
        import psiflow
    except ImportError as e:
        out(error="python/psiflow does not import: %s" % e)
        return
    res = {}
    # pin_memory=True: the batches are views of psiflow's ring, registered with
    # CUDA; each is moved with non_blocking=True and read back before the next
    # one is asked for (the slot goes back only after the copy's event).
    dl = psiflow.DataLoader(a.data, batch_size=a.batch, pin_memory=True, psiflow_bin=a.psiflow)
    samples, batches, pinned, equal, t0 = 0, 0, 0, 0, time.monotonic()
    with dl as loader:
        for x, y in loader:
            batches += 1
            pinned += int(bool(x.is_pinned()))
            xg = x.to("cuda", non_blocking=True)
            if batches <= a.verify:
                torch.cuda.current_stream().synchronize()
                equal += int(bool(torch.equal(xg.cpu(), x)))
            samples += int(y.shape[0])
    torch.cuda.synchronize()
    res["pin"] = {"samples": samples, "batches": batches, "pinned_batches": pinned, "verified": min(batches, a.verify),
                  "equal_batches": equal, "wall_s": time.monotonic() - t0}
    # device="cuda": psiflow.DataLoader moves each batch itself.
    dl = psiflow.DataLoader(a.data, batch_size=a.batch, device="cuda", psiflow_bin=a.psiflow)
    samples, on_device, t0, warm_t, warm_n = 0, 0, time.monotonic(), None, 0
    with dl as loader:
        for i, (x, y) in enumerate(loader):
            on_device += int(x.is_cuda and y.is_cuda)
            samples += int(y.shape[0])
            if i == 2:
                torch.cuda.synchronize()
                warm_t, warm_n = time.monotonic(), samples
    torch.cuda.synchronize()
    t1 = time.monotonic()
    rate = (samples - warm_n) / (t1 - warm_t) if warm_t and t1 > warm_t else samples / (t1 - t0)
    res["device"] = {"samples": samples, "batches_on_device": on_device, "samples_per_s": rate, "wall_s": t1 - t0}
    out(**res)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("h2d")
    h.add_argument("--bytes", type=int, nargs="+", required=True)
    h.add_argument("--iters", type=int, default=50)
    d = sub.add_parser("dataloader")
    d.add_argument("--data", required=True)
    d.add_argument("--batch", type=int, default=64)
    d.add_argument("--workers", type=int, default=0, help="0: one per CPU")
    q = sub.add_parser("psiflow-pin")
    q.add_argument("--data", required=True)
    q.add_argument("--batch", type=int, default=64)
    q.add_argument("--psiflow", required=True, help="the psiflow launcher binary")
    q.add_argument("--verify", type=int, default=8, help="batches read back and compared")
    a = p.parse_args()
    try:
        {"h2d": h2d, "dataloader": dataloader, "psiflow-pin": psiflow_pin}[a.cmd](a)
    except Exception as e:  # one JSON line, always
        out(error="%s: %s" % (type(e).__name__, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
