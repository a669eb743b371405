"""Per-epoch samples/s of every run in a psiflow bench JSON report.

Reads the "epoch N: R samples/s" lines that psiflow-imagefolder and the
DataLoader peer print on standard error (kept in each run's stderr_tail) and
prints, per loader, the median and range of each epoch's rate over the rounds,
and each epoch's ratio to the loader's own epoch 1 (median of per-round ratios).
Standard library only.
"""
import json
import re
import statistics
import sys
from collections import defaultdict

EPOCH = re.compile(r"epoch (\d+): (\d+(?:\.\d+)?) samples/s(?:, cache hits (\d+)%)?")


def main(path):
    with open(path) as f:
        report = json.load(f)
    rates = defaultdict(lambda: defaultdict(list))   # loader -> epoch -> [rate]
    ratios = defaultdict(lambda: defaultdict(list))  # loader -> epoch -> [rate / epoch 1]
    hits = defaultdict(lambda: defaultdict(list))
    for run in report["runs"]:
        name = run["loader"]
        per = {}
        for m in EPOCH.finditer(run.get("stderr_tail", "")):
            e, r = int(m.group(1)), float(m.group(2))
            per[e] = r
            rates[name][e].append(r)
            if m.group(3) is not None:
                hits[name][e].append(int(m.group(3)))
        for e, r in per.items():
            if per.get(1):
                ratios[name][e].append(r / per[1])
    print("| loader | epoch | samples/s median (range) | × own epoch 1, median (range) | cache hits |")
    print("| --- | --- | --- | --- | --- |")
    for name in rates:
        for e in sorted(rates[name]):
            rs, qs = rates[name][e], ratios[name][e]
            h = hits[name][e]
            print("| %s | %d | %.0f (%.0f–%.0f) | %.2f (%.2f–%.2f) | %s |" % (
                name, e, statistics.median(rs), min(rs), max(rs),
                statistics.median(qs), min(qs), max(qs),
                ("%d%%" % statistics.median(h)) if h else "–"))


if __name__ == "__main__":
    main(sys.argv[1])
