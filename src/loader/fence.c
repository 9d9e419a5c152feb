/* fence.c — host batches are refilled only after the consumer's copies of
 * them have read them (ff_loader_fence).
 *
 * A copy from pinned memory to a GPU (torch's .cuda(non_blocking=True))
 * only queues a cudaMemcpyAsync; the consumer may release the batch at
 * once, and a worker refilling it would change what the copy reads. So,
 * once the consumer fences, a host batch released afterwards is held back
 * until the next fence: that call records an event on the consumer's
 * stream after every copy queued so far, and the batch's memory is taken
 * for a new batch only once the event has completed (free_entry asks
 * ff__fence_clear; a worker with nothing else to take sleeps on the event,
 * one at a time). Batches released between a fence and the ff_loader_next
 * after it take that fence. Events come from a small pool on the pinning
 * device, reference-counted: one is recorded again only when no batch, no
 * sleeping worker and no "last fence" uses it, so a wait never follows a
 * later record on another stream. Everything here runs under the loader's
 * lock, except the sleep itself and the teardown. */
#include <stdlib.h>

#include "core/clock.h"
#include "loader/loader_internal.h"

void ff__fence_released(ff_loader *l, ff_batch *e) {
  if (l->fencing && !e->d_images) e->fence = FF__FENCE_AWAITED;
}

/* Entry e waits for fence event k (1-based) from now on. */
static void take_fence(ff_loader *l, ff_batch *e, int k) {
  e->fence = k;
  if (k > 0) l->fence_refs[k - 1]++;
}

static void drop_fence(ff_loader *l, ff_batch *e) {
  if (e->fence > 0) l->fence_refs[e->fence - 1]--;
  e->fence = 0;
}

void ff__fence_next(ff_loader *l) {
  int taken = 0;
  for (int i = 0; l->fencing && i < l->ring_size; i++)
    if (l->ring[i].fence == FF__FENCE_AWAITED) take_fence(l, &l->ring[i], l->last_fence), taken = 1;
  if (taken) pthread_cond_broadcast(&l->work_cv);
}

int ff__fence_clear(ff_loader *l, ff_batch *e) {
  if (e->fence == FF__FENCE_AWAITED) return 0;
  if (e->fence > 0) {
    int done = 1;
    /* a failed query (a sticky device error) does not keep the memory forever */
    if (ff__device_event_query(l->host_dev, l->fence_ev[e->fence - 1], &done, NULL) == FF_OK && !done) return 0;
    drop_fence(l, e);
  }
  return 1;
}

int ff__fence_sleep(ff_loader *l) {
  if (l->fence_sleeper) return 0;
  int k = 0;
  for (int i = 0; i < l->ring_size && !k; i++)
    if (l->ring[i].state == FF__BUF_FREE && l->ring[i].fence > 0) k = l->ring[i].fence;
  if (!k) return 0;
  l->fence_refs[k - 1]++, l->fence_sleeper = 1;
  pthread_mutex_unlock(&l->mu);
  uint64_t t0 = ff__now_ns();
  ff__device_event_wait(l->host_dev, l->fence_ev[k - 1], NULL); /* sleeps: events are blocking-sync */
  uint64_t waited = ff__now_ns() - t0;
  pthread_mutex_lock(&l->mu);
  l->fence_refs[k - 1]--, l->fence_sleeper = 0;
  l->stats.fence_wait_ns += waited;
  pthread_cond_broadcast(&l->work_cv);
  return 1;
}

/* The pool: enough events that one is always unused (each ring entry, the
 * last fence and a sleeping worker use at most one each). Locked. */
static ff_status make_events(ff_loader *l, ff__error *err) {
  int n = l->ring_size + 3;
  if (!l->fence_ev) {
    l->fence_ev = calloc((size_t)n, sizeof *l->fence_ev);
    l->fence_refs = calloc((size_t)n, sizeof *l->fence_refs);
  }
  if (!l->fence_ev || !l->fence_refs) {
    free(l->fence_ev), free(l->fence_refs);
    l->fence_ev = NULL, l->fence_refs = NULL;
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  for (; l->fence_slots < n; l->fence_slots++) {
    ff_status st = ff__device_event_create(l->host_dev, &l->fence_ev[l->fence_slots], err);
    if (st) return st;
  }
  return FF_OK;
}

ff_status ff_loader_fence(ff_loader *l, void *stream) {
  if (!l) return FF_EINVAL;
  if (!l->started_threads) return ff__error_set(&l->err, FF_EINVAL, "the loader failed to open: %s", l->err.msg);
  if (!l->host_dev || l->out_dev) return FF_OK; /* pageable memory is read by the time a copy call returns */
  ff__error err = {0};
  pthread_mutex_lock(&l->mu);
  ff_status st = l->fence_slots == l->ring_size + 3 ? FF_OK : make_events(l, &err);
  int k = 0;
  for (int i = 0; i < l->fence_slots && !st && !k; i++)
    if (!l->fence_refs[i]) k = i + 1;
  if (!st) st = ff__device_foreign_record(l->host_dev, l->fence_ev[k - 1], stream, &err);
  if (!st) {
    for (int i = 0; i < l->ring_size; i++)
      if (l->ring[i].fence == FF__FENCE_AWAITED) take_fence(l, &l->ring[i], k);
    if (l->last_fence) l->fence_refs[l->last_fence - 1]--;
    l->last_fence = k, l->fence_refs[k - 1]++;
    l->fencing = 1;
    l->stats.fences++;
    pthread_cond_broadcast(&l->work_cv); /* a worker may sleep on the event now */
  }
  pthread_mutex_unlock(&l->mu);
  if (st) return ff__error_set(&l->err, st, "fence on %s: %s", l->pinned_device, err.msg);
  return FF_OK;
}

const char *ff_loader_pinned_device(const ff_loader *l) {
  return l && l->host_dev ? l->pinned_device : "cpu";
}

int ff_loader_pinned_cuda_device(const ff_loader *l) {
  const char *name = ff_loader_pinned_device(l);
  return ff__device_name_kind(name) == FF__DEVICE_KIND_CUDA ? ff__device_name_ordinal(name) : -1;
}

void ff__fence_free(ff_loader *l) {
  for (int i = 0; i < l->fence_slots; i++) {
    if (l->fence_refs[i]) ff__device_event_wait(l->host_dev, l->fence_ev[i], NULL); /* copies still reading */
    ff__device_event_destroy(l->host_dev, l->fence_ev[i]);
  }
  free(l->fence_ev), free(l->fence_refs);
  l->fence_ev = NULL, l->fence_refs = NULL, l->fence_slots = 0;
}
