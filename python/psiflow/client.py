"""The wire protocol of psiflow's sink.Torch (see docs/SINK.md) and the
iterables over it."""

import array
import json
import mmap
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from . import _binary

PROTOCOL_VERSION = 1
_DTYPES = {"uint8": np.uint8, "float32": np.float32}
_MAX_MSG = 1 << 22


class PsiflowError(RuntimeError):
    """A failure reported by the psiflow process, or a broken connection to it."""


class Batch:
    """One batch: ``data`` (numpy array or torch tensor, a view of shared
    memory), ``labels`` (int64 numpy array or tensor), ``keys`` (sample keys,
    when the sink sends them), ``seq`` (1 for the first batch). Unpacks as
    ``data, labels``. After ``release()`` the memory is reused for a later batch:
    copy what must outlive it."""

    __slots__ = ("data", "labels", "keys", "seq", "slot", "_client", "_released", "_fence")

    def __init__(self, client, data, labels, keys, seq, slot):
        self._client = client
        self.data = data
        self.labels = labels
        self.keys = keys
        self.seq = seq
        self.slot = slot
        self._released = False
        self._fence = None  # with pinning: an event after the copies from this batch

    def __iter__(self):
        return iter((self.data, self.labels))

    def __len__(self):
        return int(self.data.shape[0])

    @property
    def released(self):
        return self._released

    def release(self):
        """Hand the slot back to psiflow (once; later calls do nothing)."""
        if not self._released:
            self._released = True
            self._client._release(self.slot, self._fence)


class Client:
    """Connects to a psiflow Torch sink listening on ``socket_path`` and
    iterates over its batches.

    auto_release: release each batch when the next one is asked for (the
    default); with False call ``batch.release()`` yourself.
    torch: yield torch tensors (torch.from_numpy: same memory) instead of numpy arrays.
    connect_timeout: seconds to wait for the socket to appear and accept.
    pin: a psiflow._pin.CudaPin: the shared ring is registered with CUDA when it
    arrives, and a released slot goes back to psiflow only once the event
    fenced after its copies has completed (see psiflow._pin).
    on_pause: called with each "pause" message's info (a dict: kind "paused",
    "resumed", "timed out" or "left", message, lasted_s) when psiflow pauses its
    reads below its memory floor, resumes, its pause outlasts the pause timeout,
    or it leaves because the others in its cgroup alone leave it no room (the
    error that ends the stream follows the last two);
    None (the default): the message is written to sys.stderr. While paused the
    next batch waits: this is how a training loop learns why.
    """

    def __init__(self, socket_path, auto_release=True, torch=False, connect_timeout=30.0, _alive=None, pin=None,
                 on_pause=None):
        self.socket_path = socket_path
        self.auto_release = auto_release
        self._torch = None
        if torch:
            import torch as _torch  # optional dependency

            self._torch = _torch
        self._alive = _alive  # callable returning an error string when the server died
        self._pin = pin
        self._pending = []  # (slot, event): released, waiting for their copies
        self._sock = None
        self._mm = None
        self._held = {}
        self._last = None
        self._done = False
        self.batches = 0
        self.plan = None  # the last "plan" message's info (psiflow serve's epoch plan)
        # psiflow serve -consumer-epochs ended an epoch ("epoch_end"): the
        # iteration stopped, and next_epoch asks for another one
        self.epoch_ended = False
        self.on_pause = on_pause
        self.paused = False  # psiflow's reads are paused below its floor now
        self.pauses = 0  # pauses announced so far
        self._connect(connect_timeout)

    # -- connection -------------------------------------------------------
    def _connect(self, timeout):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                s.connect(self.socket_path)
                self._sock = s
                return
            except (FileNotFoundError, ConnectionRefusedError) as e:
                s.close()
                last = e
            if self._alive is not None:
                why = self._alive()
                if why:
                    raise PsiflowError(why)
            if time.monotonic() >= deadline:
                raise PsiflowError("no psiflow sink at %s after %.0f s: %s" % (self.socket_path, timeout, last))
            time.sleep(0.02)

    def _recv(self):
        fds = array.array("i")
        try:
            msg, anc, _flags, _addr = self._sock.recvmsg(_MAX_MSG, socket.CMSG_SPACE(fds.itemsize))
        except OSError as e:
            why = self._alive(wait=True) if self._alive is not None else None
            raise PsiflowError(why or "connection to psiflow lost after %d batches: %s" % (self.batches, e)) from e
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        if not msg:
            why = self._alive(wait=True) if self._alive is not None else None
            raise PsiflowError(why or "psiflow closed the connection without ending the stream (after %d batches)" % self.batches)
        try:
            m = json.loads(msg)
        except ValueError as e:
            raise PsiflowError("bad message from psiflow: %r" % msg[:200]) from e
        return m, list(fds)

    def _hello(self, m, fds):
        if m.get("version") != PROTOCOL_VERSION:
            raise PsiflowError("psiflow speaks protocol version %r, this module %d" % (m.get("version"), PROTOCOL_VERSION))
        if len(fds) != 1:
            raise PsiflowError("psiflow's hello carried %d descriptors, want 1" % len(fds))
        size = int(m["slots"]) * int(m["slot_bytes"])
        try:
            self._mm = mmap.mmap(fds[0], size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fds[0])  # the mapping keeps the memory
        self.slots = int(m["slots"])
        self.slot_bytes = int(m["slot_bytes"])
        if self._pin is not None:
            try:
                self._pin.register(self._mm)
            except Exception as e:
                self._mm.close()
                self._mm = None
                raise PsiflowError("pin_memory: %s" % e) from e

    def _release(self, slot, fence=None):
        self._held.pop(slot, None)
        if self._done or self._sock is None:
            return  # the stream has ended: psiflow takes no more releases
        if self._pin is not None:
            # A copy with non_blocking=True may still read the slot: it goes
            # back once an event after the copy has completed.
            self._pending.append((slot, fence if fence is not None else self._pin.fence()))
            self._settle()
            return
        self._send_release(slot)

    def _send_release(self, slot):
        if self._sock is not None and not self._done:
            try:
                self._sock.send(b'{"t":"release","slot":%d}' % slot)
            except OSError:
                pass  # psiflow has gone; the next receive says why

    def _settle(self, need_slot=False):
        """Sends the releases whose copies have completed, in order; with
        need_slot, waits for the oldest ones until psiflow has a free slot."""
        while self._pending:
            slot, ev = self._pending[0]
            if not self._pin.done(ev):
                if not (need_slot and len(self._held) + len(self._pending) >= self.slots):
                    return
                self._pin.wait(ev)
            self._pending.pop(0)
            self._send_release(slot)

    # -- iteration ----------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self):
        if self.auto_release and self._last is not None:
            self._last.release()
            self._last = None
        if self._done or self.epoch_ended:
            raise StopIteration
        if self._mm is not None and len(self._held) >= self.slots:
            raise PsiflowError("all %d slots are held by this process: release a batch before asking for the next" % self.slots)
        if self._pending:
            self._settle(need_slot=True)
        while True:
            m, fds = self._recv()
            t = m.get("t")
            if t == "hello":
                self._hello(m, fds)
                continue
            if t == "plan":
                self.plan = m.get("info") or {}
                continue
            if t == "pause":
                self._pause(m.get("info") or {})
                continue
            for fd in fds:
                os.close(fd)
            if t == "batch":
                b = self._batch(m)
                if self.auto_release:
                    self._last = b
                return b
            if t == "end":
                self._hang_up()
                raise StopIteration
            if t == "epoch_end":
                self.epoch_ended = True
                raise StopIteration
            if t == "error":
                self._hang_up()
                raise PsiflowError(m.get("message", "psiflow failed"))
            raise PsiflowError("unknown message %r from psiflow" % t)

    def next_epoch(self, epoch, start=0):
        """After an "epoch_end" (psiflow serve -consumer-epochs), asks for
        epoch ``epoch`` from global offset ``start``; iterating again yields
        its batches (wait_plan returns its plan)."""
        if not self.epoch_ended or self._done:
            raise PsiflowError("next_epoch: psiflow has not ended an epoch on this connection")
        try:
            self._sock.send(b'{"t":"next","epoch":%d,"start":%d}' % (epoch, start))
        except OSError as e:
            why = self._alive(wait=True) if self._alive is not None else None
            raise PsiflowError(why or "connection to psiflow lost between epochs: %s" % e) from e
        self.epoch_ended = False
        self.plan = None

    def wait_plan(self):
        """Returns the epoch's plan, waiting for it when it has not come yet
        (psiflow serve sends it before the epoch's first batch)."""
        while self.plan is None:
            if self._done:
                raise PsiflowError("psiflow ended the stream without a plan")
            m, fds = self._recv()
            for fd in fds:
                os.close(fd)
            t = m.get("t")
            if t == "plan":
                self.plan = m.get("info") or {}
            elif t == "pause":
                self._pause(m.get("info") or {})
            elif t == "error":
                self._hang_up()
                raise PsiflowError(m.get("message", "psiflow failed"))
            else:
                raise PsiflowError("psiflow sent %r before its plan" % t)
        return self.plan

    def _pause(self, info):
        kind = info.get("kind")
        if kind == "paused":
            self.paused = True
            self.pauses += 1
        elif kind == "resumed":
            self.paused = False
        if self.on_pause is not None:
            self.on_pause(info)
        else:
            sys.stderr.write("psiflow serve: %s\n" % info.get("message", kind))
            sys.stderr.flush()

    def _batch(self, m):
        if self._mm is None:
            raise PsiflowError("psiflow sent a batch before the shared ring")
        dtype = _DTYPES.get(m["dtype"])
        if dtype is None:
            raise PsiflowError("unknown dtype %r" % m["dtype"])
        shape = tuple(m["shape"])
        count = 1
        for d in shape:
            count *= d
        data = np.frombuffer(self._mm, dtype=dtype, count=count, offset=int(m["offset"])).reshape(shape)
        labels = np.asarray(m.get("labels") or [], dtype=np.int64)
        if self._torch is not None:
            data = self._torch.from_numpy(data)
            labels = self._torch.from_numpy(labels)
        slot = int(m["slot"])
        b = Batch(self, data, labels, m.get("keys"), int(m["seq"]), slot)
        self._held[slot] = b
        self.batches += 1
        return b

    # -- ending -------------------------------------------------------------
    def _hang_up(self):
        # psiflow waits for this after its last message; the mapping stays.
        self._done = True
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self):
        """Stop: tell psiflow this is a clean stop and close the connection.
        Arrays still referenced keep the shared memory mapped until they go."""
        if self._sock is not None:
            if not self._done:
                try:
                    self._sock.send(b'{"t":"close","slot":0}')
                    # Wait for psiflow to hang up: closing first, with its batches
                    # unread, would reset the connection and look like a crash.
                    self._sock.settimeout(10.0)
                    while True:
                        msg, anc, _f, _a = self._sock.recvmsg(_MAX_MSG, socket.CMSG_SPACE(4))
                        for level, typ, data in anc:
                            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                                fds = array.array("i")
                                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                                for fd in fds:
                                    os.close(fd)
                        if not msg:
                            break
                except OSError:
                    pass  # gone already, or reset, or timed out: closing is all that is left
            self._sock.close()
            self._sock = None
        self._done = True
        self._last = None
        self._held.clear()
        try:
            if self._pin is not None:
                pending, self._pending = self._pending, []
                for _slot, ev in pending:
                    self._pin.wait(ev)
                if self._mm is not None:
                    # Unregistered before the mapping goes; views still alive
                    # are ordinary (pageable) memory from here on.
                    self._pin.unregister()
        finally:
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:
                    pass  # views are still alive; the mapping goes with them
                self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Loader:
    """Starts ``psiflow serve`` over an image folder and iterates over its
    batches (see Client for auto_release and torch).

    data: the folder (ImageFolder layout: DATA/<class>/<image>).
    psiflow_bin: the psiflow program (default: $PSIFLOW_BIN, else the one installed
    with this package, else "psiflow" on PATH).
    args: more ``psiflow serve`` flags, e.g. ["-batch", "32", "-epochs", "2"].
    slots: batches outstanding at once (the shared ring's length); None: psiflow
    sizes it from the first batch (as many as fit in 64 MiB, 2 to 4).
    pipeline: a pipeline file whose sink is of kind torch, run with ``psiflow
    run`` instead of ``psiflow serve`` (args are then ``psiflow run`` flags).
    on_pause: see Client (default: each pause, resume and pause timeout is a
    line on sys.stderr).
    """

    def __init__(self, data=None, psiflow_bin=None, args=(), slots=None, auto_release=True, torch=False,
                 batch_size=None, start_timeout=60.0, pin=None, pipeline=None, on_pause=None):
        self.bin = _binary.find(psiflow_bin)
        self._dir = tempfile.mkdtemp(prefix="psiflow-")
        self.socket_path = os.path.join(self._dir, "sink.sock")
        if pipeline is not None:
            # A pipeline file ending in a torch sink, run by `psiflow run`: the
            # socket and the ring's length are set on its sink, args are more
            # `psiflow run` flags (-set KEY=VALUE).
            if data is not None or batch_size is not None:
                raise ValueError("Loader(pipeline=...): the file names the data and the batch size, not data= or batch_size=")
            self._what = "psiflow run %s" % pipeline
            cmd = [self.bin, "run", os.fspath(pipeline), "-set", "sink.socket=" + self.socket_path]
            if slots is not None:
                cmd += ["-set", "sink.slots=%d" % slots]
        else:
            self._what = "psiflow serve"
            cmd = [self.bin, "serve", "-socket", self.socket_path]
            if slots is not None:
                cmd += ["-slots", str(slots)]
            if data is not None:
                cmd += ["-data", str(data)]
            if batch_size is not None:
                cmd += ["-batch", str(batch_size)]
        cmd += list(args)
        self.proc = None
        try:
            self._stderr = open(os.path.join(self._dir, "stderr"), "w+b")
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr)
        except BaseException:
            # psiflow could not be started: nothing but the folder to undo.
            if getattr(self, "_stderr", None) is not None:
                self._stderr.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self.returncode = None
        try:
            self.client = Client(self.socket_path, auto_release=auto_release, torch=torch,
                                 connect_timeout=start_timeout, _alive=self._why_dead, pin=pin, on_pause=on_pause)
        except BaseException:
            self.close()
            raise

    def stderr(self):
        """What psiflow serve wrote to its standard error so far."""
        if self._stderr.closed:
            return self._stderr_text
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def _why_dead(self, wait=False):
        """Why psiflow is gone (None while it runs or when it ended cleanly);
        wait: give a process that just broke the connection 5 s to exit."""
        rc = self.proc.poll()
        if rc is None and wait:
            try:
                rc = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                return None
        if rc is None or rc == 0:
            return None
        tail = self.stderr().strip().splitlines()[-3:]
        return "%s exited with status %d: %s" % (self._what, rc, " / ".join(tail) or "(no output)")

    def __iter__(self):
        return iter(self.client)

    def close(self, timeout=30.0):
        """Stop psiflow (a clean stop) and wait for it; returns its exit status.
        The temporary folder of the socket goes whatever happens (also when
        closing fails)."""
        try:
            if getattr(self, "client", None) is not None:
                self.client.close()
        finally:
            try:
                if self.proc.poll() is None:
                    try:
                        self.proc.wait(timeout)
                    except subprocess.TimeoutExpired:
                        self.proc.terminate()
                        try:
                            self.proc.wait(10)
                        except subprocess.TimeoutExpired:
                            self.proc.kill()
                            self.proc.wait()
                self.returncode = self.proc.returncode
                if not self._stderr.closed:
                    self._stderr_text = self.stderr()
                    self._stderr.close()
            finally:
                shutil.rmtree(self._dir, ignore_errors=True)
        return self.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # A loader dropped without close (a loop that broke early, an
        # exception): psiflow is stopped and the socket's folder removed.
        try:
            if getattr(self, "proc", None) is not None:
                self.close()
            elif getattr(self, "_dir", None) is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
        except Exception:
            pass
