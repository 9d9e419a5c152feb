/* callback.c — the callback source: samples whose encoded bytes and labels
 * the caller gives through ff_source_callbacks (fusionflow.h), e.g. a Python
 * dataset. Its index has a name per sample ("NAME[i]") for messages, no
 * encoded sizes (0: unknown before reading) and no labels: they come with
 * the bytes.
 *
 * Reads are grouped by batch: the first worker that needs a sample of a
 * batch fetches all of the batch's samples in one call (one hold of
 * Python's GIL), outside any lock; the others wait for it, then each copies
 * its own item into its buffer. A fetch's items are released once all were
 * copied, or when their batch is evicted: the cache keeps at most
 * `max_batches` fetches not in use, the oldest going first, so memory stays
 * bounded by the ring even when a seek abandons batches half read. A sample
 * read again (after a seek, as a substitute, for a plan) is fetched alone. */
#include "source/callback.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fetched {
  uint64_t key; /* the batch's key; UINT64_MAX: a fetch of one sample */
  size_t n;
  uint64_t *indices;
  ff_source_item *items;
  unsigned char *taken; /* per item: copied out, or being copied */
  size_t left;          /* items not taken */
  int users;            /* workers copying out of it now */
  int fetching;         /* the fetch call is running */
  uint64_t age;         /* when it was made: the oldest goes first */
} fetched;

struct ff__reader {
  ff_source_callbacks cb;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  fetched **cache;
  size_t used, cap, max_batches;
  uint64_t clock;
};

static fetched *fetched_new(size_t n) {
  fetched *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->indices = calloc(n, sizeof *f->indices);
  f->items = calloc(n, sizeof *f->items);
  f->taken = calloc(n, 1);
  if (!f->indices || !f->items || !f->taken) {
    free(f->indices), free(f->items), free(f->taken), free(f);
    return NULL;
  }
  f->n = f->left = n;
  return f;
}

/* Hands the items back to the caller and frees f. Unlocked or locked: release never calls us. */
static void fetched_free(const ff__reader *r, fetched *f) {
  if (r->cb.release) r->cb.release(r->cb.ctx, f->items, f->n);
  free(f->indices), free(f->items), free(f->taken), free(f);
}

static void run_fetch(const ff__reader *r, fetched *f) { r->cb.fetch(r->cb.ctx, f->indices, f->n, f->items); }

/* Removes cache[i] (locked). */
static void drop_at(ff__reader *r, size_t i) { r->cache[i] = r->cache[--r->used]; }

/* Makes room for one more fetch (locked): evicts the oldest idle ones past
 * max_batches. Returns the evicted fetches through *out (freed unlocked). */
static size_t evict(ff__reader *r, fetched **out, size_t cap) {
  size_t n = 0;
  while (r->used >= r->max_batches && n < cap) {
    size_t oldest = r->used;
    for (size_t i = 0; i < r->used; i++)
      if (!r->cache[i]->users && !r->cache[i]->fetching &&
          (oldest == r->used || r->cache[i]->age < r->cache[oldest]->age))
        oldest = i;
    if (oldest == r->used) break; /* all busy: go over the bound for a while */
    out[n++] = r->cache[oldest];
    drop_at(r, oldest);
  }
  return n;
}

/* The fetch of the hinted batch, started by this call if no one did, with
 * this caller counted as a user (locked; unlocks while fetching). NULL when
 * out of memory. */
static fetched *batch_fetch(ff__reader *r, const ff__read_hint *hint) {
  for (size_t i = 0; i < r->used; i++)
    if (r->cache[i]->key == hint->batch_key) return r->cache[i]->users++, r->cache[i];
  if (r->used == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 8;
    fetched **grown = realloc(r->cache, cap * sizeof *grown);
    if (!grown) return NULL;
    r->cache = grown, r->cap = cap;
  }
  fetched *f = fetched_new((size_t)hint->batch_count);
  if (!f) return NULL;
  f->key = hint->batch_key;
  f->age = r->clock++;
  f->fetching = 1;
  f->users = 1;
  for (size_t k = 0; k < f->n; k++)
    f->indices[k] = (uint64_t)hint->batch[k];
  fetched *gone[4];
  size_t n_gone = evict(r, gone, 4);
  r->cache[r->used++] = f;
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < n_gone; i++)
    fetched_free(r, gone[i]);
  run_fetch(r, f);
  pthread_mutex_lock(&r->mu);
  f->fetching = 0;
  pthread_cond_broadcast(&r->cv);
  return f;
}

/* Copies an item's bytes into out (unlocked). */
static ff_status copy_item(const ff_source_item *it, uint64_t index, const char *name, ff__buf *out,
                           size_t *size_bytes, int64_t *label, ff__error *err) {
  if (it->error) return ff__error_set(err, FF_EDATA, "%s: %s", name, it->error);
  if (!it->data || it->label < 0)
    return ff__error_set(err, FF_EDATA, "%s: the source gave %s for sample %llu", name,
                         it->data ? "a negative label" : "no bytes and no error", (unsigned long long)index);
  uint8_t *dst = ff__buf_reserve(out, it->size_bytes ? it->size_bytes : 1);
  if (!dst) return ff__error_set(err, FF_ENOMEM, "%s: out of memory for %zu bytes", name, it->size_bytes);
  memcpy(dst, it->data, it->size_bytes);
  *size_bytes = it->size_bytes;
  *label = it->label;
  return FF_OK;
}

ff_status ff__reader_read(ff__reader *r, uint64_t index, const ff__read_hint *hint, const char *name,
                          ff__buf *out, size_t *size_bytes, int64_t *label, ff__error *err) {
  pthread_mutex_lock(&r->mu);
  fetched *f = hint && hint->batch && hint->batch_count > 0 ? batch_fetch(r, hint) : NULL;
  while (f && f->fetching)
    pthread_cond_wait(&r->cv, &r->mu);
  size_t k = f ? f->n : 0;
  for (size_t i = 0; f && i < f->n && k == f->n; i++)
    if (f->indices[i] == index && !f->taken[i]) k = i;
  int mine = f && k < f->n;
  if (mine) f->taken[k] = 1, f->left--;
  pthread_mutex_unlock(&r->mu);
  ff_status st = mine ? copy_item(&f->items[k], index, name, out, size_bytes, label, err) : FF_OK;
  if (f) {
    pthread_mutex_lock(&r->mu);
    int done = --f->users == 0 && f->left == 0;
    for (size_t i = 0; done && i < r->used; i++)
      if (r->cache[i] == f) drop_at(r, i);
    pthread_mutex_unlock(&r->mu);
    if (done) fetched_free(r, f);
  }
  if (mine) return st;
  /* not in a batch, or read already: alone */
  fetched *one = fetched_new(1);
  if (!one) return ff__error_set(err, FF_ENOMEM, "%s: out of memory", name);
  one->indices[0] = index;
  run_fetch(r, one);
  st = copy_item(&one->items[0], index, name, out, size_bytes, label, err);
  fetched_free(r, one);
  return st;
}

void ff__reader_destroy(ff__reader *r) {
  if (!r) return;
  for (size_t i = 0; i < r->used; i++)
    fetched_free(r, r->cache[i]);
  free(r->cache);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

/* "NAME[i]" for every sample, in one block: index.paths points into it. */
static ff_status make_names(const char *name, size_t count, ff__index *out, ff__error *err) {
  size_t width = strlen(name) + 24; /* "[" + 20 digits + "]" + NUL */
  out->paths = calloc(count, sizeof *out->paths);
  char *block = count && width <= SIZE_MAX / count ? malloc(count * width) : NULL;
  if (!out->paths || !block) {
    free(block);
    return ff__error_set(err, FF_ENOMEM, "out of memory naming %zu samples", count);
  }
  for (size_t i = 0; i < count; i++) {
    out->paths[i] = block + i * width;
    snprintf(out->paths[i], width, "%s[%zu]", name, i);
  }
  return FF_OK;
}

ff_status ff__callback_source_open(const ff_source_callbacks *cb, size_t max_batches, ff__index *out,
                                   ff__error *err) {
  if (!cb->fetch) return ff__error_set(err, FF_EINVAL, "source_callbacks.fetch is required");
  if (!cb->count)
    return ff__error_set(err, FF_EEMPTY, "source_callbacks: the source holds no sample (count 0)");
  const char *name = cb->name && *cb->name ? cb->name : "callback";
  *out = (ff__index){.count = cb->count, .names_block = 1};
  ff__reader *r = calloc(1, sizeof *r);
  out->size_bytes = calloc(cb->count, sizeof *out->size_bytes);
  ff_status st = r && out->size_bytes
                     ? make_names(name, cb->count, out, err)
                     : ff__error_set(err, FF_ENOMEM, "out of memory indexing %zu samples", cb->count);
  if (st) { /* make_names keeps no block when it fails */
    free(r);
    free(out->paths);
    free(out->size_bytes);
    *out = (ff__index){0};
    return st;
  }
  r->cb = *cb;
  r->max_batches = max_batches ? max_batches : 1;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  out->reader = r;
  return FF_OK;
}
