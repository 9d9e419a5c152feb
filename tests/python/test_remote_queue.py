"""The parts of fusionflow.ray.Workers that need no Ray, so they run under the sanitizer builds
too (test_remote.py, which needs Ray, does not): ``import fusionflow.ray`` without Ray says what
to install; the dispatcher's queue wakes from another thread."""
import subprocess
import sys
import threading
import time

import fusionflow
from conftest import child_env


def test_workers_without_ray_say_what_to_install():
    code = ("import sys; sys.modules['ray'] = None\n"
            "try:\n import fusionflow.ray\nexcept ModuleNotFoundError as e:\n print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=120)
    assert "ERR fusionflow.ray needs Ray: pip install 'fusionflow[ray]'" in r.stdout, r.stdout + r.stderr


def test_remote_queue_wake_ends_one_take():
    """The dispatcher sleeps in take until a microbatch comes or a result's future calls wake (from
    Ray's thread): a wake ends the take waiting now, or the next one, and only that one."""
    q = fusionflow._fusionflow.RemoteQueue(1)
    got = []
    t = threading.Thread(target=lambda: got.append((q.take(60), time.monotonic())))
    t0 = time.monotonic()
    t.start()
    time.sleep(0.2)  # the take is waiting (or about to: the wake is kept for it)
    q.wake()
    t.join(30)
    assert got and got[0][0] == [] and got[0][1] - t0 < 30
    q.wake()
    assert q.take(60) == []  # at once
    t0 = time.monotonic()
    assert q.take(0.2) == [] and time.monotonic() - t0 >= 0.15  # the wake was used up
