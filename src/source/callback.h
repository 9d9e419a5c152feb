/* callback.h — the callback source (ff_source_callbacks in fusionflow.h). */
#ifndef FF_SOURCE_CALLBACK_H
#define FF_SOURCE_CALLBACK_H

#include "fusionflow/fusionflow.h"
#include "source/reader.h"
#include "source/index.h"

/* Builds the index of a callback source: cb->count samples named
 * "NAME[i]", no sizes or labels (they come with the bytes), and its reader,
 * which keeps at most max_batches idle batch fetches (the ring's batches
 * plus a few). cb is copied. Returns FF_OK, FF_EINVAL (no fetch), FF_EEMPTY
 * (count 0), FF_ENOMEM. */
ff_status ff__callback_source_open(const ff_source_callbacks *cb, size_t max_batches, ff__index *out,
                                   ff__error *err);

#endif
