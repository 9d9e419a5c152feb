/* pool.h — the budgeted device memory pool: every byte of device memory
 * fusionflow uses comes from here, and never more than the budget.
 *
 * The pool is backend-agnostic: it calls a backend's raw allocate / free /
 * free-memory query (CUDA, the emulator, or a test's fake). Its limit is
 * min(user limit, free device memory at open - headroom); the free figure
 * is re-read (ff__pool_refresh, and by itself every `refresh_every`
 * allocations) and the limit follows it — shrinking, and handing cached
 * blocks back, when the trainer's memory grows. Blocks are rounded up to
 * size classes (four per power of two) and cached on free, so a steady
 * state of equal microbatches makes no raw allocation. Thread-safe. */
#ifndef FF_EXEC_POOL_H
#define FF_EXEC_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The pool (or the device) cannot provide the memory now: over the budget,
 * or the device itself is out of memory. Not fatal — the scheduler sends
 * the work to the CPU and may retry later. The public FF_EBUDGET. */
#define FF__EBUDGET FF_EBUDGET

typedef struct ff__pool_backend {
  void *ctx;
  /* Raw device allocation: FF_OK; FF__EBUDGET when the device is out of
   * memory; any other status is a device failure (message in err). */
  ff_status (*alloc)(void *ctx, size_t size_bytes, void **out, ff__error *err);
  void (*free)(void *ctx, void *ptr, size_t size_bytes); /* size_bytes: what alloc was asked for */
  /* Free and total device memory now. */
  ff_status (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
  /* Gives what the frees released back to the device at once (cuda:
   * cudaMemPoolTrimTo(0)); may be NULL. */
  void (*trim)(void *ctx);
} ff__pool_backend;

typedef struct ff__pool_config {
  size_t limit_bytes;     /* user limit; 0 = none */
  size_t headroom_bytes;  /* left free for others */
  unsigned refresh_every; /* re-read the free memory every this many allocations; 0 = only on refresh */
} ff__pool_config;

typedef struct ff__pool_stats {
  size_t limit_bytes;    /* the budget now */
  size_t reserved_bytes; /* taken from the device: in use + cached (never above the limit) */
  size_t used_bytes;     /* handed out (size classes) */
  size_t peak_bytes;     /* highest reserved_bytes since open */
  uint64_t raw_allocs;   /* raw allocations made (steady state: constant) */
} ff__pool_stats;

typedef struct ff__pool_block ff__pool_block;

typedef struct ff__pool {
  ff__pool_backend be;
  ff__pool_config cfg;
  pthread_mutex_t lock;
  size_t limit_bytes, reserved_bytes, used_bytes, peak_bytes;
  uint64_t raw_allocs, allocs;
  int64_t given_free;     /* at most this is free, as the caller sees it (ff__pool_set_free); -1: none */
  ff__pool_block *blocks; /* every raw block, in use or cached */
  size_t num_blocks, cap_blocks;
} ff__pool;

/* Reads the free memory and sets the limit. Returns FF_OK or FF_EDEVICE
 * (the query failed). */
ff_status ff__pool_init(ff__pool *p, const ff__pool_backend *be, const ff__pool_config *cfg, ff__error *err);

/* Frees every block (in use or not) and the pool's own memory. */
void ff__pool_destroy(ff__pool *p);

/* A block of at least size_bytes (256-byte aligned). Returns FF_OK,
 * FF__EBUDGET (message says whether the budget or the device said no; *out
 * untouched), the backend's status for any other device failure (not a
 * budget refusal: FF_EDEVICE), FF_ENOMEM (host bookkeeping), FF_EINVAL
 * (size 0). */
ff_status ff__pool_alloc(ff__pool *p, size_t size_bytes, void **out, ff__error *err);

/* Returns a block to the cache (or to the device, when the limit shrank
 * below what is reserved). NULL does nothing. */
void ff__pool_free(ff__pool *p, void *ptr);

/* Re-reads the free device memory: limit = min(user limit, reserved + free
 * - headroom); cached blocks are handed back while reserved > limit.
 * Returns FF_OK or FF_EDEVICE. */
ff_status ff__pool_refresh(ff__pool *p, ff__error *err);

/* Takes at most free_bytes as the device's free memory from now on (a
 * framework's view of what it can spare), never more than mem_info's free
 * memory: what another user caches unused is not ours to take; -1 goes
 * back to mem_info alone. Refreshes the limit at once: when it shrinks
 * below what is reserved, cached blocks go back and the device is trimmed.
 * FF_OK or FF_EDEVICE. */
ff_status ff__pool_set_free(ff__pool *p, int64_t free_bytes, ff__error *err);

/* Hands every cached block back to the device. */
void ff__pool_trim(ff__pool *p);

void ff__pool_stats_get(ff__pool *p, ff__pool_stats *out);

/* The size class of a request (what it takes from the budget). */
size_t ff__pool_class_bytes(size_t size_bytes);

#endif
