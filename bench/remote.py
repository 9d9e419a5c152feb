#!/usr/bin/env python3
"""A Loader with remote Ray workers against the same Loader on local threads only, with a
training loop faster than the pool (no step time), side by side in rounds.

    make demo-data
    $(scripts/test-venv.sh) bench/remote.py --data build/demo-data --rounds 3 [--json]
    # a real cluster (CPU-only worker nodes; the data set at the same path on every node):
    python bench/remote.py --address HEAD:6379 --data /shared/train --threads 8 \\
        --workers 16 --cpus-per-worker 4 --only local,remote

Configurations (the RandAugment pipeline at --size, batch --batch-size):
  local-1    Loader(num_threads=1)
  local-2    Loader(num_threads=2)
  remote     Loader(num_threads=--threads, remote=Workers(--workers, --cpus-per-worker))
             (default 1 thread + 1 actor of 1 CPU: on a 2-core machine, the same two cores
             as local-2), the policy deciding the remote share
  remote-half  the same with half of every batch sent remote (FF_FORCE_REMOTE_SHARE=0.5):
             the overhead measured on many remote samples (with the policy's few percent,
             the driver's CPU left over after its local samples is within the noise)
  (with --only local,remote on a cluster: local = Loader(num_threads=--threads))

Each configuration opens its loader (the pool starts, not timed), takes --warmup batches,
then times --batches batches: images/s over that window. CPU per sample: this process's
CPU time (all its threads: the loader's workers, the consumer, the remote dispatcher)
over the window, divided by the samples; the actors' CPU time on their microbatches is
what they report (stats()["remote"]["worker_cpu_ns"], process CPU inside each call).
The remote path's overhead = (driver CPU per remote sample + actor CPU per remote sample)
/ (local CPU per sample) - 1, where the driver's CPU per remote sample is this process's
CPU in the remote run less its local samples at local-1's CPU per sample, over the remote
samples; Ray's own daemons (raylet, GCS) are not in it. That difference of two large
numbers swings with the machine's load; on Linux the driver's part is also measured
directly per thread (/proc/self/task/*/schedstat): the dispatcher thread (which converts
the results too) plus the threads Ray names in this process, over the remote samples
("overhead, per thread"). Bytes per sample on the wire: the
encoded bytes sent and the uint8 results received, per remote sample (indices and Ray's
framing not counted). Medians over rounds (range).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

PIPELINE = ("decode | random_resized_crop(size={size}) | random_horizontal_flip"
            " | rand_augment(num_ops=2, magnitude=9) | normalize(mean=imagenet, std=imagenet)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", default="build/demo-data", help="ImageFolder root (the same path on every node)")
    p.add_argument("--size", type=int, default=224, help="crop side, pixels")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=20, help="timed batches per run")
    p.add_argument("--warmup", type=int, default=3, help="batches before the timed window")
    p.add_argument("--rounds", type=int, default=3, help="runs per configuration, taking turns")
    p.add_argument("--threads", type=int, default=1, help="local threads of the remote run (and of 'local')")
    p.add_argument("--workers", type=int, default=1, help="remote actors")
    p.add_argument("--cpus-per-worker", type=int, default=1)
    p.add_argument("--microbatch", type=int, default=16, help="samples per microbatch")
    p.add_argument("--cpus", type=int, default=2, help="a local cluster's CPUs (without --address)")
    p.add_argument("--address", default=None, help="an existing Ray cluster (else a local one)")
    p.add_argument("--only", default="local-1,local-2,remote,remote-half",
                   help="configurations: local-1, local-2, local, remote, remote-half")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return p.parse_args(argv)


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def thread_cpu():
    """{thread id: (name, CPU seconds)} of this process's threads ({} off Linux)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f, open(f"/proc/self/task/{tid}/schedstat") as g:
                out[int(tid)] = (f.read().strip(), int(g.read().split()[0]) * 1e-9)
        except (OSError, ValueError, IndexError):
            pass
    return out


def remote_threads_cpu(t0, t1):
    """CPU seconds from t0 to t1 of the dispatcher thread and of the threads Ray names (the
    others, named like the process, are the loader's threads and the consumer)."""
    import threading

    dispatcher = {t.native_id for t in threading.enumerate() if t.name == "fusionflow-remote"}
    own = t1.get(os.getpid(), ("",))[0]
    return sum(cpu - t0.get(tid, (name, 0.0))[1] for tid, (name, cpu) in t1.items()
               if tid in dispatcher or name != own)


def run(args, name):
    import fusionflow
    import fusionflow.ray

    threads = {"local-1": 1, "local-2": 2}.get(name, args.threads)
    remote = None
    os.environ.pop("FF_FORCE_REMOTE_SHARE", None)
    if name == "remote-half":
        os.environ["FF_FORCE_REMOTE_SHARE"] = "0.5"
    if name.startswith("remote"):
        remote = fusionflow.ray.Workers(args.workers, num_cpus_per_worker=args.cpus_per_worker,
                                        microbatch_size=args.microbatch)
    with fusionflow.Loader(args.data, PIPELINE.format(size=args.size), batch_size=args.batch_size,
                           num_threads=threads, seed=1, output="numpy", remote=remote) as loader:
        it = iter(_forever(loader))
        for _ in range(args.warmup):
            next(it)
        s0, c0, th0, t0 = loader.stats(), cpu_s(), thread_cpu(), time.perf_counter()
        for _ in range(args.batches):
            next(it)
        t1, th1, c1, s1 = time.perf_counter(), thread_cpu(), cpu_s(), loader.stats()
        remote_cpu = remote_threads_cpu(th0, th1) if th1 else None
    r0, r1 = s0["remote"], s1["remote"]
    samples = s1["samples"] - s0["samples"]
    remote_n = r1["placement_samples"]["remote"] - r0["placement_samples"]["remote"]
    mbs = r1["microbatches"] - r0["microbatches"]
    return {"config": name, "threads": threads, "images_per_s": samples / (t1 - t0), "samples": samples,
            "driver_cpu_s": c1 - c0, "remote_samples": remote_n, "remote_share": remote_n / samples if samples else 0,
            "actor_cpu_s": (r1["worker_cpu_ns"] - r0["worker_cpu_ns"]) * 1e-9,
            "bytes_sent": r1["bytes_sent"] - r0["bytes_sent"], "bytes_received": r1["bytes_received"] - r0["bytes_received"],
            "latency_ms": (r1["latency_ns"] - r0["latency_ns"]) * 1e-6 / mbs if mbs else 0.0,
            "convert_ms": (r1["convert_ns"] - r0["convert_ns"]) * 1e-6,
            "retries": r1["retries"] - r0["retries"], "fallbacks": r1["fallbacks"] - r0["fallbacks"],
            "remote_threads_cpu_s": remote_cpu}


def _forever(loader):
    while True:
        for batch in loader:
            yield batch


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    configs = [c for c in args.only.split(",") if c]
    temp = None
    if any(c.startswith("remote") for c in configs):
        if args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            temp = tempfile.mkdtemp(prefix="ffbr", dir="/tmp")
            ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    rows = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs:
            rows[c].append(run(args, c))
            print(f"round {r + 1} {c}: {rows[c][-1]['images_per_s']:.1f} images/s", file=sys.stderr)
    base = rows.get("local-1") or rows.get("local")
    out = {"pipeline": PIPELINE.format(size=args.size), "batch_size": args.batch_size, "configs": {}}
    for c in configs:
        med = lambda key: statistics.median(x[key] for x in rows[c])
        rng = lambda key: (min(x[key] for x in rows[c]), max(x[key] for x in rows[c]))
        entry = {"images_per_s": med("images_per_s"), "images_per_s_range": rng("images_per_s"),
                 "driver_cpu_ms_per_sample": statistics.median(1e3 * x["driver_cpu_s"] / x["samples"] for x in rows[c])}
        if base is not None:
            entry["vs_first"] = statistics.median(x["images_per_s"] / b["images_per_s"] for x, b in zip(rows[c], base))
        if c.startswith("remote"):
            local_ms = statistics.median(1e3 * b["driver_cpu_s"] / b["samples"] for b in base) if base else 0
            per = []
            for x in rows[c]:
                n = x["remote_samples"]
                if not n or not local_ms:
                    continue
                driver = (1e3 * x["driver_cpu_s"] - (x["samples"] - n) * local_ms) / n
                actor = 1e3 * x["actor_cpu_s"] / n
                direct = 1e3 * x["remote_threads_cpu_s"] / n if x["remote_threads_cpu_s"] is not None else float("nan")
                per.append((driver, actor, (driver + actor) / local_ms - 1, x["bytes_sent"] / n, x["bytes_received"] / n,
                            x["convert_ms"] / n, direct, (direct + actor) / local_ms - 1))
            if per:
                entry.update({"remote_share": med("remote_share"), "latency_ms": med("latency_ms"),
                              "local_cpu_ms_per_sample": local_ms,
                              "driver_cpu_ms_per_remote_sample": statistics.median(p[0] for p in per),
                              "actor_cpu_ms_per_remote_sample": statistics.median(p[1] for p in per),
                              "overhead": statistics.median(p[2] for p in per),
                              "overhead_range": (min(p[2] for p in per), max(p[2] for p in per)),
                              "bytes_sent_per_sample": statistics.median(p[3] for p in per),
                              "bytes_received_per_sample": statistics.median(p[4] for p in per),
                              "convert_ms_per_remote_sample": statistics.median(p[5] for p in per),
                              "driver_threads_cpu_ms_per_remote_sample": statistics.median(p[6] for p in per),
                              "overhead_per_thread": statistics.median(p[7] for p in per),
                              "overhead_per_thread_range": (min(p[7] for p in per), max(p[7] for p in per)),
                              "retries": sum(x["retries"] for x in rows[c]),
                              "fallbacks": sum(x["fallbacks"] for x in rows[c])})
        out["configs"][c] = entry
    if any(c.startswith("remote") for c in configs):
        ray.shutdown()
    if temp:
        import shutil
        shutil.rmtree(temp, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for c, e in out["configs"].items():
            print(c, json.dumps(e))


if __name__ == "__main__":
    main()
