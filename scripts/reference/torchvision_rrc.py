#!/usr/bin/python3
"""Reference for psiflow's RandomResizedCrop tests (Debian python3-torchvision).

Usage:
  torchvision_rrc.py boxes < LINES
      Each stdin line "W H N SEED SCALE0 SCALE1 RATIO0 RATIO1": after
      torch.manual_seed(SEED), draws N boxes with torchvision's own
      RandomResizedCrop.get_params for a W×H image and prints one line
      "x y w h" per box (left, top, width, height), then a line "end".
  torchvision_rrc.py crop OUTDIR SIZE < LINES
      Each stdin line "PATH TOP LEFT HEIGHT WIDTH": the image opened as
      ImageFolder does (Image.open(f).convert("RGB")), then
      torchvision.transforms.functional.resized_crop(img, TOP, LEFT,
      HEIGHT, WIDTH, [SIZE, SIZE]) (PIL: crop, then antialiased bilinear
      resize). Writes OUTDIR/i.rgb and prints "i W H" (or "i error MSG").
  torchvision_rrc.py box OUTDIR < LINES
      Each stdin line "PATH W H X0 Y0 X1 Y1": Pillow's
      Image.resize((W, H), BILINEAR, box=(X0, Y0, X1, Y1)) with a
      fractional box, written and reported as for crop.
"""
import os
import sys


def boxes():
    import torch
    from PIL import Image
    import torchvision.transforms as T

    for line in sys.stdin.read().splitlines():
        a = line.split()
        w, h, n, seed = int(a[0]), int(a[1]), int(a[2]), int(a[3])
        scale = [float(a[4]), float(a[5])]
        ratio = [float(a[6]), float(a[7])]
        torch.manual_seed(seed)
        img = Image.new("RGB", (w, h))
        out = []
        for _ in range(n):
            i, j, bh, bw = T.RandomResizedCrop.get_params(img, scale, ratio)
            out.append("%d %d %d %d" % (j, i, bw, bh))
        out.append("end")
        print("\n".join(out))


def crops(args, box):
    from PIL import Image

    outdir = args[0]
    if not box:
        import torchvision.transforms.functional as F

        size = int(args[1])
    for i, line in enumerate(sys.stdin.read().splitlines()):
        f = line.split()
        try:
            with open(f[0], "rb") as fh:
                img = Image.open(fh).convert("RGB")
            if box:
                w, h = int(f[1]), int(f[2])
                img = img.resize((w, h), Image.BILINEAR, box=tuple(float(v) for v in f[3:7]))
            else:
                top, left, bh, bw = (int(v) for v in f[1:5])
                img = F.resized_crop(img, top, left, bh, bw, [size, size])
            with open(os.path.join(outdir, "%d.rgb" % i), "wb") as fh:
                fh.write(img.tobytes())
            print(i, img.width, img.height)
        except Exception as e:  # reported, not raised: the test decides
            print(i, "error", str(e).replace("\n", " "))


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "boxes":
        boxes()
    elif mode in ("crop", "box"):
        crops(args, mode == "box")
    else:
        sys.exit("unknown mode %r" % mode)


if __name__ == "__main__":
    main()
