#!/usr/bin/env python3
"""Ray Data + fusionflow.ray.Augment against Ray Data + torchvision transforms in
map_batches, on one local Ray cluster, the same pipeline (RandomResizedCrop,
horizontal flip, ImageNet normalisation), side by side in rounds.

    make demo-data
    $(scripts/test-venv.sh) bench/ray_data.py --data build/demo-data --cpus 2 --rounds 3 [--json]

Each configuration runs one whole pass over the folder per round, the driver taking
batches of --batch-size with iter_batches (each pass is a new execution: its actors
and tasks start anew, as each epoch's do). The configurations take turns within a
round, so a change of the machine's load hits them alike; the table gives the median
over the rounds and the spread (min-max) of each figure.

  torchvision-docs   read_images (PIL decodes in the read tasks), then map_batches with
                     a torchvision Compose per image: ToTensor first, then the random
                     resized crop, flip and Normalize on the float tensor (the order of
                     Ray's TorchVisionPreprocessor example); float32 (3, S, S)
  torchvision-pil    the same with the transforms on a PIL image and ToTensor last
                     (torchvision's ImageFolder order): float32 (3, S, S)
  fusionflow-uint8   read_binary_files (no decode), Augment: uint8 (3, S, S), the
                     normalize step left to the trainer
  fusionflow-float32 the same with dtype="float32": the Loader's normalized values
  loader             fusionflow.Loader in the driver on --cpus threads, no Ray in the data
                     path (the cluster idles beside it): the ceiling, float32

images/s: images over the pass's wall time, actor and task start included. CPU µs per
image: the CPU time (user + system) of the driver and every process under it (the
Ray cluster: raylet, GCS, workers, actors), polled from /proc every 50 ms over the
pass, divided by the images; Ray's idle CPU per second is given apart (it is in
every pass's figure too). Stage CPU: Ray Data's own per-operator figure (the process
CPU of the task or actor while it made each block, its threads included) per image:
the read (read_images decodes there) and the map_batches stage. Ratios: each pass
against the torchvision-docs pass of the same round, median and range over rounds.
Object-store bytes per image: the size of the materialised output blocks (and of the
input rows: encoded bytes vs read_images' decoded arrays) over the folder's first 256
files.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

PIPELINE = ("decode | random_resized_crop(size={size}) | random_horizontal_flip"
            " | normalize(mean=imagenet, std=imagenet)")
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default="build/demo-data", help="ImageFolder root")
    p.add_argument("--cpus", type=int, default=2, help="the local cluster's CPUs")
    p.add_argument("--size", type=int, default=224, help="crop side, pixels")
    p.add_argument("--batch-size", type=int, default=64, help="map_batches' and the driver's batch size")
    p.add_argument("--rounds", type=int, default=3, help="passes per configuration, taking turns")
    p.add_argument("--only", default="", help="comma-separated configurations (default: all)")
    p.add_argument("--json", action="store_true", help="print the results as JSON too")
    return p.parse_args(argv)


def tree_cpu(root_pid):
    """{pid: CPU seconds (user + system)} of root_pid and its live descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    children, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks
    out, todo = {}, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in cpu:
            out[pid] = cpu[pid]
        todo.extend(children.get(pid, []))
    return out


class CpuMeter:
    """The CPU time of a process tree over an interval, polled every `period` s from
    /proc: each process counts from its value at the start (0 if it started since) to
    the last value seen, so processes that exit meanwhile (Ray's actors at the end of
    an execution; Ray does not reap its workers' times into its own) keep what they
    used up to at most one period before their exit."""

    def __init__(self, root_pid, period=0.05):
        import threading

        self.root, self.period = root_pid, period
        self.base, self.last = tree_cpu(root_pid), {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self):
        while not self.stop.is_set():
            self.last.update(tree_cpu(self.root))
            self.stop.wait(self.period)

    def seconds(self):
        self.stop.set()
        self.thread.join()
        self.last.update(tree_cpu(self.root))
        return sum(v - self.base.get(pid, 0.0) for pid, v in self.last.items())


def torchvision_fn(size, pil):
    """The per-batch function a Ray Data user writes with torchvision (Ray's docs' pattern)."""
    def preprocess(batch):
        import numpy as np
        from PIL import Image
        from torchvision import transforms

        if pil:
            t = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                    transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
            images = [t(Image.fromarray(image)) for image in batch["image"]]
        else:
            t = transforms.Compose([transforms.ToTensor(), transforms.RandomResizedCrop(size),
                                    transforms.RandomHorizontalFlip(), transforms.Normalize(MEAN, STD)])
            images = [t(image) for image in batch["image"]]
        return {"image": np.stack([i.numpy() for i in images])}
    return preprocess


def dataset(name, args, paths=None):
    """The configuration's dataset over the folder (or over `paths` of it)."""
    import ray
    import fusionflow.ray

    root = os.path.abspath(args.data)
    if name.startswith("torchvision"):
        return ray.data.read_images(paths or root, mode="RGB").map_batches(
            torchvision_fn(args.size, pil=name.endswith("pil")), batch_size=args.batch_size)
    # the read tasks only read files: a quarter CPU each leaves the actor the rest
    return ray.data.read_binary_files(paths or root, include_paths=True, num_cpus=0.25).map_batches(
        fusionflow.ray.Augment,
        fn_constructor_kwargs=dict(pipeline=PIPELINE.format(size=args.size), seed=0, epoch=0,
                                   source=f"imagefolder:{root}", layout="chw",
                                   dtype="float32" if name.endswith("float32") else "uint8",
                                   num_threads=args.cpus),
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=args.cpus - 0.25, batch_size=args.batch_size)


def loader_batches(args):
    """The same pipeline in fusionflow.Loader in this process, without Ray: the ceiling."""
    import fusionflow

    with fusionflow.Loader(os.path.abspath(args.data), PIPELINE.format(size=args.size), batch_size=args.batch_size,
                           num_threads=args.cpus, seed=0, output="numpy") as loader:
        for images, _ in loader:
            yield {"image": images}


def stage_cpu_s(ds):
    """{operator: CPU seconds} of an executed dataset, from Ray Data's own stats: the
    process CPU time of the task or actor while it made each block (threads included)."""
    out, todo = {}, [ds._get_stats_summary()]
    while todo:
        summary = todo.pop()
        for op in summary.operators_stats:
            if op.cpu_time:
                out[op.operator_name] = out.get(op.operator_name, 0.0) + op.cpu_time.sum
        todo.extend(summary.parents)
    return out


def one_pass(name, args):
    meter, t0 = CpuMeter(os.getpid()), time.perf_counter()
    ds = None if name == "loader" else dataset(name, args)
    batches = loader_batches(args) if ds is None else ds.iter_batches(batch_size=args.batch_size,
                                                                       batch_format="numpy")
    n = 0
    for batch in batches:
        n += len(batch["image"])
    wall, cpu = time.perf_counter() - t0, meter.seconds()
    stages = {} if ds is None else {op: 1e6 * s / n for op, s in stage_cpu_s(ds).items()}
    return {"images": n, "wall_s": wall, "images_per_s": n / wall, "cpu_us_per_image": 1e6 * cpu / n, "cpu_s": cpu,
            "stage_cpu_us_per_image": stages}


def store_bytes(name, args, count=256):
    """Object-store bytes per image of the augmented rows and of their input rows, over the
    folder's first `count` files (sorted), materialised."""
    import ray

    if name == "loader":
        return {"out_bytes_per_image": 0.0, "in_bytes_per_image": 0.0}
    root = os.path.abspath(args.data)
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".jpg"))[:count]
    out = dataset(name, args, paths).materialize()
    n = out.count()
    if name.startswith("torchvision"):
        rows_in = ray.data.read_images(paths, mode="RGB").materialize()
    else:
        rows_in = ray.data.read_binary_files(paths, include_paths=True).materialize()
    return {"out_bytes_per_image": out.size_bytes() / n, "in_bytes_per_image": rows_in.size_bytes() / n}


def idle_cpu_per_s(seconds=5.0):
    meter, t0 = CpuMeter(os.getpid()), time.perf_counter()
    time.sleep(seconds)
    return meter.seconds() / (time.perf_counter() - t0)


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.data):
        sys.exit(f"ray_data.py: no folder {args.data} (make demo-data)")
    import ray

    names = ["torchvision-docs", "torchvision-pil", "fusionflow-uint8", "fusionflow-float32", "loader"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    temp = tempfile.mkdtemp(prefix="ffbench", dir="/tmp")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    load0 = os.getloadavg()
    for name in names:  # warm-up: imports, worker processes, page cache
        one_pass(name, args)
    idle = idle_cpu_per_s()
    runs = {name: [] for name in names}
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            runs[name].append(one_pass(name, args))
            print(f"round {r + 1} {name}: {runs[name][-1]['images_per_s']:.1f} images/s, "
                  f"{runs[name][-1]['cpu_us_per_image']:.0f} CPU us/image", file=sys.stderr, flush=True)
    sizes = {name: store_bytes(name, args) for name in names}
    load1 = os.getloadavg()
    ray.shutdown()

    base = names[0]
    result = {"cpus": args.cpus, "size": args.size, "rounds": args.rounds, "idle_cpu_per_s": idle,
              "loadavg_before": load0, "loadavg_after": load1, "configs": {}}
    print(f"{'configuration':20s} {'images/s':>18s} {'vs ' + base:>22s} {'CPU us/image':>20s} "
          f"{'read, map us/image':>20s} {'store B/image out':>18s} {'in':>8s}")
    for name in names:
        ips = [x["images_per_s"] for x in runs[name]]
        cpu = [x["cpu_us_per_image"] for x in runs[name]]
        ratios = [x["images_per_s"] / b["images_per_s"] for x, b in zip(runs[name], runs[base])]
        stages = {}
        for x in runs[name]:
            for op, us in x["stage_cpu_us_per_image"].items():
                stages.setdefault(op, []).append(us)
        read = [statistics.median(v) for op, v in stages.items() if op.startswith("Read")]
        work = [statistics.median(v) for op, v in stages.items() if op.startswith("MapBatches")]
        result["configs"][name] = {"runs": runs[name], **sizes[name], "images_per_s": statistics.median(ips),
                                   "cpu_us_per_image": statistics.median(cpu), "ratio": statistics.median(ratios),
                                   "ratio_range": [min(ratios), max(ratios)],
                                   "stage_cpu_us_per_image": {op: statistics.median(v) for op, v in stages.items()}}
        stage_text = f"{read[0]:.0f}, {work[0]:.0f}" if read and work else "-"
        print(f"{name:20s} {statistics.median(ips):7.1f} ({min(ips):.0f}-{max(ips):.0f}) "
              f"{statistics.median(ratios):7.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"{statistics.median(cpu):8.0f} ({min(cpu):.0f}-{max(cpu):.0f}) {stage_text:>20s} "
              f"{sizes[name]['out_bytes_per_image']:18.0f} {sizes[name]['in_bytes_per_image']:8.0f}")
    print(f"Ray's idle CPU: {1e3 * idle:.0f} ms per second; load average {load0[0]:.1f} before, "
          f"{load1[0]:.1f} after")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
