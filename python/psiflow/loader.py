"""psiflow.DataLoader: PyTorch's DataLoader vocabulary over ``psiflow serve``."""

import os
import warnings

from . import _binary, _pin
from .client import Loader, PsiflowError

STATE_VERSION = 1

# The transforms, as torchvision's ImageNet recipes write them:
#   "val":   Resize(256), CenterCrop(224), uint8 CHW
#   "train": RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)),
#            RandomHorizontalFlip(0.5), ToTensor + Normalize(ImageNet) → float32 CHW
PRESETS = {
    "val": {"resize": 256, "crop": 224},
    "train": {"random_resized_crop": 224, "scale": (0.08, 1.0), "ratio": (3.0 / 4, 4.0 / 3), "flip": 0.5,
              "normalize": "imagenet"},
}
_SIZES = {"resize": "-resize", "crop": "-crop", "random_resized_crop": "-random-resized-crop"}
_RANGES = {"scale": ("-scale-min", "-scale-max"), "ratio": ("-ratio-min", "-ratio-max")}


def transform_flags(transform):
    """psiflow serve's flags for transform: "val", "train", or a dict of
    parameters over a preset ({"preset": "train", "normalize": "none"}; the
    preset is "val" when not named)."""
    if isinstance(transform, str):
        if transform not in PRESETS:
            raise ValueError("transform=%r: want 'val', 'train' or a dict of parameters" % (transform,))
        params = dict(PRESETS[transform])
    elif isinstance(transform, dict):
        over = dict(transform)
        preset = over.pop("preset", "val")
        if preset not in PRESETS:
            raise ValueError("transform: preset %r: want 'val' or 'train'" % (preset,))
        params = dict(PRESETS[preset])
        known = set(_SIZES) | set(_RANGES) | {"flip", "normalize"}
        for k in over:
            if k not in known:
                raise ValueError("transform: unknown parameter %r (known: %s)" % (k, ", ".join(sorted(known | {"preset"}))))
        params.update(over)
    else:
        raise ValueError("transform=%r: want 'val', 'train' or a dict of parameters" % (transform,))
    flags = []
    for k, flag in _SIZES.items():
        if k in params:
            v = params[k]
            if not isinstance(v, int) or v < 1:
                raise ValueError("transform: %s=%r: want a positive integer" % (k, v))
            flags += [flag, str(v)]
    if "random_resized_crop" in params:
        for k, (lo_flag, hi_flag) in _RANGES.items():
            lo, hi = params.get(k, PRESETS["train"][k])
            if not 0 < lo <= hi:
                raise ValueError("transform: %s=%r: want 0 < low <= high" % (k, params.get(k)))
            flags += [lo_flag, repr(float(lo)), hi_flag, repr(float(hi))]
    flip = params.get("flip", 0)
    if not isinstance(flip, (int, float)) or not 0 <= flip <= 1:
        raise ValueError("transform: flip=%r: want a probability in [0, 1]" % (flip,))
    if flip:
        flags += ["-flip", repr(float(flip))]
    norm = params.get("normalize", "none")
    if norm in (None, False):
        norm = "none"
    if norm not in ("none", "imagenet"):
        raise ValueError("transform: normalize=%r: want 'imagenet' or 'none'" % (norm,))
    flags += ["-normalize", norm]
    return flags


def _distributed():
    """(rank, world size) from torch.distributed when it is initialised, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except RuntimeError:
        return None
    return None


def _torch_module():
    import torch

    return torch


def _want_torch(tensors):
    if tensors == "numpy":
        return False
    if tensors == "torch":
        return True
    if tensors != "auto":
        raise ValueError("tensors=%r: want 'auto', 'torch' or 'numpy'" % (tensors,))
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _check_prefetch(prefetch):
    if prefetch is not None and (not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 1):
        raise ValueError("prefetch=%r: want a positive integer, or None (sized from the batch)" % (prefetch,))


def rank_count(samples, world_size, drop_last, start=0):
    """Samples one rank reads of an epoch of ``samples`` from global offset
    ``start``, as DistributedSampler deals them (psiflow's source.Share):
    the remainder padded (ceil) or, with drop_last, cut (floor)."""
    left = max(samples - start, 0)
    if drop_last:
        return left // world_size
    return -(-left // world_size)


class DataLoader:
    """Batches of an image folder for a PyTorch training loop, read, decoded and
    batched by ``psiflow serve`` under the cgroup's memory limit.

    DataLoader(root, batch_size=64, shuffle=True, seed=0, transform="val",
               drop_last=False, num_workers=None, return_keys=False, ...)

    root: an ImageFolder layout (root/<class>/<image>); labels are the class
    indices, as torchvision's ImageFolder gives them.
    shuffle, seed: a permutation of the whole folder per (seed, epoch), then
    sharded by rank, as DistributedSampler; every epoch a different order.
    transform: "val" (Resize 256, CenterCrop 224: uint8 CHW), "train"
    (RandomResizedCrop 224, RandomHorizontalFlip, Normalize with ImageNet's mean
    and std: float32 CHW; each sample's crop and flip drawn from (seed, epoch,
    its index), so a resumed epoch gets the same augmentation), or a dict of
    parameters over a preset: {"resize": 160, "crop": 128},
    {"preset": "train", "normalize": "none"} (uint8, normalise on the GPU).
    drop_last: both of PyTorch's: each rank's share is cut to the same count
    (DistributedSampler's drop_last; else padded by repeating the epoch's first
    samples) and the last short batch is dropped (DataLoader's drop_last).
    num_workers: decode workers (goroutines, not processes); None: one a core.
    return_keys: yield (images, labels, keys), the keys being file paths.
    rank, world_size: default torch.distributed's when it is initialised, else
    RANK and WORLD_SIZE from the environment (read by psiflow serve).
    prefetch: batches outstanding at once (the shared-memory ring's slots);
    None (the default): psiflow sizes the ring from the first batch, as many
    slots as fit in 64 MiB, 2 to 4 (4 of the val transform's uint8 batches of
    64, 2 of the train transform's float32 ones: measured as fast as 4 there,
    and 77 MB smaller).
    tensors: "auto" (torch tensors when torch imports, else numpy), "torch", "numpy".
    pin_memory: as PyTorch's: batches in page-locked memory, so that
    ``x.cuda(non_blocking=True)`` is an asynchronous DMA. psiflow registers its
    shared-memory ring with CUDA once per psiflow serve (cudaHostRegister) instead of
    copying each batch into pinned memory: the copy to the GPU reads the bytes
    psiflow wrote. A slot goes back to psiflow only after the copies enqueued
    from it (on the current stream) have completed. Without CUDA it warns, as
    PyTorch does, and the batches are not pinned.
    device: None or "cpu" (batches on the host), or a CUDA device ("cuda",
    "cuda:1", a torch.device): each batch is copied there from the registered
    ring with non_blocking=True and yielded on the device; no CUDA is an error.
    serve_args: more ``psiflow serve`` flags.
    pipeline, set: DataLoader(pipeline="FILE.yaml", set={"source.dir": "out/pets",
    "stages.1.size": 32}) runs a pipeline file whose sink is of kind torch
    (``psiflow run FILE -set KEY=VALUE``) instead of an image folder; the file says
    the data, transform and batch size, and each iteration runs it once (its
    epochs). It has no plan: len(), set_epoch and state_dict are for root=.

    Iterating runs one epoch; without set_epoch the next iteration runs the next
    epoch. One psiflow serve runs every epoch of the loader: between epochs it
    waits, its ring and its sample cache (serve_args=["-cache", "decoded"])
    kept, for the next iteration to ask for its epoch (set_epoch and
    load_state_dict choose which); an iteration left before its epoch's end
    stops it, and the next one starts another. close() stops it. Each batch is a view of shared memory, valid until the next batch is
    asked for: copy (or move to the GPU) what must outlive the step.
    state_dict() and load_state_dict() resume exactly, as torchdata's
    StatefulDataLoader, also under another world size.
    """

    def __init__(self, root=None, batch_size=64, shuffle=True, seed=0, transform="val", drop_last=False,
                 num_workers=None, return_keys=False, rank=None, world_size=None, prefetch=None,
                 tensors="auto", psiflow_bin=None, serve_args=(), start_timeout=60.0, pin_memory=False,
                 device=None, pipeline=None, set=None):
        self._pipeline = None
        if pipeline is not None:
            self._init_pipeline(root, pipeline, set, batch_size, shuffle, seed, transform, drop_last, num_workers,
                                return_keys, rank, world_size, prefetch, tensors, psiflow_bin, serve_args,
                                start_timeout, pin_memory, device)
            return
        if set is not None:
            raise ValueError("set= overrides a pipeline file's keys: give pipeline= with it")
        if root is None:
            raise ValueError("DataLoader needs root, an image folder, or pipeline, a pipeline file")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size=%r: want a positive integer" % (batch_size,))
        if not isinstance(seed, int) or seed < 0:
            raise ValueError("seed=%r: want a non-negative integer" % (seed,))
        if num_workers is not None and (not isinstance(num_workers, int) or num_workers < 1):
            raise ValueError("num_workers=%r: want a positive integer (decode workers) or None" % (num_workers,))
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and not (0 <= rank < world_size):
            raise ValueError("rank %r of world_size %r is out of range" % (rank, world_size))
        self.root = os.fspath(root)
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self.num_workers = num_workers
        self.return_keys = bool(return_keys)
        _check_prefetch(prefetch)
        self.prefetch = prefetch
        self.start_timeout = start_timeout
        self._transform = transform_flags(transform)
        self._bin = _binary.find(psiflow_bin)
        self._torch = _want_torch(tensors)
        self.pin_memory = bool(pin_memory)
        self.device = _pin.parse_device(device)
        if self.device is not None and not self._torch:
            raise ValueError("device=%r needs torch tensors, not tensors=%r" % (device, tensors))
        self._pinning = self._pin_check(device)
        self._serve_args = list(serve_args)
        self._sharding = (rank, world_size) if world_size is not None else _distributed()
        self._epoch = 0          # the epoch the next iteration runs
        self._resume = None      # global offset to resume self._epoch at (load_state_dict)
        self._plan = None        # the last plan psiflow sent (samples, rank, world size, ...)
        self._consumed = None    # global offset reached in self._epoch, None before it starts
        self._serve = None       # the psiflow serve of this loader's epochs (client.Loader), or None
        self._serve_at = None    # the (epoch, start) it runs; None: idle, its last epoch ended
        self._serve_fresh = False  # no batch of that epoch was taken yet (started by len())
        self._state_samples = None  # the dataset size a loaded state is for
        self._running = None

    def _init_pipeline(self, root, pipeline, sets, batch_size, shuffle, seed, transform, drop_last, num_workers,
                       return_keys, rank, world_size, prefetch, tensors, psiflow_bin, serve_args, start_timeout,
                       pin_memory, device):
        """DataLoader(pipeline=FILE, set={...}): the file says the pipeline."""
        given = [name for name, v, default in [
            ("root", root, None), ("batch_size", batch_size, 64), ("shuffle", shuffle, True), ("seed", seed, 0),
            ("transform", transform, "val"), ("drop_last", drop_last, False), ("num_workers", num_workers, None),
            ("rank", rank, None), ("world_size", world_size, None), ("serve_args", tuple(serve_args), ()),
            ("pin_memory", pin_memory, False), ("device", device, None)] if v != default]
        if given:
            raise ValueError("DataLoader(pipeline=%r): %s: the pipeline file says these; override its keys with "
                             "set={KEY: VALUE} (psiflow run -set: epochs, source.KEY, stages.N.KEY, ...)"
                             % (os.fspath(pipeline), ", ".join(given)))
        self._pipeline = os.fspath(pipeline)
        if not os.path.isfile(self._pipeline):
            raise ValueError("DataLoader(pipeline=%r): no such file" % (self._pipeline,))
        if sets is not None and not isinstance(sets, dict):
            raise ValueError("set=%r: want a dict of pipeline keys to values" % (sets,))
        flags = []
        for k, v in (sets or {}).items():
            if not isinstance(k, str) or not k or "=" in k:
                raise ValueError("set: key %r: want a pipeline key such as 'source.dir' or 'stages.1.size'" % (k,))
            if k in ("sink.socket", "sink.slots"):
                raise ValueError("set: %s is the DataLoader's (prefetch sets sink.slots)" % k)
            if isinstance(v, bool):
                v = "true" if v else "false"
            flags += ["-set", "%s=%s" % (k, v)]
        if return_keys:
            flags += ["-set", "sink.keys=true"]
        _check_prefetch(prefetch)
        self._sets = flags
        self.return_keys = bool(return_keys)
        self.prefetch = prefetch
        self.start_timeout = start_timeout
        self._bin = _binary.find(psiflow_bin)
        self._torch = _want_torch(tensors)
        self._running = None
        self._serve, self._serve_at, self._serve_fresh = None, None, False

    def _iterate_pipeline(self):
        loader = Loader(psiflow_bin=self._bin, pipeline=self._pipeline, args=self._sets, slots=self.prefetch,
                        torch=self._torch, start_timeout=self.start_timeout)
        finished = False
        try:
            for b in loader:
                if self.return_keys:
                    yield b.data, b.labels, b.keys
                else:
                    yield b.data, b.labels
            finished = True
        finally:
            rc = loader.close()
        if finished and rc != 0:
            raise PsiflowError("psiflow run %s exited with status %s: %s"
                               % (self._pipeline, rc, loader.stderr().strip()[-2000:]))

    def _no_plan(self, what):
        if self._pipeline is not None:
            raise TypeError("%s of DataLoader(pipeline=%r): a pipeline file's run has no plan to count or resume; "
                            "use DataLoader(root, ...) for len, set_epoch and state_dict" % (what, self._pipeline))

    def _pin_check(self, device):
        """Whether the ring is registered with CUDA (pin_memory=True or a CUDA
        device, with CUDA there); says why not."""
        if not self.pin_memory and self.device is None:
            return False
        try:
            import torch
        except ImportError:
            torch = None
        why = _pin.cuda_unavailable(torch)
        if why is None:
            return True
        if self.device is not None:
            raise RuntimeError("device=%r: CUDA is not available here: %s" % (device, why))
        warnings.warn("psiflow.DataLoader: pin_memory=True, but batches are not pinned: %s "
                      "(they stay views of psiflow's shared memory)" % why, stacklevel=3)
        return False

    # -- psiflow serve ------------------------------------------------------
    def _serve_cmd(self, epoch, start):
        # -ordered: batches hold the epoch's order exactly, so the samples
        # delivered are always a prefix of the rank's share and the position
        # (a count) resumes exactly. -consumer-epochs: after each epoch psiflow
        # serve waits for the next iteration to ask for its (epoch, start), so
        # one process, its sample cache and its ring serve every epoch.
        args = ["-batch", str(self.batch_size), "-consumer-epochs", "-epoch", str(epoch), "-start", str(start),
                "-seed", str(self.seed), "-ordered", "-plan"]
        if self.shuffle:
            args.append("-shuffle")
        if self.drop_last:
            args.append("-drop-last")
        if self.num_workers is not None:
            args += ["-workers", str(self.num_workers)]
        if self.return_keys:
            args.append("-keys")
        if self._sharding is not None:
            args += ["-rank", str(self._sharding[0]), "-world-size", str(self._sharding[1])]
        return args + self._transform + self._serve_args

    def _start(self):
        """The psiflow serve running the next iteration's epoch, its plan in
        self._plan: the one started for it by len(), else the one that ended
        the last epoch, asked for this one, else a new one."""
        epoch, start = self._epoch, self._resume or 0
        serve = self._serve
        if serve is not None and self._serve_at is not None:
            if not (self._serve_fresh and self._serve_at == (epoch, start)):
                # In the middle of another epoch (or at its start, for len()):
                # its batches are on their way, so it cannot change course.
                self._drop_serve()
                serve = None
        try:
            if serve is None:
                pin = _pin.CudaPin(_torch_module(), self.device) if self._pinning else None
                serve = Loader(data=self.root, psiflow_bin=self._bin, args=self._serve_cmd(epoch, start),
                               slots=self.prefetch, torch=self._torch, start_timeout=self.start_timeout, pin=pin)
                self._serve = serve
            elif self._serve_at is None:
                serve.client.next_epoch(epoch, start)  # idle between epochs: one process for all of them
            plan = serve.client.wait_plan()
            if plan.get("epoch") != epoch or plan.get("start") != start:
                raise PsiflowError("psiflow planned epoch %r from %r, asked for epoch %d from %d"
                                   % (plan.get("epoch"), plan.get("start"), epoch, start))
            self._check_samples(plan)
        except BaseException:
            if self._serve is serve:
                self._drop_serve()
            elif serve is not None:
                serve.close()
            raise
        self._plan = plan
        self._serve_at, self._serve_fresh = (epoch, start), True
        return serve

    def _check_samples(self, plan):
        want = self._state_samples
        if want is not None and plan["samples"] != want:
            raise PsiflowError("the loaded state is for %d samples, %s has %d now" % (want, self.root, plan["samples"]))

    def _drop_serve(self):
        """Stops the psiflow serve this loader holds, if any; returns its exit status."""
        serve, self._serve, self._serve_at = self._serve, None, None
        if serve is not None:
            return serve.close()
        return None

    # -- the PyTorch vocabulary ----------------------------------------------
    def __len__(self):
        """Batches one rank gets in a whole epoch (as torch's DataLoader: a
        resumed epoch delivers fewer)."""
        self._no_plan("len()")
        if self._plan is None:
            self._start()
        p = self._plan
        count = rank_count(p["samples"], p["world_size"], self.drop_last)
        return count // self.batch_size if self.drop_last else -(-count // self.batch_size)

    def set_epoch(self, epoch):
        """Runs epoch ``epoch`` next (its shuffle), as DistributedSampler.set_epoch.
        A position loaded with load_state_dict for another epoch is dropped."""
        self._no_plan("set_epoch()")
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError("set_epoch(%r): want a non-negative integer" % (epoch,))
        if epoch != self._epoch:
            self._epoch, self._resume, self._consumed = epoch, None, None

    @property
    def epoch(self):
        """The epoch the next (or the running) iteration runs."""
        return self._epoch

    def __iter__(self):
        if self._running is not None:
            self._running.close()
        it = self._iterate_pipeline() if self._pipeline is not None else self._iterate()
        self._running = it
        return it

    def _iterate(self):
        loader = self._start()
        self._serve_fresh = False
        plan = self._plan
        epoch, start = plan["epoch"], plan["start"]
        self._resume = None
        self._consumed = start
        world = plan["world_size"]
        finished = False
        try:
            for b in loader:
                n = len(b)
                if self.drop_last and n < self.batch_size:
                    continue  # DataLoader's drop_last: the short last batch is not yielded
                self._consumed += n * world
                data, labels = b.data, b.labels
                if self.device is not None:
                    data = data.to(self.device, non_blocking=True)
                    labels = labels.to(self.device, non_blocking=True)
                    b._fence = loader.client._pin.fence()  # the slot goes back after this copy
                elif self._pinning and self._torch:
                    labels = labels.pin_memory()  # the data is pinned already: it lies in the ring
                if self.return_keys:
                    yield data, labels, b.keys
                else:
                    yield data, labels
            finished = True
        finally:
            idle = finished and loader.client.epoch_ended and self._serve is loader
            if idle:
                self._serve_at = None  # it waits for the next iteration's epoch
            elif self._serve is loader:
                rc = self._drop_serve()
            else:
                rc = loader.close()
        if finished:
            if not idle and rc != 0:
                raise PsiflowError("psiflow serve exited with status %s: %s" % (rc, loader.stderr().strip()[-2000:]))
            self._epoch, self._consumed = epoch + 1, None

    def state_dict(self):
        """The position: the epoch and the global offset reached in it (samples
        consumed by all ranks together, in lockstep), taken after the batches
        yielded so far, with what it is only valid with."""
        self._no_plan("state_dict()")
        if self._consumed is None:
            epoch, consumed = self._epoch, self._resume or 0
        else:
            epoch, consumed = self._epoch, self._consumed
        plan = self._plan or {}
        return {"version": STATE_VERSION, "epoch": epoch, "consumed": consumed, "seed": self.seed,
                "shuffle": self.shuffle, "samples": plan.get("samples"), "world_size": plan.get("world_size"),
                "rank": plan.get("rank"), "batch_size": self.batch_size, "drop_last": self.drop_last}

    def load_state_dict(self, state):
        """Resumes at ``state`` (from state_dict, maybe of another rank or world
        size at the same step): the next iteration delivers the rest of that
        epoch, in the same order, then the following epochs."""
        self._no_plan("load_state_dict()")
        if state.get("version") != STATE_VERSION:
            raise ValueError("state version %r, this psiflow reads %d" % (state.get("version"), STATE_VERSION))
        for k in ("seed", "shuffle"):
            if state.get(k) != getattr(self, k):
                raise ValueError("state has %s=%r, this DataLoader %r: the order would differ" % (k, state.get(k), getattr(self, k)))
        epoch, consumed = state.get("epoch"), state.get("consumed")
        if not isinstance(epoch, int) or epoch < 0 or not isinstance(consumed, int) or consumed < 0:
            raise ValueError("state: epoch %r, consumed %r: want non-negative integers" % (epoch, consumed))
        if self._running is not None:
            self._running.close()
            self._running = None
        # A finished epoch (consumed at or past its end) resumes as an empty
        # iteration, then the next epoch: as an uninterrupted run would go on.
        self._state_samples = state.get("samples")
        self._epoch, self._resume, self._consumed, self._plan = epoch, consumed, None, None

    def close(self):
        """Stops psiflow serve if one runs."""
        if self._running is not None:
            self._running.close()
            self._running = None
        self._drop_serve()

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
