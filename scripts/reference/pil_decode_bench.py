#!/usr/bin/python3
"""Per-core JPEG decode rate of Pillow, for psiflow's decode benchmark.

Usage: pil_decode_bench.py SECONDS FILE...

Reads every FILE into memory once, then decodes them round-robin from memory
(Image.open(BytesIO).convert("RGB"), as torchvision's ImageFolder loader does)
for about SECONDS seconds on one thread and prints one line:
"images N seconds S rate R" (R in images per second).
"""
import io
import sys
import time

from PIL import Image


def main():
    seconds = float(sys.argv[1])
    blobs = []
    for path in sys.argv[2:]:
        with open(path, "rb") as f:
            blobs.append(f.read())
    # warm up: one pass
    for b in blobs:
        Image.open(io.BytesIO(b)).convert("RGB")
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for b in blobs:
            Image.open(io.BytesIO(b)).convert("RGB")
            n += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    el = now - start
    print("images %d seconds %.6f rate %.3f" % (n, el, n / el))


if __name__ == "__main__":
    main()
