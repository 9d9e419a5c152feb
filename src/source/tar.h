/* tar.h — WebDataset tar shards: the member reader that groups members into
 * samples (shared with the streamed shards of stream.c) and the index of file
 * shards, each sample read by offset. */
#ifndef FF_SOURCE_TAR_H
#define FF_SOURCE_TAR_H

#include "core/error.h"
#include "source/index.h"
#include "source/strlist.h"

struct archive;

/* The index of the file shards `shards` of "tar:PATTERN" (named by
 * ff__shards_expand; source.c sends a pattern with a streamed shard to
 * stream.c instead): each shard is indexed once with libarchive, the index
 * cached (see ff__tar_cache_dir), and every sample located by its image
 * member's data offset and size. Members and shards that cannot make a
 * sample (a missing or non-integer .cls, an image missing, a duplicate
 * member or key, a truncated or corrupt shard, an empty or missing shard)
 * are left out and listed in out->bad, each message naming shard and
 * member; the caller decides whether they fail the open. On success the
 * index owns the shard names (*shards is emptied). Returns FF_OK, FF_EEMPTY
 * (no sample at all: the message gives the first reason), FF_EIO (no shard
 * exists), FF_EINVAL (over 2^32 shards), FF_ENOMEM. */
ff_status ff__tar_index_files(const char *pattern, ff__strlist *shards, ff__index *out, ff__error *err);

/* The folder of the shard indexes: $FF_CACHE_DIR, else
 * $XDG_CACHE_HOME/fusionflow, else $HOME/.cache/fusionflow (with "/tar"
 * appended); writes "" (no cache) when FF_CACHE_DIR is set but empty or no
 * folder can be named. */
void ff__tar_cache_dir(char *out, size_t cap);

/* A sample of a shard: its image member, the data's place and its label. */
typedef struct ff__tar_sample {
  char *member;    /* the image member's path */
  size_t key_len;  /* its key is member[0..key_len) */
  uint64_t offset; /* byte offset of the data in the (uncompressed) tar */
  uint64_t size;   /* bytes */
  int64_t label;
} ff__tar_sample;

/* What scanning one shard found: its samples (in tar order), the members
 * that make none (bad: messages naming shard and member), the ignored ones. */
typedef struct ff__tar_shard {
  ff__tar_sample *s;
  size_t n, cap;
  ff__strlist bad;
  size_t ignored;
} ff__tar_shard;

void ff__tar_shard_free(ff__tar_shard *sc);

/* Called for each complete sample with its image's bytes (s->size of them). */
typedef ff_status (*ff__tar_sample_fn)(void *ctx, const ff__tar_sample *s, const uint8_t *data, ff__error *err);

/* A libarchive reader for shards: tar formats, any compression. NULL when out of memory. */
struct archive *ff__tar_archive_new(void);

/* Groups the members of the open archive `a` into samples (WebDataset's
 * rules, see tar.c), `shard` naming it in messages. file_bytes > 0: an
 * uncompressed file of that size (a member past its end is truncated, a
 * compressed one refused); 0: a stream. fn NULL: samples are appended to
 * sc->s (offsets valid for files); else each goes to fn with its bytes, as
 * it is complete (stream order), and sc->s stays empty. Problems go to
 * sc->bad, ignored members to sc->ignored. Returns FF_OK, FF_ENOMEM, or
 * what fn returns. */
ff_status ff__tar_scan_archive(struct archive *a, const char *shard, uint64_t file_bytes, ff__tar_sample_fn fn,
                               void *ctx, ff__tar_shard *sc, ff__error *err);

/* After a collecting scan: leaves out the samples whose key came earlier in
 * the shard (listed in sc->bad), and lists an empty shard. FF_OK or FF_ENOMEM. */
ff_status ff__tar_shard_finish(ff__tar_shard *sc, const char *shard, ff__error *err);

/* The index of what scans[i] found in shard shards->v[i] (for each name, in
 * order): each sample's path "SHARD:MEMBER", size, label and shard, its
 * data offset with with_offsets (file shards; else offsets is NULL), and
 * every scan's problems in out->bad, pattern naming the source in messages.
 * On success the index owns the shard names (*shards is emptied); scans
 * stay the caller's. Returns FF_OK, FF_EEMPTY (no sample: the message gives
 * the first problem), FF_EINVAL (over 2^32 shards), FF_ENOMEM. */
ff_status ff__tar_index_build(const char *pattern, ff__strlist *shards, const ff__tar_shard *scans,
                              int with_offsets, ff__index *out, ff__error *err);

#endif
