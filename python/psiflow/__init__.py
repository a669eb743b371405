"""psiflow's PyTorch consumer: batches from a psiflow graph as numpy arrays or
torch tensors, read in place from shared memory (no copy of the pixel bytes).

    import psiflow
    with psiflow.Loader(data="/data/imagenet/train", psiflow_bin="bin/psiflow") as loader:
        for images, labels in loader:          # uint8 [64, 3, 224, 224], int64 [64]
            train_step(images, labels)

Loader starts ``psiflow serve`` and connects to it; Client connects to a sink
someone else started (``psiflow serve -socket PATH``, or a graph with a
sink.Torch). Each batch is a view of one slot of a shared-memory ring that
psiflow fills; it is handed back when the next batch is asked for (or by
batch.release() when auto_release=False), and psiflow waits while all slots
are held, so a slow training loop slows the loader instead of growing memory.
A failure on the Go side is raised here as PsiflowError with its message.

Needs numpy; torch is optional (torch=True yields torch tensors made with
torch.from_numpy, sharing the same memory).
"""

from .client import Batch, Client, Loader, PsiflowError, PROTOCOL_VERSION
from .loader import DataLoader

__all__ = ["Batch", "Client", "DataLoader", "Loader", "PsiflowError", "PROTOCOL_VERSION"]
