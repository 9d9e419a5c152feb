/* ring.c — the ring entries' bookkeeping that the loader, its worker loop
 * and the remote placement (remote.c) share: finding a batch's entry or a
 * free one, an epoch's order, a batch's samples coming in (and the batch
 * made dense and READY with its last), the redo queue of samples handed
 * back to the CPU workers, and the job that runs a sample of an epoch's
 * order. Below loader.c, worker.c and remote.c, calling none of them. All
 * of it is under the loader's mutex. */
#include <string.h>

#include <stdlib.h>

#include "loader/loader_internal.h"
#include "loader/sampler.h"
#include "source/stream.h"

int ff__loader_batch_count(const ff_loader *l, size_t b) {
  size_t start = b * (size_t)l->cfg.batch_size, end = start + (size_t)l->cfg.batch_size;
  return (int)((end > l->total_items ? l->total_items : end) - start);
}

void ff__loader_order(ff_loader *l, uint64_t epoch) {
  if (l->stream) return ff__stream_order(l->stream, epoch, l->order[epoch & 1]);
  if (l->cfg.repeated_augmentations) {
    ff__sampler_ra_indices(l->index.count, l->cfg.shuffle, l->cfg.permutation, l->cfg.seed, epoch, l->cfg.rank,
                           l->cfg.world_size, l->cfg.repeated_augmentations, l->perm, l->order[epoch & 1],
                           l->repeat[epoch & 1]);
    return;
  }
  ff__sampler_indices(l->index.count, l->cfg.shuffle, l->cfg.permutation, l->cfg.seed, epoch, l->cfg.rank,
                      l->cfg.world_size, l->cfg.sampler_drop_last, l->perm, l->order[epoch & 1]);
}

/* Entries are taken from the free ones in batch order, so a batch the
 * consumer keeps only shrinks the ring until it is released. */
ff_batch *ff__ring_entry_of(ff_loader *l, uint64_t epoch, size_t b) {
  for (int i = 0; i < l->ring_size; i++) {
    ff_batch *e = &l->ring[i];
    if ((e->state == FF__BUF_FILLING || e->state == FF__BUF_READY) && e->index == b && e->epoch == epoch) return e;
  }
  return NULL;
}

ff_batch *ff__ring_free_entry(ff_loader *l) {
  for (int i = 0; i < l->ring_size; i++)
    if (l->ring[i].state == FF__BUF_FREE && ff__fence_clear(l, &l->ring[i])) return &l->ring[i];
  return NULL;
}

void ff__ring_clear_msgs(ff_loader *l, ff_batch *e) {
  for (int s = 0; s < l->batch_cap; s++) {
    free(e->skip_msg[s]), free(e->replace_msg[s]), free(e->warn_msg[s]);
    e->skip_msg[s] = e->replace_msg[s] = e->warn_msg[s] = NULL;
  }
}

/* Moves the samples after skipped slots down so the batch is dense. Locked. */
static void compact(ff_loader *l, ff_batch *e) {
  size_t n = 0, full = e->size;
  for (size_t s = 0; s < full; s++) {
    if (e->skip_msg[s]) continue;
    if (n != s) {
      for (int v = 0; v < l->views.num_views; v++) {
        char *base = (char *)e->images + l->view_offset[v];
        memmove(base + n * l->view_bytes[v], base + s * l->view_bytes[v], l->view_bytes[v]);
      }
      if (!l->views.num_views)
        memmove((char *)e->images + n * l->host_sample_bytes, (char *)e->images + s * l->host_sample_bytes,
                l->host_sample_bytes);
      e->labels[n] = e->labels[s];
      e->sample_indices[n] = e->sample_indices[s];
      if (e->dev_slot) e->dev_slot[n] = e->dev_slot[s];
    }
    n++;
  }
  e->size = n;
}

/* count samples of e are in place. */
void ff__loader_sample_finished(ff_loader *l, ff_batch *e, int count) {
  e->pending -= count;
  if (e->pending == 0) {
    compact(l, e);
    e->state = FF__BUF_READY;
  }
}

void ff__loader_redo(ff_loader *l, int entry, int slot, int why, uint64_t gen) {
  if (l->redo_count < l->redo_cap) /* every slot of the ring at most once */
    l->redo[(l->redo_head + l->redo_count++) % l->redo_cap] = (struct ff__redo){entry, slot, why, gen};
}

/* What a worker needs to run the sample at position `at` of `epoch`'s order. */
ff__sample_job ff__loader_sample_job(const ff_loader *l, uint64_t epoch, size_t at) {
  const ff_config *c = &l->cfg;
  int64_t sample = l->order[epoch & 1][at];
  ff__sample_job job = {.path = l->index.paths[sample], .seed = c->seed, .epoch = epoch, .index = (uint64_t)sample,
                        .max_pixels = c->max_image_pixels, .max_scans = c->max_jpeg_scans,
                        .max_metadata_bytes = c->max_metadata_bytes, .strict = c->strict_decode,
                        .max_member_bytes = ff__member_bytes_limit(c),
                        .repeat = l->repeat[epoch & 1] ? l->repeat[epoch & 1][at] : 0, .reader = l->index.reader};
  ff__index_locate(&l->index, (size_t)sample, &job.shard, &job.offset, &job.length);
  job.stream = l->stream;
  job.stream_gen = l->stream ? ff__stream_gen(l->stream) : 0; /* under the lock, as the restarts */
  return job;
}
