"""One rank of the torchrun test (python/pkgtest TestTorchrun), launched with
the python of a virtual environment holding the installed package:

    .venv/bin/python -m torch.distributed.run --nnodes 1 --rdzv_backend c10d --rdzv_endpoint localhost:0 \
        --nproc_per_node 2 --max_restarts 1 \
        --redirects 1 --tee 1 python/tests/torchrun_worker.py DATA CKPT

Each rank reads epochs 0-2 with a psiflow.DataLoader whose rank and world size
come from torch.distributed (gloo on CPU). At the start of epoch 2 (the ranks
meet there: one that lagged would otherwise have nothing to resume from) and
after every batch of it, it writes its loader's state_dict and the keys it has
trained on to CKPT/rank<R>.json (atomically, as a training checkpoint would). On the first attempt rank 1 kills
itself with SIGKILL after two batches of epoch 2; torchrun restarts the group,
every rank loads its last checkpoint and completes the epoch. Rank 0 then checks,
over all ranks: every file exactly once in each epoch, a different order in every
epoch, and epoch 2 exactly once across the kill. It prints TORCHRUN-OK at the end.
"""

import json
import os
import signal
import sys

import torch.distributed as dist

import psiflow  # the installed package, with its own binary
import psiflow.loader


def checkpoint(path, saved):
    """Writes saved to path atomically, as a training checkpoint would."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(saved, f)
    os.replace(tmp, path)


def main():
    data, ckpt = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    loader = psiflow.DataLoader(data, batch_size=3, shuffle=True, seed=7, return_keys=True,
                                transform={"resize": 40, "crop": 32}, num_workers=1)
    per_rank = psiflow.loader.rank_count(20, world, False)
    assert len(loader) == -(-per_rank // 3), (len(loader), per_rank)
    mine = os.path.join(ckpt, "rank%d.json" % rank)
    if attempt == 0:
        epochs = {}
        for epoch in range(2):
            loader.set_epoch(epoch)
            keys = []
            for images, labels, k in loader:
                assert images.shape[0] == labels.shape[0] == len(k)
                keys += k
            epochs[epoch] = keys
        start_epoch = 2
        # Every rank checkpoints the start of epoch 2, then waits for the others:
        # ranks run their epochs unsynchronised, and under load one can lag
        # epochs behind; when rank 1 killed itself before that rank's first
        # checkpoint, the restarted rank had none to load (FileNotFoundError).
        loader.set_epoch(start_epoch)
        saved = {"epochs": epochs, "trained": [], "state": loader.state_dict()}
        checkpoint(mine, saved)
        dist.barrier()
    else:
        with open(mine) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["state"])
        start_epoch = saved["state"]["epoch"]
        print("rank %d: resumed at epoch %d, offset %d" % (rank, start_epoch, saved["state"]["consumed"]), flush=True)
    for epoch in range(start_epoch, 3):
        loader.set_epoch(epoch)  # the loaded epoch keeps its offset
        batches = 0
        for _images, _labels, k in loader:
            saved["trained"] += k
            saved["state"] = loader.state_dict()
            checkpoint(mine, saved)
            batches += 1
            if attempt == 0 and rank == 1 and batches == 2:
                print("rank 1: killing itself mid-epoch after %d batches" % batches, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
    everything = [None] * world
    dist.all_gather_object(everything, saved)
    if rank == 0:
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(data) for f in fs)
        orders = []
        for epoch in ("0", "1"):
            keys = [k for s in everything for k in s["epochs"][epoch]]
            assert sorted(keys) == files, "epoch %s: %d keys, %d distinct, %d files" % (epoch, len(keys), len(set(keys)), len(files))
            orders.append([s["epochs"][epoch] for s in everything])
        assert orders[0] != orders[1], "epochs 0 and 1 in the same order"
        trained = [k for s in everything for k in s["trained"]]
        assert sorted(trained) == files, "epoch 2 across the kill: %d keys, %d distinct" % (len(trained), len(set(trained)))
        assert attempt == 1, "no restart happened (attempt %d)" % attempt
        print("TORCHRUN-OK world %d, 2 epochs and one killed and resumed, %d files each" % (world, len(files)), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
