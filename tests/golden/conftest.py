"""Shared fixtures of the golden tests: the ff_shim library loaded with
ctypes (skipped cleanly when FF_SHIM is unset) and thin Python wrappers over
its entry points. Expected values always come from torchvision, computed in
the tests themselves."""
import ctypes
import os

import numpy as np
import pytest

c_int_p = ctypes.POINTER(ctypes.c_int)


class FFError(RuntimeError):
    """A non-zero ff_status from the shim, with the library's message."""

    def __init__(self, status, message):
        super().__init__(f"status {status}: {message}")
        self.status = status
        self.message = message


def _load(path):
    lib = ctypes.CDLL(path)
    lib.ff_shim_run_pipeline.restype = ctypes.c_int
    lib.ff_shim_run_pipeline.argtypes = [
        ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
        ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.c_void_p, ctypes.c_size_t, c_int_p, c_int_p, c_int_p,
        ctypes.c_char_p, ctypes.c_int]
    lib.ff_shim_run_pipeline_as.restype = ctypes.c_int
    lib.ff_shim_run_pipeline_as.argtypes = [
        ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
        ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.c_void_p, ctypes.c_size_t, c_int_p, c_int_p, c_int_p,
        ctypes.c_char_p, ctypes.c_int]
    lib.ff_shim_sampler.restype = ctypes.c_long
    lib.ff_shim_sampler.argtypes = [
        ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
        ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    if hasattr(lib, "ff_shim_rrc_box"):
        lib.ff_shim_rrc_box.restype = ctypes.c_int
        lib.ff_shim_rrc_box.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_double,
            ctypes.c_double, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, c_int_p]
    if hasattr(lib, "ff_shim_index"):
        lib.ff_shim_index.restype = ctypes.c_long
        lib.ff_shim_index.argtypes = [
            ctypes.c_char_p, ctypes.c_long, ctypes.c_char_p, ctypes.c_int,
            ctypes.POINTER(ctypes.c_int64)]
    return lib


class Shim:
    """Python face of libff_shim."""

    def __init__(self, lib):
        self.lib = lib
        self._out = np.zeros(1 << 20, np.uint8)  # grown on demand

    def run(self, pipeline, img, seed=0, epoch=0, index=0, out_shape=None, semantics="v1"):
        """Runs `pipeline` on an HWC uint8 RGB image in `semantics` ("v1" or
        "v2", ff_semantics); returns HWC uint8 or CHW float32 (when the
        pipeline ends with normalize/to_dtype)."""
        img = np.ascontiguousarray(img, dtype=np.uint8)
        assert img.ndim == 3 and img.shape[2] == 3, img.shape
        h, w = img.shape[:2]
        oh, ow, is_float = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        msg = ctypes.create_string_buffer(1024)
        need = 4 * 3 * (out_shape[0] * out_shape[1] if out_shape else 0)
        if need > self._out.size:
            self._out = np.zeros(need, np.uint8)
        st = self.lib.ff_shim_run_pipeline_as(
            pipeline.encode(), {"v1": 0, "v2": 1}[semantics], img.ctypes.data, h, w, seed, epoch, index,
            self._out.ctypes.data, self._out.size, ctypes.byref(oh), ctypes.byref(ow),
            ctypes.byref(is_float), msg, len(msg))
        if st != 0 and b"too small" in msg.value:
            self._out = np.zeros(self._out.size * 16, np.uint8)
            return self.run(pipeline, img, seed, epoch, index, out_shape, semantics)
        if st != 0:
            raise FFError(st, msg.value.decode(errors="replace"))
        n = 3 * oh.value * ow.value
        if is_float.value:
            return self._out[: 4 * n].view(np.float32).reshape(3, oh.value, ow.value).copy()
        return self._out[:n].reshape(oh.value, ow.value, 3).copy()

    def sampler(self, n, shuffle, seed, epoch, rank, world_size, drop_last, permutation="philox"):
        perm = np.zeros(max(n, 1), np.int64)
        out = np.zeros(max(n, 1) + world_size, np.int64)
        kind = {"philox": 0, "torch": 1}[permutation]
        count = self.lib.ff_shim_sampler(n, int(shuffle), kind, seed, epoch, rank, world_size,
                                         int(drop_last), perm.ctypes.data, out.ctypes.data)
        return out[:count].tolist()

    def rrc_box(self, height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=0,
                epoch=0, index=0):
        """(x, y, w, h) of random_resized_crop's box."""
        box = (ctypes.c_int * 4)()
        st = self.lib.ff_shim_rrc_box(height, width, scale[0], scale[1], ratio[0], ratio[1],
                                      seed, epoch, index, box)
        if st != 0:
            raise FFError(st, "ff_shim_rrc_box")
        return tuple(box)

    def index(self, spec):
        """[(path, label)] of the source `spec`, in index order."""
        buf = ctypes.create_string_buffer(8192)
        label = ctypes.c_int64()
        count = self.lib.ff_shim_index(spec.encode(), -1, buf, len(buf), ctypes.byref(label))
        if count < 0:
            raise FFError(count, buf.value.decode(errors="replace"))
        out = []
        for i in range(count):
            self.lib.ff_shim_index(spec.encode(), i, buf, len(buf), ctypes.byref(label))
            out.append((buf.value.decode(), label.value))
        return out


@pytest.fixture(scope="session")
def shim():
    path = os.environ.get("FF_SHIM")
    if not path:
        pytest.skip("FF_SHIM (path of the ff_shim library) is not set")
    return Shim(_load(path))


@pytest.fixture(scope="session")
def run(shim):
    """run(pipeline, img_hwc_uint8, seed=0, epoch=0, index=0) -> ndarray,
    raising FFError with the library's message on failure."""
    return shim.run


# ---------------------------------------------------------------- statistics
# Each op test records how far our pixels are from torchvision's; the table is
# printed at the end of the run (terminal summary), passed or not.

class OpStats:
    def __init__(self):
        self.images = 0
        self.values = 0
        self.differing = 0
        self.max_diff = 0.0

    def add(self, got, want):
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        assert got.shape == want.shape, (got.shape, want.shape)
        d = np.abs(got - want)
        self.images += 1
        self.values += d.size
        self.differing += int(np.count_nonzero(d))
        self.max_diff = max(self.max_diff, float(d.max()) if d.size else 0.0)

    @property
    def share(self):
        return self.differing / self.values if self.values else 0.0


_STATS = {}


def op_stats(name):
    return _STATS.setdefault(name, OpStats())


@pytest.fixture
def stats():
    """stats(name) -> the OpStats that collects op `name`'s differences."""
    return op_stats


def pytest_terminal_summary(terminalreporter):
    if not _STATS:
        return
    tr = terminalreporter
    tr.section("fusionflow vs torchvision (per op)")
    tr.write_line(f"{'op':<40} {'images':>7} {'values':>11} {'max diff':>9} {'differing':>10}")
    for name in sorted(_STATS):
        s = _STATS[name]
        tr.write_line(f"{name:<40} {s.images:>7} {s.values:>11} {s.max_diff:>9.3g} "
                      f"{100 * s.share:>9.4f}%")


def make_image(rng, h, w, kind):
    """An HWC uint8 RGB image of the given kind."""
    if kind == "constant":
        return np.broadcast_to(rng.integers(0, 256, 3, dtype=np.uint8), (h, w, 3)).copy()
    if kind == "two_valued":
        a, b = rng.integers(0, 256, (2, 3), dtype=np.uint8)
        return np.where(rng.random((h, w, 1)) < 0.5, a, b).astype(np.uint8)
    if kind == "narrow":  # a few levels only: what autocontrast and equalize stretch
        lo = rng.integers(0, 250, 3)
        span = rng.integers(1, 60, 3)
        return np.minimum(lo + rng.integers(0, 1 << 16, (h, w, 3)) % span, 255).astype(np.uint8)
    if kind == "noise":
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    if kind == "gradient":
        out = np.empty((h, w, 3))
        for c in range(3):
            ay, ax = rng.uniform(-1, 1, 2)
            out[..., c] = ay * y / max(h - 1, 1) + ax * x / max(w - 1, 1)
        lo, hi = out.min(), out.max()
        out = (out - lo) / (hi - lo) * 255 if hi > lo else np.full_like(out, 128)
        return np.clip(np.round(out), 0, 255).astype(np.uint8)
    # stripes: high frequencies in both directions, the hardest case for resizing
    py, px = rng.integers(1, 6, 2)
    v = ((y // py + x // px) % 2) * 255
    return np.stack([v, 255 - v, (x * 7 + y * 3) % 256], -1).astype(np.uint8)


def _value_key(value):
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def pytest_configure(config):
    config.addinivalue_line("markers", "threads: the library runs on several threads here (the CLI's "
                            "loader): what FF_GOLDEN_SUBSET=threads keeps")


def pytest_collection_modifyitems(config, items):
    """FF_GOLDEN_SUBSET=cover (what an AddressSanitizer build sets): of each
    test's parametrized cases, only those that bring a parameter value not yet
    run, so every function runs and every value of every parameter reaches the
    instrumented library at least once, without all their combinations
    (those run in the plain build, where a result can differ).
    FF_GOLDEN_SUBSET=threads (ThreadSanitizer): the same, of the tests marked
    `threads` only. The others call the library through the shim on the one
    thread of the test, where a data race cannot happen."""
    subset = os.environ.get("FF_GOLDEN_SUBSET", "all")
    if subset not in ("cover", "threads"):
        return
    seen, keep, drop = {}, [], []
    for item in items:
        if subset == "threads" and item.get_closest_marker("threads") is None:
            drop.append(item)
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            keep.append(item)
            continue
        done = seen.setdefault((str(item.path), item.originalname), set())
        values = {(name, _value_key(v)) for name, v in callspec.params.items()}
        if values - done:
            done |= values
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
