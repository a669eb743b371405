"""psiflow.DataLoader's pin_memory and device: what can be tested without CUDA.

Without a GPU: pin_memory=True warns and says why, device="cuda" is refused
with the reason, bad devices are named. With a stand-in for CUDA (FakePin in
place of psiflow._pin.CudaPin): the shared ring is registered once per epoch
with its whole size, a slot goes back to psiflow only after the event fenced
after its copies has completed (so psiflow never rewrites a slot a copy may
still read), the loader waits for the oldest copy when psiflow has no free slot
left, and the ring is unregistered before it is unmapped. scripts/gpu-check.sh
runs the real path on a GPU (torch.cuda.cudart().cudaHostRegister).
"""

import os
import sys
import unittest
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import psiflow  # noqa: E402
from psiflow import _pin, client  # noqa: E402

BIN = os.environ.get("PSIFLOW_BIN", "bin/psiflow")
DATA = os.environ.get("PSIFLOW_TEST_DATA")
SMALL = {"resize": 40, "crop": 32}

try:
    import torch
except ImportError:
    torch = None
HAVE_CUDA = _pin.cuda_unavailable(torch) is None


def loader(**kw):
    args = dict(batch_size=4, transform=SMALL, return_keys=True, psiflow_bin=BIN, tensors="numpy", shuffle=False)
    args.update(kw)
    return psiflow.DataLoader(DATA, **args)


class TestParseDevice(unittest.TestCase):
    def test_host_and_bad_devices(self):
        self.assertIsNone(_pin.parse_device(None))
        self.assertIsNone(_pin.parse_device("cpu"))
        for bad in ["mps", "cuda0", "gpu", 0, 1.5]:
            with self.assertRaisesRegex(ValueError, "device=.*want None, 'cpu' or a CUDA device"):
                _pin.parse_device(bad)

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_cuda_devices(self):
        self.assertEqual(_pin.parse_device("cuda:1"), torch.device("cuda", 1))
        self.assertEqual(_pin.parse_device(torch.device("cuda")), torch.device("cuda"))
        self.assertIsNone(_pin.parse_device(torch.device("cpu")))


@unittest.skipIf(HAVE_CUDA, "CUDA is available here")
@unittest.skipUnless(DATA, "PSIFLOW_TEST_DATA names no image folder")
class TestWithoutCUDA(unittest.TestCase):
    def test_pin_memory_warns_and_batches_still_come(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            dl = loader(pin_memory=True)
        msgs = [str(x.message) for x in w]
        self.assertEqual(len(msgs), 1, msgs)
        self.assertIn("pin_memory=True, but batches are not pinned", msgs[0])
        self.assertIn(_pin.cuda_unavailable(torch), msgs[0])
        n = sum(len(k) for _x, _y, k in dl)
        self.assertEqual(n, 20)

    def test_cuda_device_is_refused_with_the_reason(self):
        with self.assertRaisesRegex(RuntimeError, "device='cuda': CUDA is not available here: "):
            loader(device="cuda", tensors="auto" if torch is not None else "numpy")

    def test_device_needs_torch_tensors(self):
        if torch is None:
            self.skipTest("torch is not installed")
        with self.assertRaisesRegex(ValueError, "needs torch tensors, not tensors='numpy'"):
            loader(device="cuda", tensors="numpy")


class FakeEvent:
    """An event that completes after `polls` queries, or when waited for."""

    def __init__(self, pin, polls):
        self.pin, self.polls, self.complete = pin, polls, False

    def query(self):
        if not self.complete:
            self.polls -= 1
            if self.polls <= 0:
                self.complete = True
        return self.complete


class FakePin:
    """Stands in for psiflow._pin.CudaPin: records what the client does."""

    polls = 3
    instances = []
    fail = None

    def __init__(self, torch_module, device=None):
        self.events, self.waits, self.registered, self.unregistered, self.mm = [], 0, None, 0, None
        FakePin.instances.append(self)

    def register(self, mm):
        if FakePin.fail:
            raise RuntimeError(FakePin.fail)
        self.mm = mm
        self.registered = (_pin._address(mm), len(mm))
        return self.registered[0]

    def fence(self, stream=None):
        ev = FakeEvent(self, self.polls)
        self.events.append(ev)
        return ev

    @staticmethod
    def done(ev):
        return ev.query()

    def wait(self, ev):
        self.waits += 1
        ev.complete = True

    def unregister(self):
        if self.mm.closed:
            raise AssertionError("unregistered after the mapping was closed")
        if not all(e.complete for e in self.events):
            raise AssertionError("unregistered with copies pending")
        self.unregistered += 1


@unittest.skipUnless(DATA, "PSIFLOW_TEST_DATA names no image folder")
class TestPinnedRing(unittest.TestCase):
    """The pinned path's bookkeeping, with FakePin for CUDA."""

    def setUp(self):
        self.saved = (_pin.cuda_unavailable, _pin.CudaPin, client.Client._send_release)
        _pin.cuda_unavailable = lambda _torch: None
        _pin.CudaPin = FakePin
        FakePin.instances, FakePin.fail, FakePin.polls = [], None, 3
        self.sent = []  # (pin, how many of its events had completed when a release went out)
        test = self

        def send(c, slot):
            p = c._pin
            test.sent.append((p, sum(e.complete for e in p.events)))
            return test.saved[2](c, slot)

        client.Client._send_release = send

    def tearDown(self):
        _pin.cuda_unavailable, _pin.CudaPin, client.Client._send_release = self.saved

    def check_releases(self):
        by_pin = {}
        for p, complete in self.sent:
            by_pin.setdefault(id(p), []).append(complete)
        self.assertTrue(by_pin, "no release was sent")
        for counts in by_pin.values():
            # Slots go back in the order they were fenced: the k-th release
            # sent needs at least k+1 complete events.
            for k, complete in enumerate(counts):
                self.assertGreaterEqual(complete, k + 1, "release %d sent with %d events complete" % (k, complete))

    def test_registered_once_and_released_after_the_copy(self):
        dl = loader(pin_memory=True, prefetch=2)
        for epoch in range(2):
            keys, pending_seen = [], 0
            for x, _y, k in dl:
                keys += k
                p = FakePin.instances[-1]
                lo, size = p.registered
                addr = x.__array_interface__["data"][0]
                self.assertTrue(lo <= addr and addr + x.nbytes <= lo + size,
                                "batch at 0x%x+%d outside the registered ring 0x%x+%d" % (addr, x.nbytes, lo, size))
                pending_seen += sum(not e.complete for e in p.events)
            self.assertEqual(len(keys), 20)
            self.assertEqual(len(FakePin.instances), 1, "one registration for every epoch (one psiflow serve)")
            p = FakePin.instances[-1]
            self.assertEqual(p.unregistered, 0, "unregistered while psiflow serve waits for the next epoch")
            self.assertGreater(pending_seen, 0, "the fake events were never pending: the test proves nothing")
        dl.close()
        self.assertEqual(p.unregistered, 1)
        self.check_releases()

    def test_bytes_stay_while_their_copy_is_pending(self):
        FakePin.polls = 10 ** 9  # events never complete by themselves: the loader must wait
        dl = loader(pin_memory=True, prefetch=2)
        prev, checked = None, 0
        for x, _y, _k in dl:
            p = FakePin.instances[-1]
            if prev is not None:
                view, then = prev
                ev = p.events[-1]  # fenced when the previous batch was released
                if not ev.complete:
                    np.testing.assert_array_equal(view, then, err_msg="a slot was rewritten with its copy pending")
                    checked += 1
            prev = (x, np.array(x))
        self.assertGreater(checked, 2)
        p = FakePin.instances[-1]
        self.assertGreater(p.waits, 0, "with no event completing, the loader never waited for one")
        dl.close()
        self.assertEqual(p.unregistered, 1)
        self.check_releases()

    def test_register_failure_is_named(self):
        FakePin.fail = "cudaHostRegister of the 1-byte shared ring at 0x0: out of memory"
        with self.assertRaisesRegex(psiflow.PsiflowError, "pin_memory: cudaHostRegister .*out of memory"):
            for _ in loader(pin_memory=True):
                pass


if __name__ == "__main__":
    unittest.main()
