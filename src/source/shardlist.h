/* shardlist.h — the shards a tar: source names: WebDataset's brace notation
 * and files of shard names. */
#ifndef FF_SOURCE_SHARDLIST_H
#define FF_SOURCE_SHARDLIST_H

#include "core/error.h"
#include "source/strlist.h"

/* The most names one pattern may expand to. */
#define FF__SHARDS_MAX 10000000

/* Expands `pattern` into shard names appended to *out, in order:
 *   - several patterns separated by "::" (WebDataset's expand_urls);
 *   - braces as the braceexpand package (which WebDataset uses) reads them:
 *     {a,b,c} alternatives, {0..9} and {000..123} numeric ranges (zero
 *     padded to the wider end when either end has a leading zero), with an
 *     optional step {0..10..2}, descending when the first end is larger;
 *     nested braces; a brace pair without ',' or '..' stays literal;
 *   - "@FILE": the lines of FILE, each a pattern (empty lines and lines
 *     starting with '#' are ignored; only the text before a TAB counts, so a
 *     manifest written by `fusionflow shards make` is a list; a relative
 *     name is relative to FILE's folder).
 * Returns FF_OK, FF_EINVAL (an unbalanced brace, a range past
 * FF__SHARDS_MAX names; message names the pattern), FF_EIO (the list file),
 * FF_EEMPTY (nothing: an empty pattern or list file), FF_ENOMEM. */
ff_status ff__shards_expand(const char *pattern, ff__strlist *out, ff__error *err);

#endif
