#!/usr/bin/python3
"""Reference for psiflow's decode tests: Pillow decode + torchvision-style
Resize(n) + CenterCrop(c), written out as raw RGB.

Usage: pil_resize_crop.py [--torchvision] OUTDIR RESIZE CROP FILE...

With --torchvision the geometry is done by torchvision.transforms.Resize and
CenterCrop themselves (Debian python3-torchvision) instead of the
re-implementation below, to check that the two agree.

RESIZE 0 skips the resize, CROP 0 skips the crop. For each FILE (index i) it
writes OUTDIR/i.rgb (packed RGB rows) and prints one line "i W H" on stdout;
a file Pillow cannot decode prints "i error MESSAGE".

The geometry follows torchvision's semantics on PIL images without importing
torchvision: Resize(n) = Image.resize((new_w, new_h), BILINEAR) with the
shorter side n and the longer int(n * long / short); CenterCrop(c) cuts at
(round((w - c) / 2), round((h - c) / 2)) with Python's round (half to even).
Images are opened like torchvision's ImageFolder loader: Image.open(f).convert("RGB").
"""
import os
import sys

from PIL import Image


def resized_size(w, h, n):
    if w <= h:
        return n, int(n * h / w)
    return int(n * w / h), n


def main():
    args = sys.argv[1:]
    tv = None
    if args and args[0] == "--torchvision":
        import torchvision.transforms as T
        tv = T
        args = args[1:]
    out, resize, crop = args[0], int(args[1]), int(args[2])
    for i, path in enumerate(args[3:]):
        try:
            with open(path, "rb") as f:
                img = Image.open(f)
                img = img.convert("RGB")
            if tv is not None:
                if resize > 0:
                    img = tv.Resize(resize)(img)
                if crop > 0:
                    img = tv.CenterCrop(crop)(img)
            elif resize > 0:
                img = img.resize(resized_size(img.width, img.height, resize), Image.BILINEAR)
            if tv is None and crop > 0:
                w, h = img.size
                if crop > w or crop > h:
                    raise ValueError("crop larger than image")
                left = int(round((w - crop) / 2.0))
                top = int(round((h - crop) / 2.0))
                img = img.crop((left, top, left + crop, top + crop))
            with open(os.path.join(out, "%d.rgb" % i), "wb") as f:
                f.write(img.tobytes())
            print(i, img.width, img.height)
        except Exception as e:  # reported, not raised: the test decides
            print(i, "error", str(e).replace("\n", " "))


if __name__ == "__main__":
    main()
