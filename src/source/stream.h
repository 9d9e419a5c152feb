/* stream.h — tar shards read as streams (http://, https://, pipe:, compressed
 * files): counted once at open, then read sequentially in a two-level
 * shuffled order. */
#ifndef FF_SOURCE_STREAM_H
#define FF_SOURCE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "core/image.h"
#include "source/shardlist.h"
#include "source/source.h"

/* Whether a shard name is read as a stream: a URL (http://, https://),
 * pipe:COMMAND (WebDataset's: COMMAND's standard output is the shard), or a
 * local file named as compressed (.gz .tgz .bz2 .xz .zst .lz4 .lzma). */
int ff__stream_name(const char *name);

/* When a progress line is due (ff_open_progress.due), from the calls of an
 * open: a wait is a shard, attempt and backoff; a line is due once the
 * open has taken 2 s, at each wait's first call once it has lasted 0.5 s,
 * and whenever 10 s have passed since the last line. Start from zeros. */
typedef struct ff__open_rule {
  size_t shard;
  int attempt, backing_off; /* the current wait (attempt 0: none yet) */
  double since_s;           /* when it began, seconds into the open */
  int said;                 /* whether a line said it */
  int lines;                /* lines due so far */
  double line_s;            /* when the last one was */
} ff__open_rule;
int ff__open_rule_due(ff__open_rule *r, const ff_open_progress *p);

/* Builds the index of the streamed shards: reads each shard once from start
 * to end (retrying network errors, see ff__stream_open) to count its
 * samples and learn their labels, grouping members as the tar: source does;
 * out->streamed is set. Shards that fail and members that make no sample go
 * to out->bad as for local shards. progress (may be NULL) is called with
 * ctx as each attempt starts and about every 100 ms while one reads or
 * backs off (ff_config.open_progress); nonzero from it abandons the read in
 * progress and the open. Returns FF_OK, FF_EEMPTY (no sample), FF_EIO
 * (given up by progress: the message names the shard), FF_ENOMEM. */
ff_status ff__stream_index(const char *pattern, ff__strlist *shards, ff_open_progress_fn progress, void *ctx,
                           ff__index *out, ff__error *err);

typedef struct ff__stream ff__stream;

typedef struct ff__stream_cfg {
  uint64_t seed;
  int shuffle;            /* 0: shards in order, no buffer */
  int rank, world_size;
  size_t buffer;          /* shuffle buffer, samples (0: none) */
  size_t window;          /* samples the consumer side may ask for ahead of the oldest it waits for */
  int retries;            /* network retries per shard read (then the shard's samples fail) */
  int backoff_ms;         /* first retry's delay, doubled each time */
  uint64_t max_member_bytes;                           /* an image member over it fails its sample (0: any) */
  int (*is_image)(const uint8_t *head, size_t n);      /* first bytes of an image, or NULL (no check) */
} ff__stream_cfg;

/* Starts the reader thread of a streamed index for this rank, at epoch 0.
 * The epoch's order (ff__stream_order): the shards permuted with a seeded
 * Philox permutation per epoch; each shard in that order given to the rank
 * that has the fewest samples so far (the lowest on a tie); the rank's
 * shards read one after the other, their samples through a shuffle buffer
 * of cfg->buffer samples (a slot drawn from Philox(seed, epoch, rank) for
 * each sample that comes in; the rest drained in drawn order), cut to
 * ff__stream_num_samples. A pure function of (seed, epoch, rank,
 * world_size). Returns FF_OK, FF_EINVAL (fewer samples than ranks can share
 * equally: the message says how many shards and samples), FF_ENOMEM. */
ff_status ff__stream_open(const ff__index *index, const ff__stream_cfg *cfg, ff__stream **out, ff__error *err);

/* Samples every rank gets per epoch, the same for every epoch and rank:
 * floor((total - (world_size - 1) * largest shard) / world_size), which the
 * fewest-samples-first assignment always reaches (no two ranks differ by
 * more than one shard); each rank drops its samples past it (its tail). */
size_t ff__stream_num_samples(const ff__stream *s);

/* The epoch's order for the rank: ff__stream_num_samples sample indices. */
void ff__stream_order(const ff__stream *s, uint64_t epoch, int64_t *out);

/* Moves the reader to `position` of epoch's order (a seek, a new epoch):
 * samples waited for are given up (ff__stream_take returns FF_END), the
 * samples kept are dropped, and the reader starts the epoch's shards again,
 * skipping the shards all of whose samples come before position and the
 * samples before it. Does not wait. */
void ff__stream_restart(ff__stream *s, uint64_t epoch, size_t position);

/* The restart count: a sample asked for is tied to it (read it with the
 * sample's epoch and position, under the lock ff__stream_restart is called
 * under), so that a take for an order a restart replaced ends at once. */
uint64_t ff__stream_gen(const ff__stream *s);

/* Waits for sample `sample` of `epoch` and moves its bytes into *buf
 * (*size_bytes of them); each sample is taken once. The reader reads ahead
 * into the epoch after the latest one asked for, not further. Returns
 * FF_OK (buf adopts the bytes the reader held: no copy), FF_EIO (its shard
 * failed: the message names the URL or command and the reason), FF_ETOOBIG
 * or FF_EDATA (its member was refused before it was held: over
 * max_member_bytes, or not an image by its first bytes), FF_END (gen is not
 * ff__stream_gen's any more: a restart, or a close), FF_ENOMEM. Thread-safe. */
ff_status ff__stream_take(ff__stream *s, uint64_t gen, uint64_t epoch, int64_t sample, ff__buf *buf,
                          size_t *size_bytes, ff__error *err);

/* Stops the reader (promptly: a transfer or command in progress is
 * abandoned) and ends every wait in ff__stream_take (FF_END), now and
 * later; does not wait. NULL does nothing. */
void ff__stream_stop(ff__stream *s);

/* ff__stream_stop, waits for the reader to end and frees everything (no
 * thread may be in ff__stream_take); NULL does nothing. */
void ff__stream_close(ff__stream *s);

#endif
