"""pin_memory for psiflow's shared-memory ring.

PyTorch cannot make memory that is both shared between processes and pinned
(pytorch#78018), so its DataLoader copies every batch once more, into pinned
memory, on a pin-memory thread. psiflow's batches already lie in one shared
mapping written by the Go side: registering that mapping with CUDA once
(cudaHostRegister, through torch.cuda.cudart()) makes every batch tensor a view
of pinned memory, so ``tensor.cuda(non_blocking=True)`` is a DMA straight from
the bytes psiflow wrote, with no extra copy and no thread.

A copy enqueued with non_blocking=True reads the slot after the call returns,
so a slot goes back to psiflow only once a CUDA event recorded after the copy
has completed (CudaPin.fence); the Client holds the release until then.
"""

import ctypes

# cudaHostRegisterPortable: the memory is pinned for every CUDA context, not only
# the current device's.
HOST_REGISTER_PORTABLE = 1


def cuda_unavailable(torch):
    """Why batches cannot be pinned here (one sentence), or None when CUDA is
    there. torch is the module, or None when it is not installed."""
    if torch is None:
        return "torch is not installed"
    try:
        if torch.cuda.is_available():
            return None
    except Exception as e:  # a broken CUDA install raises here, not at import
        return "torch.cuda.is_available() failed: %s" % e
    built = getattr(torch.version, "cuda", None)
    if not built:
        return "this torch (%s) is built without CUDA" % torch.__version__
    return ("torch.cuda.is_available() is False: no GPU or no driver visible to torch %s (CUDA %s)"
            % (torch.__version__, built))


def _address(mm):
    """The address of a writable mmap's first byte."""
    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view  # release the export so that the mapping can be closed later


class CudaPin:
    """Registers one shared-memory mapping with CUDA and fences the release of
    its slots. device: the torch device the events are recorded on (None: the
    current one)."""

    def __init__(self, torch, device=None):
        self._torch = torch
        self.device = device
        self._addr = None
        self.size = 0

    def register(self, mm):
        """Registers mm (an mmap) with CUDA; raises RuntimeError naming the
        size and CUDA's reason when it refuses."""
        cudart = self._torch.cuda.cudart()
        addr = _address(mm)
        res = cudart.cudaHostRegister(addr, len(mm), HOST_REGISTER_PORTABLE)
        if int(res) != 0:
            raise RuntimeError("cudaHostRegister of the %d-byte shared ring at 0x%x: %s"
                               % (len(mm), addr, cudart.cudaGetErrorString(res)))
        self._addr, self.size = addr, len(mm)
        return addr

    @property
    def address(self):
        """The registered mapping's address (None before register)."""
        return self._addr

    def fence(self, stream=None):
        """A CUDA event recorded now on stream (default: the current stream of
        the device): it completes once the work enqueued before it, the copies
        from a slot among it, has."""
        cuda = self._torch.cuda
        if stream is None:
            stream = cuda.current_stream(self.device)
        ev = cuda.Event()
        ev.record(stream)
        return ev

    @staticmethod
    def done(ev):
        """Whether ev has completed (without waiting)."""
        return ev.query()

    @staticmethod
    def wait(ev):
        """Waits until ev has completed."""
        ev.synchronize()

    def unregister(self):
        """Waits for the device's work (copies may still read the mapping),
        then unregisters it. Does nothing when nothing is registered."""
        if self._addr is None:
            return
        addr, self._addr = self._addr, None
        self._torch.cuda.synchronize(self.device)
        cudart = self._torch.cuda.cudart()
        res = cudart.cudaHostUnregister(addr)
        if int(res) != 0:
            raise RuntimeError("cudaHostUnregister of the shared ring at 0x%x: %s"
                               % (addr, cudart.cudaGetErrorString(res)))


def parse_device(device):
    """The torch.device batches are copied to, or None for the host (None or
    "cpu"); a ValueError names anything else."""
    if device is None:
        return None
    if isinstance(device, str):
        name = device
    elif getattr(device, "type", None) is not None:  # a torch.device
        name = str(device)
    else:
        raise ValueError("device=%r: want None, 'cpu' or a CUDA device ('cuda', 'cuda:N', torch.device('cuda', N))"
                         % (device,))
    if name == "cpu":
        return None
    if not (name == "cuda" or name.startswith("cuda:")):
        raise ValueError("device=%r: want None, 'cpu' or a CUDA device ('cuda', 'cuda:N', torch.device('cuda', N))"
                         % (device,))
    try:
        import torch
    except ImportError:
        raise ValueError("device=%r needs torch, which is not installed" % (device,)) from None
    try:
        return torch.device(name)
    except RuntimeError as e:
        raise ValueError("device=%r: %s" % (device, e)) from None
