/* pool.c — the budgeted device memory pool (see pool.h): size classes, a
 * cache of freed blocks, and a limit that follows the device's free memory.
 *
 * Bookkeeping is a flat array of the raw blocks: a microbatch holds a
 * handful, so a linear search beats any index. When a request does not fit
 * under the limit, cached blocks of other classes go back to the device
 * first; when the device itself refuses, the whole cache goes back and the
 * request is tried once more. Either refusal is FF__EBUDGET; any other
 * failure of the device is not a budget matter and passes up as the
 * device's error. */
#include "exec/pool.h"

#include <stdlib.h>

struct ff__pool_block {
  void *ptr;
  size_t class_bytes;
  int in_use;
};

size_t ff__pool_class_bytes(size_t size_bytes) {
  size_t c = 512;
  if (size_bytes <= c) return c;
  while (c < size_bytes / 2 + 1 && c <= SIZE_MAX / 4)
    c *= 2;                              /* c <= size < 2c */
  for (size_t q = c / 4, k = c;; k += q) /* c, 1.25c, 1.5c, 1.75c, 2c */
    if (k >= size_bytes) return k;
}

static size_t limit_from(const ff__pool *p, size_t free_bytes) {
  size_t avail = p->reserved_bytes + free_bytes;
  size_t lim = avail > p->cfg.headroom_bytes ? avail - p->cfg.headroom_bytes : 0;
  if (p->cfg.limit_bytes && p->cfg.limit_bytes < lim) lim = p->cfg.limit_bytes;
  return lim;
}

static void release_block(ff__pool *p, size_t i) {
  p->be.free(p->be.ctx, p->blocks[i].ptr, p->blocks[i].class_bytes);
  p->reserved_bytes -= p->blocks[i].class_bytes;
  p->blocks[i] = p->blocks[--p->num_blocks];
}

/* Hands cached blocks back until reserved + need <= limit (need 0: just
 * under the limit); all of them with all = 1. */
static void release_cached(ff__pool *p, size_t need, int all) {
  for (size_t i = p->num_blocks; i-- > 0;) {
    if (!all && p->reserved_bytes + need <= p->limit_bytes) return;
    if (!p->blocks[i].in_use) release_block(p, i);
  }
}

static ff_status refresh_locked(ff__pool *p, ff__error *err) {
  size_t free_bytes = 0, total_bytes = 0;
  if (p->be.mem_info(p->be.ctx, &free_bytes, &total_bytes))
    return ff__error_set(err, FF_EDEVICE, "device memory query failed");
  if (p->given_free >= 0 && (size_t)p->given_free < free_bytes) /* never more than is free */
    free_bytes = (size_t)p->given_free;
  p->limit_bytes = limit_from(p, free_bytes);
  size_t reserved = p->reserved_bytes;
  release_cached(p, 0, 0);
  if (p->reserved_bytes < reserved && p->be.trim) p->be.trim(p->be.ctx); /* the trainer gets it now */
  return FF_OK;
}

ff_status ff__pool_init(ff__pool *p, const ff__pool_backend *be, const ff__pool_config *cfg, ff__error *err) {
  *p = (ff__pool){.be = *be, .cfg = *cfg, .given_free = -1};
  if (pthread_mutex_init(&p->lock, NULL))
    return ff__error_set(err, FF_ENOMEM, "cannot create the pool's lock");
  ff_status st = refresh_locked(p, err);
  if (st) pthread_mutex_destroy(&p->lock);
  return st;
}

void ff__pool_destroy(ff__pool *p) {
  while (p->num_blocks)
    release_block(p, p->num_blocks - 1);
  free(p->blocks);
  pthread_mutex_destroy(&p->lock);
  *p = (ff__pool){0};
}

static ff_status alloc_locked(ff__pool *p, size_t size_bytes, void **out, ff__error *err) {
  if (!size_bytes) return ff__error_set(err, FF_EINVAL, "device allocation of 0 bytes");
  size_t cb = ff__pool_class_bytes(size_bytes);
  for (size_t i = 0; i < p->num_blocks; i++)
    if (!p->blocks[i].in_use && p->blocks[i].class_bytes == cb) {
      p->blocks[i].in_use = 1;
      p->used_bytes += cb;
      *out = p->blocks[i].ptr;
      return FF_OK;
    }
  if (p->cfg.refresh_every && ++p->allocs % p->cfg.refresh_every == 0) {
    ff_status st = refresh_locked(p, err);
    if (st) return st;
  }
  if (p->reserved_bytes + cb > p->limit_bytes) release_cached(p, cb, 0);
  if (p->reserved_bytes + cb > p->limit_bytes)
    return ff__error_set(err, FF__EBUDGET,
                         "device memory budget exceeded: %zu bytes wanted, %zu of %zu in use", cb,
                         p->reserved_bytes, p->limit_bytes);
  if (p->num_blocks == p->cap_blocks) {
    size_t cap = p->cap_blocks ? 2 * p->cap_blocks : 16;
    ff__pool_block *b = realloc(p->blocks, cap * sizeof *b);
    if (!b) return ff__error_set(err, FF_ENOMEM, "out of host memory for the device pool");
    p->blocks = b, p->cap_blocks = cap;
  }
  void *ptr = NULL;
  ff__error raw_err = {0};
  ff_status st = p->be.alloc(p->be.ctx, cb, &ptr, &raw_err);
  if (st == FF__EBUDGET) { /* the device is fuller than the budget knew */
    release_cached(p, 0, 1);
    st = p->be.alloc(p->be.ctx, cb, &ptr, &raw_err);
  }
  if (st == FF__EBUDGET) return ff__error_set(err, FF__EBUDGET, "the device has no %zu bytes free", cb);
  if (st) return ff__error_set(err, st, "%s", raw_err.msg);
  p->blocks[p->num_blocks++] = (ff__pool_block){ptr, cb, 1};
  p->reserved_bytes += cb;
  p->used_bytes += cb;
  p->raw_allocs++;
  if (p->reserved_bytes > p->peak_bytes) p->peak_bytes = p->reserved_bytes;
  *out = ptr;
  return FF_OK;
}

ff_status ff__pool_alloc(ff__pool *p, size_t size_bytes, void **out, ff__error *err) {
  pthread_mutex_lock(&p->lock);
  ff_status st = alloc_locked(p, size_bytes, out, err);
  pthread_mutex_unlock(&p->lock);
  return st;
}

void ff__pool_free(ff__pool *p, void *ptr) {
  if (!ptr) return;
  pthread_mutex_lock(&p->lock);
  for (size_t i = 0; i < p->num_blocks; i++)
    if (p->blocks[i].ptr == ptr && p->blocks[i].in_use) {
      p->blocks[i].in_use = 0;
      p->used_bytes -= p->blocks[i].class_bytes;
      if (p->reserved_bytes > p->limit_bytes) release_block(p, i);
      break;
    }
  pthread_mutex_unlock(&p->lock);
}

ff_status ff__pool_refresh(ff__pool *p, ff__error *err) {
  pthread_mutex_lock(&p->lock);
  ff_status st = refresh_locked(p, err);
  pthread_mutex_unlock(&p->lock);
  return st;
}

ff_status ff__pool_set_free(ff__pool *p, int64_t free_bytes, ff__error *err) {
  pthread_mutex_lock(&p->lock);
  p->given_free = free_bytes < 0 ? -1 : free_bytes;
  ff_status st = refresh_locked(p, err);
  pthread_mutex_unlock(&p->lock);
  return st;
}

void ff__pool_trim(ff__pool *p) {
  pthread_mutex_lock(&p->lock);
  release_cached(p, 0, 1);
  pthread_mutex_unlock(&p->lock);
}

void ff__pool_stats_get(ff__pool *p, ff__pool_stats *out) {
  pthread_mutex_lock(&p->lock);
  *out = (ff__pool_stats){p->limit_bytes, p->reserved_bytes, p->used_bytes, p->peak_bytes, p->raw_allocs};
  pthread_mutex_unlock(&p->lock);
}
