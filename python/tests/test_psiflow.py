"""Tests of the psiflow Python module against a real `psiflow serve`.

Run from the repository root (the Go test TestPythonModule in cmd/psiflow does
this with its own build of the launcher):

    PSIFLOW_BIN=bin/psiflow /usr/bin/python3 -m unittest discover -s python/tests -t python

PSIFLOW_TEST_DATA, when set, names a small image folder for the end-to-end test.
"""

import mmap
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import psiflow  # noqa: E402

BIN = os.environ.get("PSIFLOW_BIN", "bin/psiflow")
SHAPE = (4, 3, 8, 8)


def expected(first, shape):
    """The synthetic batch psiflow serve -synthetic sends: byte j of sample i is
    (i*31 + j*7 + j//251) % 253."""
    n = shape[0]
    per = int(np.prod(shape[1:]))
    i = np.arange(first, first + n, dtype=np.int64)[:, None]
    j = np.arange(per, dtype=np.int64)[None, :]
    return ((i * 31 + j * 7 + j // 251) % 253).astype(np.uint8).reshape(shape)


def synthetic(n, *more):
    return ["-synthetic", str(n), "-shape", ",".join(map(str, SHAPE))] + list(more)


def wait_exit(proc, timeout=60):
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("psiflow serve still running %d s later: the Go side hangs" % timeout)


class TestDelivery(unittest.TestCase):
    def test_every_batch_once_with_its_bytes(self):
        with psiflow.Loader(psiflow_bin=BIN, args=synthetic(25, "-keys"), slots=3) as loader:
            seqs = []
            for b in loader:
                k = b.seq - 1
                seqs.append(b.seq)
                np.testing.assert_array_equal(b.data, expected(k * SHAPE[0], SHAPE))
                idx = np.arange(k * SHAPE[0], (k + 1) * SHAPE[0])
                np.testing.assert_array_equal(b.labels, idx % 3)
                self.assertEqual(b.keys, ["s%06d" % i for i in idx])
                x, y = b  # unpacks like a DataLoader batch
                self.assertIs(x, b.data)
        self.assertEqual(seqs, list(range(1, 26)))
        self.assertEqual(loader.returncode, 0, loader.stderr())

    def test_pauses_are_announced(self):
        # psiflow serve's pause lines go to its standard output, which Loader
        # does not show: a loop waiting on a paused loader used to learn
        # nothing. Each pause and resume is a "pause" message, given to
        # on_pause, or written to sys.stderr without one.
        seen = []
        with psiflow.Loader(psiflow_bin=BIN, args=synthetic(5, "-pause-after", "2"), slots=2,
                            on_pause=seen.append) as loader:
            states = []
            for b in loader:
                states.append((b.seq, loader.client.paused, loader.client.pauses))
        self.assertEqual(loader.returncode, 0, loader.stderr())
        self.assertEqual([i["kind"] for i in seen], ["paused", "resumed"])
        self.assertIn("below its floor of 32 MiB", seen[0]["message"])
        self.assertIn("resumed after a pause of 1s", seen[1]["message"])
        self.assertEqual(seen[1]["lasted_s"], 1.0)
        self.assertEqual([s[0] for s in states], [1, 2, 3, 4, 5])  # every batch, in order
        self.assertEqual(states[-1][1:], (False, 1))

        import io
        err, sys.stderr = sys.stderr, io.StringIO()
        try:
            with psiflow.Loader(psiflow_bin=BIN, args=synthetic(4, "-pause-after", "1"), slots=2) as loader:
                n = sum(1 for _ in loader)
            lines = sys.stderr.getvalue().splitlines()
        finally:
            sys.stderr = err
        self.assertEqual(n, 4)
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(lines[0].startswith("psiflow serve: paused: the cgroup leaves the loader 1 MiB"), lines[0])
        self.assertTrue(lines[1].startswith("psiflow serve: resumed after a pause of 1s"), lines[1])

    def test_zero_copy(self):
        with psiflow.Loader(psiflow_bin=BIN, args=synthetic(3), slots=2) as loader:
            c = loader.client
            b = next(iter(loader))
            base = b.data
            while isinstance(base, (np.ndarray, memoryview)):
                base = base.base if isinstance(base, np.ndarray) else base.obj
            self.assertIsInstance(base, mmap.mmap, "the array's memory is not the shared ring")
            self.assertIs(base, c._mm)
            ring = np.frombuffer(c._mm, dtype=np.uint8)
            self.assertTrue(np.shares_memory(b.data, ring))
            off = b.data.ctypes.data - ring.ctypes.data
            self.assertEqual(off, b.slot * c.slot_bytes)
            self.assertFalse(b.data.flags.owndata)
            del ring

    def test_torch_tensors_share_memory(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch not installed (optional)")
        with psiflow.Loader(psiflow_bin=BIN, args=synthetic(4), torch=True) as loader:
            c = loader.client
            for b in loader:
                self.assertIsInstance(b.data, torch.Tensor)
                self.assertEqual(b.data.dtype, torch.uint8)
                ring = np.frombuffer(c._mm, dtype=np.uint8)
                self.assertEqual(b.data.data_ptr() - ring.ctypes.data, b.slot * c.slot_bytes)
                np.testing.assert_array_equal(b.data.numpy(), expected((b.seq - 1) * SHAPE[0], SHAPE))
                del ring

    def test_explicit_release_and_backpressure(self):
        with psiflow.Loader(psiflow_bin=BIN, args=synthetic(6), slots=2, auto_release=False) as loader:
            it = iter(loader)
            a, b = next(it), next(it)
            with self.assertRaisesRegex(psiflow.PsiflowError, "all 2 slots are held"):
                next(it)
            a.release()
            a.release()  # a second release does nothing
            c = next(it)
            self.assertEqual(c.seq, 3)
            self.assertEqual(c.slot, a.slot)  # the released slot came back
            np.testing.assert_array_equal(b.data, expected(1 * SHAPE[0], SHAPE))  # b untouched
            b.release()
            c.release()
            rest = []
            for d in it:
                rest.append(d.seq)
                d.release()
            self.assertEqual(rest, [4, 5, 6])
        self.assertEqual(loader.returncode, 0, loader.stderr())


class TestEnding(unittest.TestCase):
    def test_python_stops_early(self):
        loader = psiflow.Loader(psiflow_bin=BIN, args=synthetic(100000))
        for b in loader:
            if b.seq == 3:
                break
        t0 = time.monotonic()
        rc = loader.close()
        self.assertEqual(rc, 0, loader.stderr())
        self.assertLess(time.monotonic() - t0, 30)

    def test_python_killed(self):
        sock = os.path.join(tempfile.mkdtemp(), "s.sock")
        serve = subprocess.Popen([BIN, "serve", "-socket", sock] + synthetic(100000),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        child = textwrap.dedent("""
            import os, signal, sys
            sys.path.insert(0, %r)
            import psiflow
            c = psiflow.Client(%r, auto_release=False)
            for b in c:
                if b.seq == 2:
                    print("holding", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
        """ % (os.path.dirname(HERE), sock))
        py = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE)
        self.assertEqual(py.stdout.readline().strip(), b"holding")
        self.assertEqual(py.wait(60), -signal.SIGKILL)
        rc = wait_exit(serve)
        err = serve.stderr.read().decode()
        serve.stderr.close()
        py.stdout.close()
        self.assertNotEqual(rc, 0, err)
        self.assertIn("without closing", err)
        self.assertFalse(os.path.exists(sock), "socket file left behind")

    def test_go_failure_is_raised(self):
        loader = psiflow.Loader(psiflow_bin=BIN, args=synthetic(10, "-fail-after", "3"))
        got = []
        with self.assertRaisesRegex(psiflow.PsiflowError, r"synthetic failure after 3 batches"):
            for b in loader:
                got.append(b.seq)
        self.assertEqual(got, [1, 2, 3])
        self.assertEqual(loader.close(), 1)

    def test_go_killed_is_raised(self):
        loader = psiflow.Loader(psiflow_bin=BIN, args=synthetic(100000), auto_release=True)
        it = iter(loader)
        next(it)
        loader.proc.kill()
        with self.assertRaisesRegex(psiflow.PsiflowError, "exited with status -9|closed the connection"):
            for _ in it:
                pass
        loader.close()

    def test_no_server(self):
        with self.assertRaisesRegex(psiflow.PsiflowError, "no psiflow sink"):
            psiflow.Client(os.path.join(tempfile.mkdtemp(), "none.sock"), connect_timeout=0.2)

    def test_bad_arguments_are_raised(self):
        with self.assertRaisesRegex(psiflow.PsiflowError, "exited with status 2"):
            psiflow.Loader(psiflow_bin=BIN, args=["-bogus"])


class TestTemporaryFolder(unittest.TestCase):
    """Loader makes a temporary folder for serve's socket and its stderr: it
    goes when psiflow cannot start, when serve fails, and when a loop breaks
    early and the loader is dropped without close."""

    def setUp(self):
        self._saved = tempfile.tempdir
        self.tmp = tempfile.mkdtemp(prefix="psiflow-tmpdir-test-")
        tempfile.tempdir = self.tmp  # where Loader's mkdtemp makes its folder

    def tearDown(self):
        tempfile.tempdir = self._saved
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def left(self):
        return sorted(os.listdir(self.tmp))

    def test_serve_fails_at_start(self):
        with self.assertRaisesRegex(psiflow.PsiflowError, "exited with status 2"):
            psiflow.Loader(psiflow_bin=BIN, args=["-bogus"])
        self.assertEqual(self.left(), [])

    def test_psiflow_cannot_be_started(self):
        bad = os.path.join(self._saved or "/tmp", "psiflow-not-executable-%d" % os.getpid())
        with open(bad, "w") as f:
            f.write("#!/bin/sh\n")
        try:
            with self.assertRaises(PermissionError):
                psiflow.Loader(psiflow_bin=bad, args=synthetic(3))
        finally:
            os.remove(bad)
        self.assertEqual(self.left(), [])

    def test_serve_fails_while_serving(self):
        loader = psiflow.Loader(psiflow_bin=BIN, args=synthetic(10, "-fail-after", "2"))
        self.assertEqual(len(self.left()), 1)
        with self.assertRaisesRegex(psiflow.PsiflowError, "synthetic failure"):
            for b in loader:
                pass
        proc = loader.proc
        del loader, b  # dropped, never closed (a batch holds its loader's ring)
        import gc
        gc.collect()
        self.assertEqual(self.left(), [])
        self.assertIsNotNone(proc.poll())

    def test_loop_breaks_early(self):
        loader = psiflow.Loader(psiflow_bin=BIN, args=synthetic(100000))
        for b in loader:
            if b.seq == 2:
                break
        proc = loader.proc
        del loader, b  # dropped without close
        import gc
        gc.collect()
        self.assertEqual(self.left(), [])
        self.assertEqual(wait_exit(proc), 0)


@unittest.skipUnless(os.environ.get("PSIFLOW_TEST_DATA"), "PSIFLOW_TEST_DATA names no image folder")
class TestImageFolder(unittest.TestCase):
    def test_folder_end_to_end(self):
        data = os.environ["PSIFLOW_TEST_DATA"]
        n = sum(len(f) for _, _, f in os.walk(data))
        seen = 0
        with psiflow.Loader(data=data, psiflow_bin=BIN, batch_size=8, args=["-crop", "32", "-resize", "40"]) as loader:
            for x, y in loader:
                self.assertEqual(x.dtype, np.uint8)
                self.assertEqual(x.shape[1:], (3, 32, 32))
                self.assertEqual(len(y), x.shape[0])
                self.assertTrue(((y >= 0) & (y < 2)).all(), y)
                self.assertGreater(int(x.max()), 0)
                seen += x.shape[0]
        self.assertEqual(seen, n)
        self.assertEqual(loader.returncode, 0, loader.stderr())


if __name__ == "__main__":
    unittest.main()
