"""The warm-up-and-time loop the loader benchmarks share: take a few untimed
batches, then time a fixed number of batches, starting the iterable again
when an epoch ends (the timed batches may span epochs)."""
import time


def time_batches(iterable, batches, warmup, count, step=None):
    """Takes `warmup` batches from iter(iterable), then times `batches` more.
    count(batch) gives a batch's samples; step(batch), when given, runs on each
    timed batch inside the timing (a training step's work, e.g. Mixup) and its
    result is what count sees. Returns (samples, seconds of wall time)."""
    it = iter(iterable)

    def take():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(iterable)
            return next(it)
    for _ in range(warmup):
        take()
    t0, n = time.perf_counter(), 0
    for _ in range(batches):
        batch = take()
        n += count(step(batch) if step else batch)
    return n, time.perf_counter() - t0
