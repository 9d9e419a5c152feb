/* source.h — opening a dataset by its source string: the index of its samples
 * (source/index.h). */
#ifndef FF_SOURCE_SOURCE_H
#define FF_SOURCE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "source/index.h"

/* Builds the index of "imagefolder:DIR", "list:FILE" or "tar:PATTERN" (see fusionflow.h);
 * allow_empty: class folders without images keep their labels instead of
 * failing. Samples that cannot be stat'ed are kept with size 0 (they fail
 * when read). Returns FF_OK, FF_EINVAL (unknown kind), FF_EDATA (malformed
 * list line: message names the file and line), FF_EIO (the folder or list
 * missing or unreadable), FF_EEMPTY (no sample, or a class folder without
 * images), FF_ENOMEM; for tar: also FF_EINVAL (a malformed pattern), FF_EIO
 * (no shard of the pattern exists, or a streamed open given up). */
ff_status ff__source_open(const char *spec, int allow_empty, ff__index *out, ff__error *err);

/* ff__source_open telling progress (NULL: none) what a streamed tar: source's
 * open waits for, and giving it up when progress returns nonzero
 * (ff_config.open_progress): FF_EIO. */
ff_status ff__source_open_watched(const char *spec, int allow_empty, ff_open_progress_fn progress, void *ctx,
                                  ff__index *out, ff__error *err);

#endif
