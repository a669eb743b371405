#!/usr/bin/python3
"""Per-core JPEG decode rate of Pillow, for psiflow's decode benchmark.

Usage: pil_decode_bench.py SECONDS [--load | --transform | --train] FILE...

With --load the image is only decoded (Image.open(BytesIO).load(), no
conversion: the pure libjpeg-turbo cost plus Pillow's overhead). With
--transform each image is also resized (shorter side 256, BILINEAR, the
longer side int(256 * long / short), as torchvision's Resize(256)) and
center-cropped to 224x224 (torchvision's CenterCrop rounding). With --train
torchvision's own RandomResizedCrop(224) and RandomHorizontalFlip() run on
the PIL image (the ImageNet training transform; needs python3-torchvision).

Reads every FILE into memory once, then decodes them round-robin from memory
(Image.open(BytesIO).convert("RGB"), as torchvision's ImageFolder loader does)
for about SECONDS seconds on one thread and prints one line:
"images N seconds S cpu C" (wall and process CPU seconds).
"""
import io
import sys
import time

from PIL import Image


TRAIN = None


def work(b, transform):
    if transform == "train":
        img = TRAIN(Image.open(io.BytesIO(b)).convert("RGB"))
        img.load()
        return img
    if transform == "load":
        img = Image.open(io.BytesIO(b))
        img.load()
        return img
    img = Image.open(io.BytesIO(b)).convert("RGB")
    if transform:
        w, h = img.size
        size = (256, int(256 * h / w)) if w <= h else (int(256 * w / h), 256)
        img = img.resize(size, Image.BILINEAR)
        w, h = img.size
        left, top = int(round((w - 224) / 2.0)), int(round((h - 224) / 2.0))
        img = img.crop((left, top, left + 224, top + 224))
        img.load()
    return img


def main():
    seconds = float(sys.argv[1])
    args = sys.argv[2:]
    transform = None
    if args and args[0] in ("--transform", "--load", "--train"):
        transform = args[0][2:]
        args = args[1:]
    if transform == "train":
        global TRAIN
        import torchvision.transforms as T

        TRAIN = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    blobs = []
    for path in args:
        with open(path, "rb") as f:
            blobs.append(f.read())
    # warm up: one pass
    for b in blobs:
        work(b, transform)
    n = 0
    cpu0 = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for b in blobs:
            work(b, transform)
            n += 1
        now = time.perf_counter()
        if now >= deadline:
            break
    el = now - start
    cpu = time.process_time() - cpu0
    print("images %d seconds %.6f cpu %.6f" % (n, el, cpu))


if __name__ == "__main__":
    main()
