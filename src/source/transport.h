/* transport.h — one pass over one streamed shard (http://, https://,
 * pipe:COMMAND, a compressed file) from its first byte, grouped into samples
 * by the tar scanner, under the limits a hostile server or command meets
 * (docs/limits.md). stream.c runs these passes to count shards at open and
 * to read them during epochs. */
#ifndef FF_SOURCE_TRANSPORT_H
#define FF_SOURCE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "source/tar.h"

/* The limits of every pass, from the environment (defaults in brackets):
 * each failure's message names the variable. */
typedef struct ff__stream_limits {
  long max_redirects;          /* FF_HTTP_MAX_REDIRECTS [5]: HTTP redirects followed per request */
  uint64_t min_bytes_per_s;    /* FF_STREAM_MIN_BYTES_PER_S [10000] and FF_STREAM_STALL_S [30]: a transfer */
  long stall_s;                /*   under this rate over the window (time spent waiting for data) is a stall */
  uint64_t max_shard_bytes;    /* FF_STREAM_MAX_SHARD_BYTES [64 GiB]: bytes one pass reads of a shard */
  uint64_t max_shard_samples;  /* FF_STREAM_MAX_SHARD_SAMPLES [1000000]: samples a counting pass takes */
  long exit_grace_ms;          /* FF_PIPE_EXIT_GRACE_MS [5000]: how long a command may run on after its
                                  shard ended before SIGTERM, then as long again before SIGKILL */
} ff__stream_limits;

/* Reads the limits from the environment. FF_OK, or FF_EINVAL naming the
 * variable whose value is not a whole number in its range (0 turns the
 * byte, sample and rate limits off). */
ff_status ff__stream_limits_read(ff__stream_limits *out, ff__error *err);

/* One pass: its inputs, and what it measured and why it failed. */
typedef struct ff__pass {
  const char *name;                 /* the shard: URL, pipe:COMMAND or path */
  ff__tar_sample_fn fn;             /* NULL: a counting pass (samples go to the scan); else a reading pass */
  void *ctx;
  const ff__tar_read_opts *read;    /* what an image member may be, in a reading pass (may be NULL) */
  int (*abort_fn)(void *);          /* nonzero: give up now (a restart, a close, progress said so); may be NULL */
  void *abort_ctx;
  const ff__stream_limits *limits;
  int say_exit;                     /* a command ended by the grace rule says so on stderr, in one line */
  uint64_t bytes;                   /* out: bytes received so far (a watcher may read it between calls) */
  char why[512];                    /* out: why the transport failed ("" when it did not) */
  int retryable;                    /* out: whether another attempt may succeed */
} ff__pass;

/* Runs the pass over p->name, grouping its samples into sc (or to p->fn),
 * as ff__tar_scan_archive does. Returns FF_OK (sc->bad may list data
 * problems), FF_ENOMEM, what fn returns, or FF_EIO with p->why and
 * p->retryable set when the transport failed: an HTTP error or one of the
 * limits, a command that failed. An abandoned pass (abort_fn, or fn's
 * status) stops a command at once. */
ff_status ff__transport_pass(ff__pass *p, ff__tar_shard *sc, ff__error *err);

#endif
