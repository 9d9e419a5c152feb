#!/usr/bin/env python3
"""Train torchvision's ResNet-18 with Ray Train, fed by Ray Data and fusionflow.ray.Augment.

    make demo-data                                   # build/demo-data: 2,000 JPEGs, 10 classes
    python3 examples/ray_train.py --data build/demo-data --workers 2 --epochs 2
    python3 examples/ray_train.py --address auto ... # on a running cluster (`ray start`)

Ray Data reads the encoded files (read_binary_files); --augment-actors actors of
--augment-threads threads each decode and augment them in fusionflow's C library
(random resized crop, horizontal flip) and hand out uint8 images, a quarter of
float32's bytes in the object store; Ray Train splits the stream over --workers
TorchTrainer workers, which normalise on their device (GPU with --gpu) exactly as
fusionflow's Loader would. Each epoch draws afresh: rank 0 sets a fusionflow.ray.Epoch
before the epoch starts, and the Augment actors of that epoch read it.
"""
import argparse
import json
import math
import os
import sys
import time

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                   "build", "demo-data")),
                   help="ImageFolder root (one sub-folder per class), visible from every node")
    p.add_argument("--address", default=None, help="Ray cluster to join (auto, ray://...); default: a local one")
    p.add_argument("--workers", type=int, default=2, help="TorchTrainer workers")
    p.add_argument("--worker-cpus", type=float, default=1.0, help="CPUs each trainer worker reserves")
    p.add_argument("--gpu", action="store_true", help="one GPU per trainer worker")
    p.add_argument("--augment-actors", type=int, default=1, help="Augment actors (map_batches' pool size)")
    p.add_argument("--augment-threads", type=int, default=2, help="CPUs (and C threads) of each Augment actor")
    p.add_argument("--epochs", type=int, default=1, help="epochs over the data")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps per worker (0: run the epochs)")
    p.add_argument("--batch-size", type=int, default=32, help="images per step and worker")
    p.add_argument("--image-size", type=int, default=64, help="side of the random resized crop, pixels")
    p.add_argument("--seed", type=int, default=0, help="seed of the augmentation draws and of the model")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--summary", default=None, help="write rank 0's figures to this JSON file")
    return p.parse_args(argv)


def train_loop(config):
    """One TorchTrainer worker: its shard of the augmented stream, normalised on its device."""
    import torch
    import torchvision

    import ray.train
    import ray.train.collective
    import ray.train.torch

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    torch.manual_seed(config["seed"])
    device = ray.train.torch.get_device()
    model = ray.train.torch.prepare_model(torchvision.models.resnet18(num_classes=config["num_classes"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    shard = ray.train.get_dataset_shard("train")
    steps, images_seen, loss_value, start = 0, 0, float("nan"), time.perf_counter()
    for epoch in range(config["epochs"]):
        if rank == 0:
            config["epoch"].set(epoch)  # the Augment actors of this epoch's run read it when they start
        ray.train.collective.barrier()
        for batch in shard.iter_torch_batches(batch_size=config["batch_size"], drop_last=True):
            # (B, 3, H, W) uint8 -> the Loader's float32 values, on the device: the same
            # operations normalize does in fusionflow, so the same bits.
            images = batch["image"].to(device, non_blocking=True).float().div_(255).sub_(mean).div_(std)
            labels = batch["label"].to(device, non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
            steps += 1
            images_seen += len(labels)
            if rank == 0 and steps % 10 == 0:
                print(f"epoch {epoch} step {steps:5d}  loss {loss_value:.4f}", flush=True)
            if config["steps"] and steps >= config["steps"]:
                break
        if config["steps"] and steps >= config["steps"]:
            break
    elapsed = time.perf_counter() - start
    summary = {"rank": rank, "world_size": ctx.get_world_size(), "steps": steps, "images": images_seen,
               "images_per_s": images_seen / elapsed if elapsed else 0.0, "loss": loss_value,
               "image_shape": list(images.shape[1:]) if steps else None}
    ray.train.report({k: v for k, v in summary.items() if k != "image_shape"})
    if rank == 0:
        print(f"rank 0: {steps} steps, {images_seen} images, {summary['images_per_s']:.1f} images/s, "
              f"final loss {loss_value:.4f}", flush=True)
        if config["summary"]:
            with open(config["summary"], "w") as f:
                json.dump(summary, f)


def main(argv=None):
    args = parse_args(argv)
    data = os.path.abspath(args.data)  # trainer workers run in their own folders
    if not os.path.isdir(data):
        sys.exit(f"ray_train.py: no data folder {data} (run `make demo-data`, or pass --data DIR)")
    import ray
    import ray.train
    from ray.train.torch import TorchTrainer

    import fusionflow.ray

    if not ray.is_initialized() and args.address:
        ray.init(address=args.address)
    elif not ray.is_initialized():
        # A local cluster with CPUs for everything at once (trainer workers, Augment actors, the
        # read tasks), more than the cores if need be, or Ray Data would wait for CPUs forever.
        need = math.ceil(args.workers * args.worker_cpus + args.augment_actors * args.augment_threads + 1)
        cores = len(os.sched_getaffinity(0))
        if need > cores:
            print(f"ray_train.py: a local cluster of {need} CPUs on {cores} cores", flush=True)
        ray.init(num_cpus=max(need, cores))
    num_classes = len([d for d in os.scandir(data) if d.is_dir()])
    pipeline = (f"decode | random_resized_crop(size={args.image_size}) | random_horizontal_flip"
                " | normalize(mean=imagenet, std=imagenet)")
    epoch = fusionflow.ray.Epoch(0)
    train = ray.data.read_binary_files(data, include_paths=True).map_batches(
        fusionflow.ray.Augment,
        fn_constructor_kwargs=dict(pipeline=pipeline, seed=args.seed, epoch=epoch, source=f"imagefolder:{data}",
                                   layout="chw"),  # uint8 (3, H, W): the normalize step runs on the trainer
        compute=ray.data.ActorPoolStrategy(size=args.augment_actors), num_cpus=args.augment_threads,
        batch_size=args.batch_size)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=dict(num_classes=num_classes, seed=args.seed, lr=args.lr, epochs=args.epochs,
                               steps=args.steps, batch_size=args.batch_size, epoch=epoch, summary=args.summary),
        scaling_config=ray.train.ScalingConfig(num_workers=args.workers, use_gpu=args.gpu,
                                               resources_per_worker={"CPU": args.worker_cpus}),
        datasets={"train": train})
    print(f"ResNet-18, {num_classes} classes, {args.image_size}x{args.image_size}, batch {args.batch_size} x "
          f"{args.workers} workers; {args.augment_actors} Augment actor(s) x {args.augment_threads} threads",
          flush=True)
    trainer.fit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
