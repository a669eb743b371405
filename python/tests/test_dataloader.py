"""Tests of psiflow.DataLoader against a real `psiflow serve` over an image folder.

Run from the repository root (cmd/psiflow TestPythonModule does, with its own
build of the launcher and a folder of two classes of ten images):

    PSIFLOW_BIN=bin/psiflow PSIFLOW_TEST_DATA=DIR /usr/bin/python3 -m unittest discover -s python/tests -t python
"""

import collections
import json
import os
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import psiflow  # noqa: E402
from psiflow.loader import rank_count, transform_flags  # noqa: E402

BIN = os.environ.get("PSIFLOW_BIN", "bin/psiflow")
DATA = os.environ.get("PSIFLOW_TEST_DATA")
SMALL = {"resize": 40, "crop": 32}


def loader(**kw):
    args = dict(batch_size=4, transform=SMALL, return_keys=True, psiflow_bin=BIN, tensors="numpy")
    args.update(kw)
    return psiflow.DataLoader(DATA, **args)


def keys_of(it):
    out = []
    for _x, _y, keys in it:
        out += keys
    return out


def folder_files():
    out = []
    for d, _, files in os.walk(DATA):
        out += [os.path.join(d, f) for f in files]
    return sorted(out)


class TestRankCount(unittest.TestCase):
    def test_distributed_sampler_counts(self):
        for n, w, drop, want in [(20, 3, False, 7), (20, 3, True, 6), (20, 1, False, 20), (5, 2, False, 3),
                                 (5, 2, True, 2), (20, 4, False, 5)]:
            self.assertEqual(rank_count(n, w, drop), want, (n, w, drop))
        self.assertEqual(rank_count(20, 2, False, start=17), 2)
        self.assertEqual(rank_count(20, 2, True, start=17), 1)
        self.assertEqual(rank_count(20, 2, False, start=30), 0)


class TestTransformFlags(unittest.TestCase):
    def test_presets_are_torchvisions(self):
        self.assertEqual(transform_flags("val"), ["-resize", "256", "-crop", "224", "-normalize", "none"])
        self.assertEqual(transform_flags("train"), [
            "-random-resized-crop", "224", "-scale-min", "0.08", "-scale-max", "1.0",
            "-ratio-min", "0.75", "-ratio-max", repr(4.0 / 3), "-flip", "0.5", "-normalize", "imagenet"])
        self.assertEqual(transform_flags({"preset": "train", "normalize": "none", "random_resized_crop": 176})[:2],
                         ["-random-resized-crop", "176"])
        self.assertIn("none", transform_flags({"preset": "train", "normalize": None}))
        for bad, msg in [({"preset": "test"}, "preset"), ({"flip": 2}, "flip"), ({"normalize": "x"}, "normalize"),
                         ({"preset": "train", "scale": (0.5, 0.1)}, "scale"), ("bogus", "bogus")]:
            with self.assertRaisesRegex(ValueError, msg):
                transform_flags(bad)


def pixels_by_key(dl):
    out = {}
    for x, _y, keys in dl:
        for i, k in enumerate(keys):
            out[k] = np.array(x[i])  # a copy: the batch's memory is reused
    return out


@unittest.skipUnless(DATA, "PSIFLOW_TEST_DATA names no image folder")
class TestDataLoader(unittest.TestCase):
    def test_train_transform_is_reproducible_and_resumes_identically(self):
        train = {"preset": "train", "random_resized_crop": 24}
        dl = loader(transform=train)
        first = pixels_by_key(dl)
        x = next(iter(first.values()))
        self.assertEqual((x.dtype, x.shape), (np.float32, (3, 24, 24)))
        self.assertTrue(-3 < x.min() < x.max() < 3, (x.min(), x.max()))
        again = loader(transform=train)
        replay = pixels_by_key(again)
        for k, v in first.items():
            np.testing.assert_array_equal(v, replay[k], err_msg="epoch 0 of %s differs between two runs" % k)
        nxt = pixels_by_key(again)  # epoch 1: other crops and flips
        self.assertGreater(sum(not np.array_equal(first[k], nxt[k]) for k in first), len(first) // 2)
        # Resumed after two batches: the same pixels for every sample of the rest.
        cut = loader(transform=train)
        it = iter(cut)
        head = [next(it)[2] for _ in range(2)]
        state = cut.state_dict()
        it.close()
        resumed = loader(transform=train)
        resumed.load_state_dict(state)
        rest = pixels_by_key(resumed)
        self.assertEqual(len(rest) + sum(map(len, head)), len(first))
        for k, v in rest.items():
            np.testing.assert_array_equal(v, first[k], err_msg="%s: another crop after the resume" % k)

    def test_epochs_cover_the_folder_in_new_orders(self):
        files = folder_files()
        dl = loader()
        self.assertEqual(len(dl), -(-len(files) // 4))
        epochs = []
        for _ in range(3):
            batches, keys = 0, []
            for x, y, k in dl:
                batches += 1
                self.assertIsInstance(x, np.ndarray)
                self.assertEqual(x.dtype, np.uint8)
                self.assertEqual(x.shape[1:], (3, 32, 32))
                self.assertEqual(y.dtype, np.int64)
                for path, label in zip(k, y):
                    cls = os.path.basename(os.path.dirname(path))
                    self.assertEqual(int(label), sorted(os.listdir(DATA)).index(cls), path)
                keys += k
            self.assertEqual(batches, len(dl))
            self.assertEqual(sorted(keys), files)
            epochs.append(keys)
        self.assertNotEqual(epochs[0], epochs[1])
        self.assertNotEqual(epochs[1], epochs[2])
        # The first batches of a shuffled ImageFolder mix the classes.
        self.assertGreater(len({os.path.dirname(k) for k in epochs[0][:8]}), 1)
        self.assertEqual(dl.state_dict()["epoch"], 3)
        # set_epoch replays an epoch exactly; another seed gives another order.
        dl.set_epoch(1)
        self.assertEqual(keys_of(dl), epochs[1])
        self.assertNotEqual(keys_of(loader(seed=1)), epochs[0])
        # Without shuffle: the folder's order, every epoch.
        plain = loader(shuffle=False)
        self.assertEqual(keys_of(plain), files)
        self.assertEqual(keys_of(plain), files)

    def test_one_serve_for_every_epoch(self):
        files = folder_files()
        dl = loader()
        self.addCleanup(dl.close)
        n = len(dl)  # starts psiflow serve for epoch 0
        pid = dl._serve.proc.pid
        epochs = []
        for epoch in range(3):
            keys = []
            for _x, _y, k in dl:
                self.assertEqual(dl._serve.proc.pid, pid, "epoch %d: another psiflow serve" % epoch)
                keys += k
            self.assertEqual(sorted(keys), files, "epoch %d: not every file exactly once" % epoch)
            self.assertEqual(len(dl), n)
            epochs.append(keys)
        self.assertNotEqual(epochs[0], epochs[1])
        self.assertNotEqual(epochs[1], epochs[2])
        # The orders are those of a loader started at each epoch.
        for epoch in range(3):
            fresh = loader()
            fresh.set_epoch(epoch)
            self.assertEqual(keys_of(fresh), epochs[epoch], "epoch %d" % epoch)
        # set_epoch and load_state_dict go back over the same process.
        dl.set_epoch(1)
        self.assertEqual(keys_of(dl), epochs[1])
        it = iter(dl)
        head = next(it)[2] + next(it)[2]
        state = dl.state_dict()
        for _ in it:
            pass
        dl.load_state_dict(state)
        self.assertEqual(keys_of(dl), epochs[2][len(head):])
        fresh = loader()
        fresh.set_epoch(3)
        self.assertEqual(keys_of(dl), keys_of(fresh), "the epoch after a resume")
        self.assertEqual(dl._serve.proc.pid, pid)
        # Leaving an epoch early stops psiflow serve; the next iteration starts another.
        it = iter(dl)
        next(it)
        it.close()
        self.assertIsNone(dl._serve)
        self.assertEqual(sorted(keys_of(dl)), files)
        self.assertNotEqual(dl._serve.proc.pid, pid)

    def test_sample_cache_across_epochs(self):
        # -cache decoded: epoch 1 comes from the cache the same process filled
        # in epoch 0, the same pixels for every key, in epoch 1's order.
        dl = loader(serve_args=["-cache", "decoded"])
        self.addCleanup(dl.close)
        first = pixels_by_key(dl)
        pid = dl._serve.proc.pid
        order = []
        again = {}
        for x, _y, keys in dl:
            order += keys
            for i, k in enumerate(keys):
                again[k] = np.array(x[i])
        self.assertEqual(dl._serve.proc.pid, pid)
        self.assertEqual(sorted(again), folder_files())
        fresh = loader()
        fresh.set_epoch(1)
        self.assertEqual(order, keys_of(fresh))
        for k, v in first.items():
            np.testing.assert_array_equal(v, again[k], err_msg="%s: other pixels from the cache" % k)

    def test_serve_killed_between_epochs(self):
        dl = loader()
        self.addCleanup(dl.close)
        keys_of(dl)
        proc = dl._serve.proc
        proc.kill()
        proc.wait()
        with self.assertRaisesRegex(psiflow.PsiflowError, "psiflow serve exited with status -9"):
            keys_of(dl)
        self.assertEqual(dl.state_dict()["epoch"], 1)
        self.assertEqual(sorted(keys_of(dl)), folder_files())  # a new psiflow serve, the same epoch

    def test_ranks_share_each_epoch(self):
        files = folder_files()
        for world, drop in [(2, False), (3, False), (3, True)]:
            for epoch in range(2):
                counts = collections.Counter()
                per = []
                for rank in range(world):
                    dl = loader(rank=rank, world_size=world, drop_last=drop, batch_size=3)
                    dl.set_epoch(epoch)
                    got = keys_of(dl)
                    per.append(len(got))
                    counts.update(got)
                    want = rank_count(len(files), world, drop)
                    self.assertEqual(len(dl), want // 3 if drop else -(-want // 3))
                self.assertEqual(len(set(per)), 1, per)
                missing = [f for f in files if counts[f] == 0]
                repeats = sum(c - 1 for c in counts.values())
                if drop:
                    self.assertEqual(repeats, 0)
                    self.assertLess(len(missing), world)
                else:
                    self.assertEqual(missing, [])
                    self.assertLess(repeats, world)

    def test_drop_last_drops_the_short_batch(self):
        dl = loader(batch_size=8, drop_last=True)
        sizes = [len(k) for _x, _y, k in dl]
        self.assertEqual(sizes, [8] * (len(folder_files()) // 8))
        self.assertEqual(len(dl), len(sizes))

    def test_resume_exactly_at_any_batch(self):
        full = loader()
        epoch0, epoch1 = keys_of(full), keys_of(full)
        for cut in [0, 1, 3, len(full) - 1, len(full)]:
            dl = loader()
            it = iter(dl)
            head = []
            for _ in range(cut):
                head += next(it)[2]
            state = json.loads(json.dumps(dl.state_dict()))
            it.close()
            again = loader()
            again.load_state_dict(state)
            rest = keys_of(again)
            self.assertEqual(head + rest, epoch0, "cut after %d batches: %s" % (cut, state))
            self.assertEqual(keys_of(again), epoch1, "the epoch after a resume")

    def test_resume_under_another_world_size(self):
        files = folder_files()
        for before, after, steps in [(2, 1, 2), (1, 2, 2), (2, 4, 1)]:
            counts = collections.Counter()
            state = None
            for rank in range(before):
                dl = loader(rank=rank, world_size=before, batch_size=2)
                it = iter(dl)
                for _ in range(steps):
                    counts.update(next(it)[2])
                s = dl.state_dict()
                it.close()
                if state is not None:
                    self.assertEqual(s["consumed"], state["consumed"], "ranks at the same step disagree")
                state = s
            for rank in range(after):
                dl = loader(rank=rank, world_size=after, batch_size=2)
                dl.load_state_dict(state)
                counts.update(keys_of(dl))
            self.assertEqual(sorted(counts), files, (before, after))
            self.assertLess(sum(c - 1 for c in counts.values()), after, (before, after, counts))

    def test_torch_tensors_by_default(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        dl = psiflow.DataLoader(DATA, batch_size=5, transform=SMALL, psiflow_bin=BIN)
        x, y = next(iter(dl))
        self.assertIsInstance(x, torch.Tensor)
        self.assertEqual(x.dtype, torch.uint8)
        self.assertEqual(y.dtype, torch.int64)
        dl.close()

    def test_ring_sized_from_the_batch(self):
        # prefetch=None (the default): as many slots as fit in 64 MiB, 2 to 4
        for transform, batch, want in [(SMALL, 4, 4), ({"preset": "train", "random_resized_crop": 768}, 8, 2)]:
            args = ["-batch", str(batch), "-epochs", "1"] + transform_flags(transform)
            with psiflow.Loader(data=DATA, psiflow_bin=BIN, args=args) as ld:
                x, _y = next(iter(ld))
                self.assertEqual((ld.client.slots, x.dtype), (want, np.float32 if want == 2 else np.uint8),
                                 "batch of %d bytes" % x.nbytes)
        with psiflow.Loader(data=DATA, psiflow_bin=BIN, args=["-batch", "4"] + transform_flags(SMALL), slots=3) as ld:
            next(iter(ld))
            self.assertEqual(ld.client.slots, 3)
        self.assertIsNone(loader().prefetch)
        with self.assertRaisesRegex(ValueError, "prefetch"):
            loader(prefetch=0)

    def test_bad_arguments(self):
        for kw, msg in [({"transform": {"resize": 0}}, "resize"), ({"transform": {"bogus": 1}}, "bogus"),
                        ({"batch_size": 0}, "batch_size"), ({"rank": 2, "world_size": 2}, "out of range"),
                        ({"rank": 1}, "both")]:
            with self.assertRaisesRegex(ValueError, msg):
                loader(**kw)
        state = loader().state_dict()
        with self.assertRaisesRegex(ValueError, "seed"):
            loader(seed=5).load_state_dict(state)
        state["samples"] = 999
        dl = loader()
        dl.load_state_dict(state)
        with self.assertRaisesRegex(psiflow.PsiflowError, "999"):
            keys_of(dl)
        with self.assertRaisesRegex(psiflow.PsiflowError, "rank 25 of world size 30"):
            keys_of(loader(rank=25, world_size=30))


PIPELINE = """epochs: 1
source:
  kind: files
  config: {dir: unset}
stages:
  - kind: decode
    config: {label: folder, resize: 40, center_crop: 32}
  - kind: batch
    config: {size: 64}
  - collate
sink:
  kind: %s
"""


@unittest.skipUnless(DATA, "PSIFLOW_TEST_DATA (an image folder) not set")
class TestPipelineFile(unittest.TestCase):
    """DataLoader(pipeline=FILE, set={...}): a pipeline file ending in a torch
    sink, run by psiflow run with the overrides."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="psiflow-pipeline-test-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def file(self, sink="torch"):
        p = os.path.join(self.dir, "p.yaml")
        with open(p, "w") as f:
            f.write(PIPELINE % sink)
        return p

    def test_every_file_once_with_the_overrides(self):
        dl = psiflow.DataLoader(pipeline=self.file(), set={"source.dir": DATA, "stages.1.size": 3},
                                return_keys=True, psiflow_bin=BIN, tensors="numpy")
        for _ in range(2):  # each iteration runs the file again
            sizes, keys, labels = [], [], {}
            for x, y, k in dl:
                self.assertEqual(x.shape[1:], (3, 32, 32))
                self.assertEqual(x.dtype, np.uint8)
                sizes.append(len(y))
                keys += k
                labels.update(zip(k, (int(v) for v in y)))
            files = folder_files()
            self.assertEqual(sorted(keys), files)  # every file exactly once
            n = len(files)
            self.assertEqual(sizes, [3] * (n // 3) + ([n % 3] if n % 3 else []))  # set= reached the batch stage
            classes = sorted(os.listdir(DATA))
            for k, y in labels.items():
                self.assertEqual(classes[y], os.path.basename(os.path.dirname(k)), k)

    def test_errors_name_what(self):
        f = self.file()
        with self.assertRaisesRegex(ValueError, "batch_size, shuffle: the pipeline file says these"):
            psiflow.DataLoader(pipeline=f, batch_size=8, shuffle=False, psiflow_bin=BIN)
        with self.assertRaisesRegex(ValueError, "give pipeline= with it"):
            psiflow.DataLoader(DATA, set={"epochs": 2}, psiflow_bin=BIN)
        with self.assertRaisesRegex(ValueError, "no such file"):
            psiflow.DataLoader(pipeline=os.path.join(self.dir, "missing.yaml"), psiflow_bin=BIN)
        with self.assertRaisesRegex(ValueError, "sink.socket is the DataLoader's"):
            psiflow.DataLoader(pipeline=f, set={"sink.socket": "x"}, psiflow_bin=BIN)
        dl = psiflow.DataLoader(pipeline=f, set={"source.dir": DATA}, psiflow_bin=BIN, tensors="numpy")
        for call in (lambda: len(dl), dl.state_dict, lambda: dl.set_epoch(1), lambda: dl.load_state_dict({})):
            with self.assertRaisesRegex(TypeError, "has no plan"):
                call()
        with self.assertRaisesRegex(psiflow.PsiflowError, "stages.9.size"):  # psiflow run's own message
            list(psiflow.DataLoader(pipeline=f, set={"source.dir": DATA, "stages.9.size": 2}, psiflow_bin=BIN,
                                    tensors="numpy"))
        # The file must end in a torch sink: psiflow run refuses it at once. The
        # default start_timeout (60 s), not 10 s: on a loaded machine the refusal
        # must not lose a race with the client's deadline (a run that waited
        # instead would still fail here, with "no psiflow sink", not "discard").
        with self.assertRaisesRegex(psiflow.PsiflowError, "discard"):
            list(psiflow.DataLoader(pipeline=self.file("discard"), set={"source.dir": DATA}, psiflow_bin=BIN,
                                    tensors="numpy"))
