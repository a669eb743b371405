#!/usr/bin/python3
"""Generate an ImageNet-like JPEG folder for psiflow's decode benchmarks.

Usage: make_jpegs.py OUTDIR COUNT [CLASSES]

Writes COUNT 500x375 (every fifth 375x500) RGB JPEGs, quality 85, 4:2:0,
encoded by Pillow (libjpeg-turbo), into OUTDIR/class_XX/ (ImageFolder layout).
Content is smooth colour fields, shapes and per-pixel noise, tuned so that the
files average about 110 KiB like ImageNet validation images. Deterministic:
the same arguments give the same files.
"""
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter


def make(i):
    rnd = random.Random(i)
    w, h = (375, 500) if i % 5 == 4 else (500, 375)
    # low-frequency colour field
    small = Image.new("RGB", (8, 6))
    small.putdata([tuple(rnd.randrange(256) for _ in range(3)) for _ in range(48)])
    img = small.resize((w, h), Image.BICUBIC)
    d = ImageDraw.Draw(img)
    for _ in range(12):
        x, y = rnd.randrange(w), rnd.randrange(h)
        r = rnd.randrange(10, 120)
        col = tuple(rnd.randrange(256) for _ in range(3))
        if rnd.random() < 0.5:
            d.ellipse((x - r, y - r, x + r, y + r), fill=col)
        else:
            d.rectangle((x - r, y - r // 2, x + r, y + r // 2), fill=col)
    img = img.filter(ImageFilter.GaussianBlur(1.2))
    # texture: noise like film grain / foliage
    noise = Image.frombytes("RGB", (w, h), rnd.randbytes(w * h * 3))
    img = Image.blend(img, noise, 0.48 + 0.08 * rnd.random())
    return img


def main():
    out, count = sys.argv[1], int(sys.argv[2])
    classes = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    total = 0
    for i in range(count):
        d = os.path.join(out, "class_%02d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "img_%06d.jpg" % i)
        make(i).save(p, quality=85)
        total += os.path.getsize(p)
    print("files %d mean_bytes %d" % (count, total // max(count, 1)))


if __name__ == "__main__":
    main()
