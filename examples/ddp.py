#!/usr/bin/env python3
"""Distributed data-parallel training fed by fusionflow: each rank reads its
own shard (torch.utils.data.DistributedSampler's split), taken from $RANK and
$WORLD_SIZE, which torchrun sets.

    torchrun --standalone --nproc_per_node=2 examples/ddp.py --data build/demo-data --steps 50
    # torchrun may be spelled: python3 -m torch.distributed.run ...

Runs on the CPU with the gloo backend (use nccl and device_ids on GPUs). Run
without torchrun it is one process of a world of one. torchrun only sets the
environment; where it fails (torch 1.13 on Python 3.11: "'NoneType' object has
no attribute 'get'"), start the ranks by hand:

    for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        python3 examples/ddp.py --data build/demo-data & done; wait
"""
import argparse
import os
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="build/demo-data", help="ImageFolder root")
    p.add_argument("--steps", type=int, default=50, help="training steps per rank")
    p.add_argument("--batch-size", type=int, default=32, help="images per batch per rank")
    p.add_argument("--threads", type=int, default=1, help="fusionflow threads per rank")
    p.add_argument("--image-size", type=int, default=64, help="crop side, pixels")
    p.add_argument("--seed", type=int, default=0, help="the same on every rank: the shards must agree")
    p.add_argument("--backend", default="gloo", help="torch.distributed backend")
    args = p.parse_args(argv)

    import torch
    import torch.distributed as dist
    import torchvision
    from torch.nn.parallel import DistributedDataParallel

    import fusionflow

    if "RANK" not in os.environ:  # not under torchrun: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29512"))
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    pipeline = (f"decode | random_resized_crop(size={args.image_size}) | random_horizontal_flip"
                " | normalize(mean=imagenet, std=imagenet)")
    # rank and world_size are left to $RANK / $WORLD_SIZE, like DistributedSampler's defaults.
    loader = fusionflow.Loader(args.data, pipeline, batch_size=args.batch_size, shuffle=True, drop_last=True,
                               seed=args.seed, num_threads=args.threads)
    num_classes = len([d for d in os.scandir(args.data) if d.is_dir()])
    model = DistributedDataParallel(torchvision.models.resnet18(num_classes=num_classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * args.batch_size * world / 256, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    if rank == 0:
        print(f"world {world}: each rank {loader.num_samples} of {loader.dataset_size} samples, "
              f"{len(loader)} batches/epoch", flush=True)

    step, epoch, wait = 0, 0, 0.0
    start = time.perf_counter()
    with loader:
        while step < args.steps:
            loader.set_epoch(epoch)  # every rank the same epoch: disjoint shards of one permutation
            t0 = time.perf_counter()
            for images, labels in loader:
                wait += time.perf_counter() - t0
                loss = criterion(model(images), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()  # gradients are averaged over the ranks here
                optimizer.step()
                del images
                step += 1
                if rank == 0 and (step % 10 == 0 or step == args.steps):
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
                if step == args.steps:
                    break
                t0 = time.perf_counter()
            epoch += 1
        checkpoint = {"loader": loader.state_dict()}  # the same on every rank; resume with load_state_dict
    elapsed = time.perf_counter() - start
    images = torch.tensor([step * args.batch_size], dtype=torch.float64)
    dist.all_reduce(images)
    if rank == 0:
        print(f"{world} ranks: {images.item() / elapsed:.1f} images/s, data wait {100 * wait / elapsed:.1f}% "
              f"on rank 0; loader state {checkpoint['loader']['epoch']}:{checkpoint['loader']['batch']}",
              flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
