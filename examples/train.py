#!/usr/bin/env python3
"""Train torchvision's ResNet-18 on an image folder, fed by fusionflow or, with
--torchvision, by torch's DataLoader with torchvision transforms; print the
throughput, the share of time the training loop waited for data, and the loss.

    make demo-data                      # build/demo-data: 2,000 JPEGs, 10 classes
    python3 examples/train.py --data build/demo-data --steps 300
    python3 examples/train.py --data build/demo-data --steps 300 --torchvision

Both feed the same augmentation (random resized crop, horizontal flip,
ImageNet normalization) at --image-size with --threads CPU workers; on a
CPU-only machine keep the image size small (64 by default) so a run takes
minutes, not hours.
"""
import argparse
import itertools
import os
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default=os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                   "build", "demo-data")),
                   help="ImageFolder root (one sub-folder per class)")
    p.add_argument("--device", default="cpu",
                   help="fusionflow's offload device: cpu, auto, cuda:N or emu:N")
    p.add_argument("--steps", type=int, default=300, help="training steps (batches)")
    p.add_argument("--batch-size", type=int, default=32, help="images per batch")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="data threads (fusionflow) or DataLoader workers (--torchvision)")
    p.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads for training; 0 = leave")
    p.add_argument("--image-size", type=int, default=64, help="side of the random resized crop, pixels")
    p.add_argument("--lr", type=float, default=argparse.SUPPRESS,
                   help="SGD learning rate (default: 0.1 * batch size / 256, the linear scaling rule)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data order and augmentation, and of the model")
    p.add_argument("--prefetch", type=int, default=2, help="batches prepared ahead (per worker for --torchvision)")
    p.add_argument("--log-every", type=int, default=20, help="print the loss every N steps")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the throughput")
    p.add_argument("--torchvision", action="store_true", help="feed with torch DataLoader + torchvision transforms")
    return p.parse_args(argv)


def fusionflow_batches(args):
    """Endless (images, labels) from fusionflow, epoch after epoch."""
    import fusionflow

    pipeline = (f"decode | random_resized_crop(size={args.image_size}) | random_horizontal_flip"
                " | normalize(mean=imagenet, std=imagenet)")
    loader = fusionflow.Loader(args.data, pipeline, batch_size=args.batch_size, shuffle=True, drop_last=True,
                               seed=args.seed, num_threads=args.threads, prefetch=args.prefetch, device=args.device)
    print(f"fusionflow {fusionflow.__version__}: {loader.dataset_size} images, {len(loader)} batches/epoch, "
          f"{args.threads} threads")

    def batches():
        with loader:
            for epoch in itertools.count():
                loader.set_epoch(epoch)
                yield from loader

    return batches(), loader


def torchvision_batches(args):
    """Endless (images, labels) from torch's DataLoader with the torchvision pipeline."""
    import torch
    import torchvision
    from torchvision import transforms

    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
    ])
    dataset = torchvision.datasets.ImageFolder(args.data, transform=transform)
    generator = torch.Generator()
    generator.manual_seed(args.seed)
    workers = args.threads
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         num_workers=workers, persistent_workers=workers > 0,
                                         prefetch_factor=args.prefetch if workers > 0 else 2, generator=generator)
    print(f"torchvision {torchvision.__version__} DataLoader: {len(dataset)} images, {len(loader)} batches/epoch, "
          f"{workers} workers")

    def batches():
        for _ in itertools.count():
            yield from loader

    return batches(), None


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"train.py: no data folder {args.data} (run `make demo` to make the demo data, or pass --data DIR)")
    import torch
    import torchvision

    torch.manual_seed(args.seed)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    num_classes = len([d for d in os.scandir(args.data) if d.is_dir()])
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.train()
    lr = getattr(args, "lr", 0.1 * args.batch_size / 256)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()

    if args.torchvision:
        batches, ff_loader = torchvision_batches(args)
    else:
        batches, ff_loader = fusionflow_batches(args)
    print(f"ResNet-18, {num_classes} classes, {args.image_size}x{args.image_size}, batch {args.batch_size}, "
          f"{args.steps} steps, torch threads {torch.get_num_threads()}")

    warmup = args.warmup if args.steps > args.warmup else 0
    wait_s = 0.0
    images_seen = 0
    recent = []
    start = time.perf_counter()
    t0 = start
    for step in range(args.steps):
        images, labels = next(batches)
        t1 = time.perf_counter()
        loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        value = loss.item()
        del images  # give the batch back before asking for the next (zero copy)
        t2 = time.perf_counter()
        if step == warmup:  # the steps before are left out of the throughput
            wait_s = 0.0
            images_seen = 0
            start = t0
        wait_s += t1 - t0
        images_seen += len(labels)
        recent = (recent + [value])[-args.log_every:]
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            print(f"step {step + 1:5d}  loss {sum(recent) / len(recent):.4f}", flush=True)
        t0 = t2
    elapsed = time.perf_counter() - start
    feeder = "torchvision" if args.torchvision else "fusionflow"
    print(f"{feeder}: {images_seen / elapsed:.1f} images/s over {args.steps - warmup} steps, data wait "
          f"{100 * wait_s / elapsed:.1f}% of {elapsed:.2f} s, final loss {sum(recent) / len(recent):.4f}")
    if ff_loader is not None and not ff_loader.closed:
        s = ff_loader.stats()
        per = 1e6 * s["samples"] if s["samples"] else 1
        print(f"fusionflow workers: read {s['read_ns'] / per:.2f} ms, decode {s['decode_ns'] / per:.2f} ms, "
              f"ops {s['ops_ns'] / per:.2f} ms per image")
    batches.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
