/* tar.h — WebDataset tar shards as an index of samples read by offset. */
#ifndef FF_SOURCE_TAR_H
#define FF_SOURCE_TAR_H

#include "source/source.h"

/* Builds the index of "tar:PATTERN" (PATTERN without "tar:"; see
 * fusionflow.h and ff__shards_expand): each shard is indexed once with
 * libarchive, the index cached (see ff__tar_cache_dir), and every sample
 * located by its image member's data offset and size. Members and shards
 * that cannot make a sample (a missing or non-integer .cls, an image
 * missing, a duplicate member or key, a truncated or corrupt shard, an
 * empty or missing shard) are left out and listed in out->bad, each message
 * naming shard and member; the caller decides whether they fail the open.
 * Returns FF_OK, FF_EINVAL (a malformed pattern, a streaming URL),
 * FF_EEMPTY (no sample at all: the message gives the first reason),
 * FF_EIO (no shard of the pattern exists), FF_ENOMEM. */
ff_status ff__tar_open(const char *pattern, ff__index *out, ff__error *err);

/* The folder of the shard indexes: $FF_CACHE_DIR, else
 * $XDG_CACHE_HOME/fusionflow, else $HOME/.cache/fusionflow (with "/tar"
 * appended); writes "" (no cache) when FF_CACHE_DIR is set but empty or no
 * folder can be named. */
void ff__tar_cache_dir(char *out, size_t cap);

#endif
