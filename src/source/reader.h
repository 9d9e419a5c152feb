/* reader.h — how a worker gets a sample's encoded bytes from a source that
 * is not a file per sample (a callback source; others may plug in the same
 * way). The index of such a source holds a reader; a sample job carries it
 * with a hint, the samples of the batch the sample belongs to, so that a
 * reader can fetch a whole batch at once (one call into the caller, e.g. one
 * hold of Python's GIL, per batch). */
#ifndef FF_SOURCE_READER_H
#define FF_SOURCE_READER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/image.h"

/* The batch a sample is read for: its samples (dataset indices, in order),
 * valid for the duration of the read, and a key naming the batch (the same
 * for every sample of one batch of one epoch). batch NULL: no batch (a
 * substitute under on_error=replace, a plan printout). */
typedef struct ff__read_hint {
  const int64_t *batch;
  int batch_count;
  uint64_t batch_key;
} ff__read_hint;

typedef struct ff__reader ff__reader;

/* Reads sample `index` (named `name` in messages) into *out: *size_bytes
 * encoded bytes and the label the source gave with them. Thread-safe.
 * Returns FF_OK, FF_EDATA (the source could not give the sample: the message
 * names it and says why), FF_ENOMEM. */
ff_status ff__reader_read(ff__reader *r, uint64_t index, const ff__read_hint *hint, const char *name,
                          ff__buf *out, size_t *size_bytes, int64_t *label, ff__error *err);

/* Gives back everything the reader holds; no read may be running. NULL: nothing. */
void ff__reader_destroy(ff__reader *r);

#endif
