/* ring.c — the ring entries' bookkeeping that the loader's worker loop and
 * the remote placement (remote.c) share: a batch's samples coming in (and
 * the batch made dense and READY with its last), the redo queue of samples
 * handed back to the CPU workers, and the job that runs a sample of an
 * epoch's order. Below loader.c and remote.c, calling neither. The redo
 * queue and the batch's count are under the loader's mutex. */
#include <string.h>

#include "loader/loader_internal.h"
#include "source/stream.h"

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
