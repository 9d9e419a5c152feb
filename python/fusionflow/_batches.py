"""What Loader's iteration needs besides the C loader: the iterator of one pass
over an epoch, and the two things a batch hand-out does for torch when torch is
in use -- the stream the trainer's copies of host batches are queued on (the
loader fences it, ff_loader_fence) and releasing torch's cached CUDA memory to
the loader's device budget (release_torch_cache). torch is never imported here,
nor its CUDA state initialised: what the script imported is used.
"""
import sys

EMPTY_CACHE_EVERY_S = 10.0


def empty_cache_due(torch, refusals, state, now):
    """Whether to release torch's cache now (Loader.release_torch_cache): the
    budget refused work since the last look (``refusals``, the count, grew past
    state["refusals"]), torch is imported and has initialised CUDA, and the last
    release (state["at"]) is EMPTY_CACHE_EVERY_S old. Updates state."""
    grew = refusals > state["refusals"]
    state["refusals"] = refusals
    if not grew or torch is None or not torch.cuda.is_initialized():
        return False
    if state["at"] is not None and now - state["at"] < EMPTY_CACHE_EVERY_S:
        return False
    state["at"] = now
    return True


def copy_stream(torch, index, side_streams):
    """The cudaStream_t (an int) on GPU ``index`` that every copy queued so far on
    torch's current stream is ordered before: the current stream itself when it is
    on that device, else a side stream of ``index`` (kept in ``side_streams``) made
    to wait for it, since an event is recorded on a stream of its own device.
    None when torch has not initialised CUDA (no copy can have been queued); CUDA
    is never initialised here."""
    cuda = torch.cuda
    if not cuda.is_initialized():
        return None
    current = cuda.current_stream()
    if current.device.index == index:
        return current.cuda_stream
    side = side_streams.get(index)
    if side is None:
        side = side_streams[index] = cuda.Stream(device=index)
    side.wait_stream(current)
    return side.cuda_stream



def fence_stream(core, side_streams):
    """The stream to fence (ff_loader_fence) before the next batch: where
    the trainer's copies of host batches are queued. For batches pinned by
    a CUDA device, torch's current stream (a side stream of that device
    joined to it when the current device is another); while torch is not
    imported or has not initialised CUDA, no copy of torch's can be queued
    yet and the device's default stream (0) stands in, so that fencing is
    on from the first batch. Pinned by the emulator: its default stream (0).
    Ordinary memory: None (nothing to fence)."""
    if core.pinned_device == "cpu":
        return None
    ordinal = core.pinned_cuda_device
    torch = sys.modules.get("torch") if ordinal >= 0 else None
    stream = None if torch is None else copy_stream(torch, ordinal, side_streams)
    return 0 if stream is None else stream


class EpochIterator:
    """Not a generator: a generator's frame would keep the last batch alive while suspended."""

    __slots__ = ("_loader", "_iteration", "_done")

    def __init__(self, loader, iteration):
        self._loader = loader
        self._iteration = iteration
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        batch = self._loader._next_batch(self._iteration)
        if batch is None:
            self._done = True
            raise StopIteration
        return batch

    def __len__(self):
        return len(self._loader)
