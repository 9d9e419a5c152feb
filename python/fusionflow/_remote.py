"""Remote CPU workers on Ray as a Loader's fourth placement (fusionflow.ray.Workers).

The Loader's C core decides which samples go remote (only the deficit its CPU threads and
device leave) and queues them as microbatches in C (fusionflow._fusionflow.RemoteQueue);
one Python thread per Loader, the dispatcher, makes every Ray call: it starts the actors,
sends each microbatch to an actor with fewer than ``max_in_flight_per_worker`` in flight,
sleeps until a microbatch comes or a result's future wakes it (from Ray's thread), hands
each result's uint8 pixels back to the C core (which converts them into the batch) and
drops the ObjectRef at once. Faults: an actor past its deadline is killed and
replaced and its microbatch redone on another (``max_attempts`` in all), a lost actor
likewise; results of an attempt no longer wanted are dropped by (epoch, microbatch,
attempt); a microbatch out of attempts, and everything once the pool is gone, runs on
the Loader's own threads (one warning). docs/remote.md tells the whole story.
"""
import logging
import math
import os
import socket
import threading
import time

import ray

from . import _fusionflow as _c
from ._augment import SampleAugmenter

__all__ = ["Workers"]

_log = logging.getLogger("fusionflow.ray")

# Ray's kill without the ray.init() Ray wraps it in: after the process's ray.shutdown() the
# dispatcher's call fails instead of starting a cluster (or joining the one just shut down,
# which ends the process a minute later); it reads results from futures, which never start Ray
_kill = getattr(ray.kill, "__wrapped__", ray.kill)


def _version():
    """What the driver and a worker must agree on: the package and the C library it runs."""
    from . import __version__
    return f"{__version__} (library {_c.version()})"


class _Worker:
    """One remote worker: an ff_augmenter on the Loader's pipeline, seed and source, uint8 out."""

    def __init__(self, spec):
        self._spec = spec
        self._aug = SampleAugmenter(spec["pipeline"], seed=spec["seed"], dtype="uint8", layout="hwc",
                                    num_threads=spec["num_threads"], semantics=spec["semantics"],
                                    max_image_pixels=spec["max_image_pixels"], strict_decode=spec["strict_decode"],
                                    source=spec["source"])

    def ready(self):
        return _version(), self._aug.dataset_size, socket.gethostname()

    def run(self, epoch, indices, datas):
        """(images (n, H, W, 3) uint8, statuses, CPU ns of this process on it)."""
        t0 = time.process_time_ns()
        if datas is None:
            datas = [None] * len(indices)
        images, errors = self._aug.run(epoch, datas, indices)
        statuses = [0] * len(indices)
        for k, e in errors:
            statuses[k] = getattr(e, "status", _c.FF_EDATA) or _c.FF_EDATA
        return images, statuses, time.process_time_ns() - t0

    def sleep(self, seconds):
        """Holds the actor (its calls run one at a time): a stand-in for a stuck worker."""
        time.sleep(seconds)


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"fusionflow.ray.Workers: {name} must be an int >= {low} (got {value!r})")
    return value


class Workers:
    """Remote CPU workers on a Ray cluster for ``Loader(..., remote=Workers(...))``.

    The Loader sends them only what its own CPU threads (and device) cannot keep up with,
    and only for batches at least one measured round trip ahead of the training loop;
    their samples are bit-identical to the Loader's own (same library, plans keyed by
    (seed, epoch, index)). Each Loader starts its own pool when it opens (under
    torchrun/DDP: one pool per rank) and kills it when it closes.

    Args:
        num_workers (int): actors, >= 1.
        num_cpus_per_worker (int): CPUs per actor (Ray's ``num_cpus``), each running the
            library on that many threads.
        microbatch_size (int): samples per microbatch (default 16).
        max_in_flight_per_worker (int): microbatches sent to one actor and not back yet (2:
            one runs while the next travels).
        reads_source (bool or None): True: the actors read the samples from the Loader's
            source themselves (a shared file system, URLs, shards: the same path must work
            on their nodes) and only indices travel; False: the Loader reads each sample
            and sends its bytes. None (default): True for a path source, False for a Python
            dataset.
        timeout_s (float): a microbatch not back this long after it was sent is given up:
            its actor is killed and replaced, the microbatch sent again (default 30).
        max_attempts (int): sends per microbatch before the Loader's threads run it (3).
        label_selector (dict): Ray node labels the actors require (Ray's ``label_selector``,
            e.g. ``{"ray.io/node-group": "cpu"}``) instead of the default placement.
        allow_gpu_nodes (bool): by default the actors go only to nodes without GPUs
            (``NodeAffinitySchedulingStrategy`` onto each CPU-only node in turn); True lets
            Ray place them anywhere, the trainer's GPU node included.
        address (str): the cluster to connect to when Ray is not initialised yet
            (``ray.init(address=...)``; default: Ray's own lookup, ``RAY_ADDRESS``); an
            address that does not answer within 5 s fails the open.
        start_timeout_s (float): how long the actors may take to start (60).
    Raises (at Loader open): ValueError for bad arguments; ConnectionError for an address
    that does not answer; RuntimeError for actors that cannot be placed or started, or
    that run another fusionflow than the driver.
    """

    def __init__(self, num_workers=2, num_cpus_per_worker=1, *, microbatch_size=16, max_in_flight_per_worker=2,
                 reads_source=None, timeout_s=30.0, max_attempts=3, label_selector=None, allow_gpu_nodes=False,
                 address=None, start_timeout_s=60.0):
        self.num_workers = _check_int("num_workers", num_workers, 1)
        self.num_cpus_per_worker = _check_int("num_cpus_per_worker", num_cpus_per_worker, 1)
        self.microbatch_size = _check_int("microbatch_size", microbatch_size, 1)
        self.max_in_flight_per_worker = _check_int("max_in_flight_per_worker", max_in_flight_per_worker, 1)
        self.max_attempts = _check_int("max_attempts", max_attempts, 1)
        for name, v in (("timeout_s", timeout_s), ("start_timeout_s", start_timeout_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e6:
                raise ValueError(f"fusionflow.ray.Workers: {name} must be a number of seconds > 0 (got {v!r})")
        if reads_source not in (None, True, False):
            raise ValueError(f"fusionflow.ray.Workers: reads_source must be None, True or False (got {reads_source!r})")
        if label_selector is not None and not isinstance(label_selector, dict):
            raise TypeError("fusionflow.ray.Workers: label_selector must be a dict of Ray node labels")
        self.reads_source, self.timeout_s, self.start_timeout_s = reads_source, float(timeout_s), float(start_timeout_s)
        self.label_selector, self.allow_gpu_nodes, self.address = label_selector, bool(allow_gpu_nodes), address

    def __repr__(self):
        return (f"fusionflow.ray.Workers(num_workers={self.num_workers}, "
                f"num_cpus_per_worker={self.num_cpus_per_worker}, microbatch_size={self.microbatch_size})")

    def _open(self, spec, path_source):
        """Starts a pool for one Loader: (its RemoteQueue, its dispatcher). Raises as the class says."""
        reads = path_source if self.reads_source is None else self.reads_source
        if reads and not path_source:
            raise ValueError("fusionflow.ray.Workers: reads_source=True needs a path source (a Python dataset's "
                             "samples are sent as bytes)")
        spec = dict(spec, source=spec["source"] if reads else None, num_threads=self.num_cpus_per_worker)
        # what the workers will run, checked here first: a pipeline they cannot take fails at once, as locally
        SampleAugmenter(spec["pipeline"], seed=spec["seed"], dtype="uint8", layout="hwc", num_threads=1,
                        semantics=spec["semantics"]).close()
        queue = _c.RemoteQueue(self.num_workers, max_in_flight=self.num_workers * self.max_in_flight_per_worker,
                               microbatch_size=self.microbatch_size, reads_source=reads,
                               timeout_ms=int(1000 * self.timeout_s * (self.max_attempts + 1)))
        d = _Dispatcher(self, spec, queue)
        d.start()
        return queue, d


def _connect(address):
    """ray.init when needed; an address that does not answer fails in seconds, not minutes."""
    if ray.is_initialized() and not address:
        return
    target = address or os.environ.get("RAY_ADDRESS")
    if target and target not in ("auto", "local"):
        hostport = target.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        try:
            socket.create_connection((host or hostport, int(port or 6379)), timeout=5).close()
        except (OSError, ValueError) as e:
            raise ConnectionError(f"fusionflow.ray.Workers: the Ray cluster at {target!r} does not answer ({e})") \
                from None
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)


def _cpu_nodes():
    """Alive nodes without GPUs, as (node id, CPUs)."""
    return [(n["NodeID"], n["Resources"].get("CPU", 0)) for n in ray.nodes()
            if n.get("Alive") and not n["Resources"].get("GPU")]


class _Dispatcher(threading.Thread):
    """The one thread that makes a Loader's Ray calls (see the module's docstring)."""

    def __init__(self, workers, spec, queue):
        super().__init__(name="fusionflow-remote", daemon=True)
        self.w, self.spec, self.q = workers, spec, queue
        self.started_ev, self.attached_ev = threading.Event(), threading.Event()
        self.error, self.stopping = None, False
        self.actors, self.load = [], {}  # load: actor -> microbatches in flight
        self.nodes, self.next_node = [], 0
        self.inflight = {}  # ObjectRef -> [task, actor, attempt, sent_at]
        self.waiting = []   # (task, attempt) to send
        self.counts = {"actors_started": 0, "actors_killed": 0, "actors_lost": 0, "dropped_results": 0,
                       "gave_up": 0, "pool_lost": 0}
        self.warned = False

    # -- the pool --------------------------------------------------------------------------

    def _default_placement(self):
        """Whether the actors go to the CPU-only nodes in turn (no label_selector, allow_gpu_nodes=False)."""
        return self.w.label_selector is None and not self.w.allow_gpu_nodes

    def _new_actor(self):
        opts = {"num_cpus": self.w.num_cpus_per_worker, "max_restarts": 0}
        if self.w.label_selector is not None:
            opts["label_selector"] = self.w.label_selector
        elif not self.w.allow_gpu_nodes:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            node, _ = self.nodes[self.next_node % len(self.nodes)]
            self.next_node += 1
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return ray.remote(_Worker).options(**opts).remote(self.spec)

    def _start_pool(self):
        _connect(self.w.address)
        if self._default_placement():
            self.nodes = _cpu_nodes()
            if not self.nodes:
                raise RuntimeError("fusionflow.ray.Workers: no node without GPUs in the Ray cluster "
                                   "(allow_gpu_nodes=True places the workers on GPU nodes too)")
        actors = [self._new_actor() for _ in range(self.w.num_workers)]
        try:
            answers = ray.get([a.ready.remote() for a in actors], timeout=self.w.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            for a in actors:
                ray.kill(a)
            cpus = ray.cluster_resources().get("CPU", 0)
            raise RuntimeError(f"fusionflow.ray.Workers: {self.w.num_workers} workers of "
                               f"{self.w.num_cpus_per_worker} CPU(s) did not start within {self.w.start_timeout_s:g} s "
                               f"(the cluster has {cpus:g} CPUs)") from None
        except ray.exceptions.RayError as e:
            for a in actors:
                ray.kill(a)
            raise RuntimeError(f"fusionflow.ray.Workers: a worker failed to start: "
                               f"{str(e).strip().splitlines()[-1]}") from None
        mine = _version()
        for version, _, host in answers:
            if version != mine:
                for a in actors:
                    ray.kill(a)
                raise RuntimeError(f"fusionflow.ray.Workers: the worker on {host} runs fusionflow {version}, "
                                   f"this process {mine}: install the same version on every node")
        self.actors = actors
        self.load = {a: 0 for a in actors}
        self.counts["actors_started"] += len(actors)

    def _replace(self, actor, killed):
        """Kills actor (if it lives) and starts another in its place; False once none starts."""
        self.counts["actors_killed" if killed else "actors_lost"] += 1
        try:
            _kill(actor)
        except Exception:  # already gone
            pass
        self.actors.remove(actor)
        self.load.pop(actor, None)
        try:
            if not ray.is_initialized():
                return False
            if self._default_placement():
                self.nodes = _cpu_nodes()
                if not self.nodes:  # the CPU-only nodes are gone: the pool ends with its last actor
                    return bool(self.actors)
            a = self._new_actor()
            self.actors.append(a)
            self.load[a] = 0
            self.counts["actors_started"] += 1
            return True
        except Exception:
            return bool(self.actors)

    # -- the loop --------------------------------------------------------------------------

    def run(self):
        try:
            self._start_pool()
        except BaseException as e:  # raised by the Loader's constructor
            self.error = e
            self.started_ev.set()
            return
        self.started_ev.set()
        self.attached_ev.wait()
        try:
            while not self.stopping and not self.q.closed:
                self._step()
        except Exception as e:  # the pool is gone (the cluster went away): the Loader carries on alone
            self._lose_pool(e if ray.is_initialized() else RuntimeError("Ray was shut down in this process"))
        finally:
            self._shutdown()

    def _step(self):
        if not ray.is_initialized():  # ray.shutdown(): a Ray call now would start (or join) a cluster
            raise RuntimeError("Ray was shut down in this process")
        # the one sleep: until a microbatch comes, a result's future wakes it, or 0.1 s for the deadlines
        for t in self.q.take(0.01 if self.waiting else 0.1):
            self.waiting.append((t, 1))
        self._send()
        for ref in [ref for ref, v in self.inflight.items() if v[4].done()]:
            if ref in self.inflight:  # not abandoned with its actor meanwhile
                self._collect(ref)
        now = time.monotonic()
        for ref, (task, actor, attempt, sent, _) in list(self.inflight.items()):
            if now - sent > self.w.timeout_s and ref in self.inflight:
                self._abandon(actor, killed=True)

    def _send(self):
        while self.waiting and self.actors and ray.is_initialized():
            actor = min(self.actors, key=lambda a: self.load[a])
            if self.load[actor] >= self.w.max_in_flight_per_worker:
                return
            task, attempt = self.waiting.pop(0)
            _, epoch, indices, datas, _ = task
            ref = actor.run.remote(epoch, indices, datas)
            future = ref.future()
            self.inflight[ref] = [task, actor, attempt, time.monotonic(), future]
            self.load[actor] += 1
            future.add_done_callback(self._wake)  # on Ray's thread (or here, when done already)

    def _wake(self, _future):
        self.q.wake()

    def _collect(self, ref):
        task, actor, attempt, _, future = self.inflight.pop(ref)
        self.load[actor] = self.load.get(actor, 1) - 1
        try:
            images, statuses, cpu_ns = future.result()
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError,
                ray.exceptions.ActorUnschedulableError):  # the last: its node died before it started
            self._abandon(actor, killed=False, failed=(task, attempt))
            return
        except ray.exceptions.RayError:  # the call failed in a live actor: another try
            self._retry(task, attempt)
            return
        del ref, future
        tid, _, indices, _, sample_bytes = task
        if images.dtype != "uint8" or images.nbytes != len(indices) * sample_bytes or \
                not images.flags["C_CONTIGUOUS"]:
            self._retry(task, attempt)
            return
        self.q.complete(tid, images.ctypes.data, images.nbytes, statuses, attempt, cpu_ns)
        del images  # the object store's copy goes with the last reference

    def _abandon(self, actor, killed, failed=None):
        """Kills (or buries) an actor and sends its microbatches again elsewhere."""
        mine = [(ref, v) for ref, v in self.inflight.items() if v[1] is actor]
        for ref, v in mine:
            del self.inflight[ref]  # a late result of this attempt is never read
            self.counts["dropped_results"] += 1
        if failed is not None:
            mine.append((None, [failed[0], actor, failed[1], 0, None]))
        alive = self._replace(actor, killed)
        for _, (task, _, attempt, _, _) in mine:
            self._retry(task, attempt)
        if not alive:
            raise RuntimeError("no node without GPUs is left in the Ray cluster" if self._default_placement() and
                               not self.nodes else "no worker could be started again")

    def _retry(self, task, attempt):
        if attempt < self.w.max_attempts:
            self.waiting.append((task, attempt + 1))
        else:
            self.counts["gave_up"] += 1
            self.q.complete(task[0], 0, 0, None, attempt, 0)  # the Loader's threads run it

    def _lose_pool(self, e):
        self.counts["pool_lost"] += 1
        if not self.warned:
            self.warned = True
            _log.warning("fusionflow.ray.Workers: the worker pool is gone (%s); the Loader goes on with its own "
                         "threads", str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
        self.q.refuse()
        for task, attempt in [(v[0], v[2]) for v in self.inflight.values()] + self.waiting:
            self.q.complete(task[0], 0, 0, None, attempt, 0)
        self.inflight.clear()
        self.waiting.clear()
        try:  # what the queue holds now was refused or is taken back here
            for t in self.q.take(0):
                self.q.complete(t[0], 0, 0, None, 1, 0)
        except Exception:
            pass

    def _shutdown(self):
        self.inflight.clear()
        for a in self.actors if ray.is_initialized() else ():
            try:
                _kill(a)
            except Exception:
                pass
        self.actors = []

    def stop(self):
        """Ends the loop and kills the actors (close(): returns within about 0.1 s plus the kills)."""
        self.stopping = True
        self.attached_ev.set()
        if self.is_alive():
            self.join()

    def stats(self):
        return dict(self.counts, actors=len(self.actors))
