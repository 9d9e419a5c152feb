"""What the open of a streamed tar: source waits for, said through the
"fusionflow" logger (the C extension calls log_open_progress about every
100 ms while it opens; see Loader's docstring for the lines and their levels).
"""
import logging

_log = logging.getLogger("fusionflow")


def log_open_progress(p):
    """Says through the "fusionflow" logger what the open of a streamed source waits for
    (the C extension calls it with each ff_open_progress as a dict, about every 100 ms),
    whenever the open says a line is due (``due``: once opening has taken 2 s, then for
    each wait that lasts half a second, and at least every 10 s). INFO while a shard's
    first read goes on, WARNING once one has failed (retries, backoffs); the record's
    ``open_progress`` is the dict."""
    if p["due"]:
        failed = f" (the last failed: {p['last_error']})" if p["last_error"] else ""
        so_far = "" if p["backing_off"] else f": {_human_bytes(p['shard_bytes'])}, {p['shard_samples']} samples so far"
        _log.log(logging.WARNING if p["attempt"] > 1 else logging.INFO,
                 "fusionflow.Loader: opening, %.0f s: shard %d of %d, %s, %s attempt %d of %d%s%s", p["elapsed_s"],
                 p["shard_index"] + 1, p["num_shards"], p["shard"],
                 "backing off before" if p["backing_off"] else "reading,", p["attempt"], p["max_attempts"], so_far,
                 failed, extra={"open_progress": p})


def _human_bytes(n):
    """812 bytes, 1.2 kB, 3.4 MB (powers of 1000), as the CLI's progress lines say them."""
    if n < 1000:
        return f"{n} bytes"
    v, units = n / 1000, ["kB", "MB", "GB", "TB"]
    while v >= 1000 and len(units) > 1:
        v, units = v / 1000, units[1:]
    return f"{v:.1f} {units[0]}"
