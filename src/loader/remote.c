/* remote.c — the remote placement's runtime (ff_config.remote): which CPU
 * samples of a batch go to remote workers (sched/remote.h decides how
 * many), the microbatches they travel in, and their way back into the
 * batch. A remote sample comes back as the uint8 pixels of the pipeline
 * before its output step; it is converted here, by the same writer a CPU
 * worker ends with, so the batch is the same whatever ran where.
 *
 * A microbatch is a record: QUEUED when a split places its samples,
 * SUBMITTED once the executor took it, COMPLETING while its results are
 * converted (outside the lock, counted in the loader's busy so a restart
 * waits for it), then FREE. Each sample leaves its record once: converted,
 * or handed to the local workers' redo queue (failed there, timed out,
 * refused); a ticket that is no longer in a record is a late result and is
 * dropped. The loader's mutex guards the records. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "loader/loader_internal.h"
#include "sched/remote.h"

enum { MB_FREE, MB_QUEUED, MB_SUBMITTING, MB_SUBMITTED, MB_COMPLETING };

typedef struct remote_mb {
  int state;
  uint64_t id, gen, epoch;
  size_t batch;        /* the batch's index in its epoch */
  int entry, n;
  int *slots;          /* the batch's slots */
  size_t *at;          /* their places in the epoch's order */
  uint64_t *indices;   /* their dataset indices */
  int64_t *labels;     /* labels read with shipped bytes (a callback source), else -1 */
  void **data;         /* shipped bytes, or NULL */
  size_t *sizes;
  uint64_t submit_ns, bytes_sent;
} remote_mb;

struct ff__remote {
  ff_remote_executor ex;
  int ship;            /* the loader reads and sends the bytes */
  int stopped;         /* no more work goes out */
  char note[160];
  remote_mb *mbs;      /* ex.max_in_flight records */
  int in_use;          /* records not FREE */
  uint64_t next_id;
  size_t sample_bytes; /* one result: uint8 (H, W, 3) */
  ff__remote_state st;
  double forced;       /* >= 0: FF_FORCE_REMOTE_SHARE, every batch's share whatever its lead (tests) */
};

static void mb_clear(remote_mb *m) {
  for (int k = 0; m->data && k < m->n; k++) free(m->data[k]), m->data[k] = NULL;
  m->state = MB_FREE;
  m->n = 0;
}

ff_status ff__remote_open(ff_loader *l) {
  const ff_remote_executor *ex = l->cfg.struct_size > offsetof(ff_config, remote) ? l->cfg.remote : NULL;
  ff__error *err = &l->err;
  if (!ex) return FF_OK;
  if (!ex->submit) return ff__error_set(err, FF_EINVAL, "remote: the executor has no submit function");
  if (ex->workers < 1) return ff__error_set(err, FF_EINVAL, "remote: workers must be >= 1 (got %d)", ex->workers);
  if (ex->max_in_flight < 0 || ex->microbatch_size < 0 || ex->microbatch_size > 1 << 16)
    return ff__error_set(err, FF_EINVAL, "remote: max_in_flight must be >= 0 and microbatch_size in [0, 65536] "
                         "(got %d, %d)", ex->max_in_flight, ex->microbatch_size);
  if (l->views.num_groups)
    return ff__error_set(err, FF_EINVAL, "remote workers run one pipeline per sample: a pipeline with views "
                         "runs locally");
  for (int i = 0; i < l->pipe.num_ops; i++)
    if (l->pipe.ops[i].kind == FF__OP_RANDOM_ERASING)
      return ff__error_set(err, FF_EINVAL, "remote workers send uint8 pixels: random_erasing (pipeline column %d) "
                           "writes the float output, so it runs locally", l->pipe.ops[i].column);
  if (l->stream)
    return ff__error_set(err, FF_EINVAL, "%s: remote workers need random access to the samples; a streamed "
                         "source is read in order by this process", l->cfg.source);
  ff__remote *r = calloc(1, sizeof *r);
  if (!r) return ff__error_set(err, FF_ENOMEM, "out of memory");
  l->remote = r;
  r->ex = *ex;
  if (!r->ex.max_in_flight) r->ex.max_in_flight = 2 * ex->workers;
  if (!r->ex.microbatch_size) r->ex.microbatch_size = 16;
  if (!r->ex.timeout_ms) r->ex.timeout_ms = 60000;
  r->ship = !ex->reads_source || l->cfg.source_callbacks;
  r->sample_bytes = (size_t)l->pipe.out_height * (size_t)l->pipe.out_width * 3;
  r->next_id = 1;
  ff__remote_state_init(&r->st);
  const char *force = getenv("FF_FORCE_REMOTE_SHARE");
  char *end = NULL;
  r->forced = force && *force ? strtod(force, &end) : -1;
  if (force && *force && (*end || !(r->forced >= 0 && r->forced <= 1)))
    return ff__error_set(err, FF_EINVAL, "environment variable FF_FORCE_REMOTE_SHARE='%s' is not in [0, 1]", force);
  size_t m = (size_t)r->ex.microbatch_size;
  if (!(r->mbs = calloc((size_t)r->ex.max_in_flight, sizeof *r->mbs)))
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (int i = 0; i < r->ex.max_in_flight; i++) {
    remote_mb *mb = &r->mbs[i];
    mb->slots = malloc(m * sizeof *mb->slots), mb->at = malloc(m * sizeof *mb->at);
    mb->indices = malloc(m * sizeof *mb->indices), mb->labels = malloc(m * sizeof *mb->labels);
    mb->data = r->ship ? calloc(m, sizeof *mb->data) : NULL, mb->sizes = malloc(m * sizeof *mb->sizes);
    if (!mb->slots || !mb->at || !mb->indices || !mb->labels || (r->ship && !mb->data) || !mb->sizes)
      return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  l->stats.remote_workers = ex->workers;
  l->stats.remote_note = r->note;
  return FF_OK;
}

void ff__remote_free(ff_loader *l) {
  ff__remote *r = l->remote;
  if (!r) return;
  for (int i = 0; r->mbs && i < r->ex.max_in_flight; i++) {
    remote_mb *mb = &r->mbs[i];
    if (mb->data) mb_clear(mb);
    free(mb->slots), free(mb->at), free(mb->indices), free(mb->labels), free(mb->data), free(mb->sizes);
  }
  free(r->mbs);
  free(r);
  l->remote = NULL;
}

static int ring_ready(const ff_loader *l) {
  int n = 0;
  for (int i = 0; i < l->ring_size; i++) n += l->ring[i].state == FF__BUF_READY;
  return n;
}

void ff__remote_split(ff_loader *l, ff_batch *e) {
  ff__remote *r = l->remote;
  if (!r || r->stopped) return;
  int n = e->pending, n_cpu = 0, m = r->ex.microbatch_size;
  size_t first = e->index * (size_t)l->cfg.batch_size;
  const uint32_t *repeat = l->repeat[e->epoch & 1];
  for (int s = 0; s < n; s++) /* a repeated copy draws by its copy number, which workers do not take */
    n_cpu += e->placement[s] == FF_PLACEMENT_CPU && (!repeat || !repeat[first + (size_t)s]);
  int room = (r->ex.max_in_flight - r->in_use) * m;
  double ahead = (double)(e->epoch - l->out_epoch) * (double)l->num_batches + (double)e->index - (double)l->next_out;
  ff__remote_state st = r->st;
  double ahead_s = ahead * st.interval_s;
  if (r->forced >= 0) st.share = r->forced, st.rtt_s = 0, ahead_s = 1;
  int k = ff__remote_count(&st, n, n_cpu, room, ahead_s, ring_ready(l), l->cfg.prefetch);
  remote_mb *mb = NULL;
  for (int s = n - 1; s >= 0 && k > 0; s--) { /* the last CPU slots: the workers start from the first */
    if (e->placement[s] != FF_PLACEMENT_CPU || (repeat && repeat[first + (size_t)s])) continue;
    if (!mb || mb->n == m) {
      mb = NULL;
      for (int i = 0; i < r->ex.max_in_flight && !mb; i++)
        if (r->mbs[i].state == MB_FREE) mb = &r->mbs[i];
      if (!mb) break;
      *mb = (remote_mb){.state = MB_QUEUED, .id = r->next_id++, .gen = l->gen, .epoch = e->epoch, .batch = e->index,
                        .entry = (int)(e - l->ring), .slots = mb->slots, .at = mb->at, .indices = mb->indices,
                        .labels = mb->labels, .data = mb->data, .sizes = mb->sizes};
      r->in_use++;
    }
    e->placement[s] = FF_PLACEMENT_REMOTE;
    mb->slots[mb->n] = s, mb->at[mb->n] = first + (size_t)s;
    mb->indices[mb->n] = (uint64_t)l->order[e->epoch & 1][first + (size_t)s];
    mb->labels[mb->n] = -1, mb->sizes[mb->n] = 0;
    mb->n++, k--;
  }
}

/* Reads the bytes of mb's samples on worker w (unlocked): a sample that
 * cannot be read here gets size SIZE_MAX and runs on a local worker, which
 * fails it as it would. Returns the bytes read. */
static uint64_t read_bytes(ff__worker *w, remote_mb *mb, const ff__sample_job *jobs) {
  uint64_t sent = 0;
  for (int k = 0; k < mb->n; k++) {
    size_t size = 0;
    ff__error err = {0};
    mb->sizes[k] = SIZE_MAX;
    if (!jobs || ff__sample_bytes(w, &jobs[k], &size, &err) || !(mb->data[k] = malloc(size ? size : 1))) continue;
    memcpy(mb->data[k], w->file.data, size);
    mb->sizes[k] = size, mb->labels[k] = w->label, sent += size;
  }
  return sent;
}

/* Moves mb's unread samples (size SIZE_MAX) to the local workers. Locked. */
static void drop_unread(ff_loader *l, remote_mb *mb) {
  int keep = 0;
  for (int k = 0; k < mb->n; k++) {
    if (mb->sizes[k] == SIZE_MAX) {
      ff__loader_redo(l, mb->entry, mb->slots[k], FF__REDO_REMOTE, mb->gen);
      l->stats.remote_fallbacks++;
      continue;
    }
    mb->slots[keep] = mb->slots[k], mb->at[keep] = mb->at[k], mb->indices[keep] = mb->indices[k];
    mb->labels[keep] = mb->labels[k], mb->sizes[keep] = mb->sizes[k], mb->data[keep] = mb->data[k];
    keep++;
  }
  for (int k = keep; k < mb->n; k++) mb->data[k] = NULL;
  mb->n = keep;
}

/* Sends every QUEUED record: with shipped bytes it reads them on worker w
 * first. Locked on entry and return; unlocks around the reads and the
 * submit (busy counts it, so a restart waits for it). Returns 1 when it
 * unlocked. */
int ff__remote_flush(ff_loader *l, ff__worker *w) {
  ff__remote *r = l->remote;
  int unlocked = 0;
  for (;;) { /* the records change while it is unlocked: look again from the first each time */
    remote_mb *mb = NULL;
    for (int i = 0; r && i < r->ex.max_in_flight && !mb; i++)
      if (r->mbs[i].state == MB_QUEUED) mb = &r->mbs[i];
    if (!mb) break;
    mb->state = MB_SUBMITTING;
    ff__sample_job *jobs = r->ship ? malloc((size_t)mb->n * sizeof *jobs) : NULL;
    for (int k = 0; jobs && k < mb->n; k++) jobs[k] = ff__loader_sample_job(l, mb->epoch, mb->at[k]);
    l->busy++;
    pthread_mutex_unlock(&l->mu);
    unlocked = 1;
    uint64_t sent = r->ship ? read_bytes(w, mb, jobs) : 0; /* no memory for the jobs: none is read */
    free(jobs);
    pthread_mutex_lock(&l->mu);
    if (r->ship) drop_unread(l, mb);
    mb->bytes_sent = sent;
    ff_remote_task task = {mb->id, mb->epoch, (size_t)mb->n, mb->indices,
                           r->ship ? (const void *const *)mb->data : NULL, r->ship ? mb->sizes : NULL,
                           r->sample_bytes};
    int go = mb->n && !r->stopped;
    uint64_t id = mb->id;
    mb->state = MB_SUBMITTED; /* a completion may come before submit returns */
    mb->submit_ns = ff__now_ns();
    pthread_mutex_unlock(&l->mu);
    int refused = go ? r->ex.submit(r->ex.ctx, &task) : mb->n > 0;
    pthread_mutex_lock(&l->mu);
    l->busy--;
    if (refused && !r->stopped) {
      r->stopped = 1;
      snprintf(r->note, sizeof r->note, "the remote executor refused a microbatch: the rest runs locally");
    }
    if (mb->state != MB_SUBMITTED || mb->id != id) {
      /* completed (or timed out) already */
    } else if (refused || !mb->n) {
      for (int k = 0; k < mb->n; k++) ff__loader_redo(l, mb->entry, mb->slots[k], FF__REDO_REMOTE, mb->gen);
      l->stats.remote_fallbacks += (uint64_t)mb->n;
      if (mb->n) pthread_cond_broadcast(&l->work_cv);
      mb_clear(mb);
      r->in_use--;
    }
    l->stats.remote_bytes_sent += refused ? 0 : sent;
    if (l->restarting && !l->busy) pthread_cond_broadcast(&l->ready_cv);
  }
  return unlocked;
}

/* A record's samples go to the local workers. Locked. */
static void take_back(ff_loader *l, remote_mb *mb) {
  for (int k = 0; k < mb->n; k++) ff__loader_redo(l, mb->entry, mb->slots[k], FF__REDO_REMOTE, mb->gen);
  l->stats.remote_fallbacks += (uint64_t)mb->n;
  mb_clear(mb);
  l->remote->in_use--;
}

ff_status ff_loader_remote_complete(ff_loader *l, uint64_t id, const void *samples, size_t size_bytes,
                                    const ff_status *statuses, int attempts, uint64_t worker_cpu_ns) {
  if (!l) return FF_EINVAL;
  pthread_mutex_lock(&l->mu);
  ff__remote *r = l->remote;
  remote_mb *mb = NULL;
  for (int i = 0; r && i < r->ex.max_in_flight && !mb; i++)
    if (r->mbs[i].state == MB_SUBMITTED && r->mbs[i].id == id) mb = &r->mbs[i];
  if (!mb) {
    l->stats.remote_late++;
    pthread_mutex_unlock(&l->mu);
    return FF_OK;
  }
  ff_status st = FF_OK;
  if (samples && size_bytes != (size_t)mb->n * r->sample_bytes) {
    st = ff__error_set(&l->err, FF_EINVAL, "remote: microbatch %llu: %zu result bytes for %d samples of %zu",
                       (unsigned long long)id, size_bytes, mb->n, r->sample_bytes);
    samples = NULL;
  }
  ff_batch *e = &l->ring[mb->entry];
  int live = e->gen == mb->gen && mb->gen == l->gen && e->state == FF__BUF_FILLING && e->epoch == mb->epoch &&
             e->index == mb->batch;
  mb->state = MB_COMPLETING;
  l->busy++;
  pthread_mutex_unlock(&l->mu);

  uint64_t t0 = ff__now_ns();
  int ok = 0;
  for (int k = 0; live && samples && k < mb->n; k++) {
    if (statuses && statuses[k]) continue;
    const ff__pipeline *p = &l->host_pipe;
    ff__image img = {(uint8_t *)samples + (size_t)k * r->sample_bytes, p->out_width, p->out_height, 3,
                     (size_t)p->out_width * 3};
    ff__op_write_output(p, &img, e->images, mb->slots[k]);
    ok++;
  }
  uint64_t t1 = ff__now_ns();

  pthread_mutex_lock(&l->mu);
  l->busy--;
  l->stats.remote_microbatches++;
  l->stats.remote_latency_ns += t1 - mb->submit_ns;
  l->stats.remote_bytes_received += samples ? size_bytes : 0;
  l->stats.remote_retries += attempts > 1 ? (uint64_t)(attempts - 1) : 0;
  l->stats.remote_worker_cpu_ns += worker_cpu_ns;
  l->stats.remote_convert_ns += t1 - t0;
  if (samples)
    ff__remote_learn(&l->sched_params, &r->st, mb->n, (double)(t0 - mb->submit_ns) * 1e-9,
                     mb->bytes_sent + size_bytes, r->ex.max_in_flight);
  l->stats.remote_rtt_s = r->st.rtt_s;
  if (l->trace)
    ff__trace_span(l->trace, FF__TRACK_REMOTE, "remote microbatch", mb->submit_ns, t1 - mb->submit_ns, "batch",
                   (int64_t)e->index);
  if (live && e->gen == l->gen && e->state == FF__BUF_FILLING) { /* busy kept it so */
    int redo = 0;
    for (int k = 0; k < mb->n; k++) {
      int slot = mb->slots[k];
      if (samples && !(statuses && statuses[k])) {
        int64_t sample = (int64_t)mb->indices[k];
        e->labels[slot] = l->index.labels ? l->index.labels[sample] : mb->labels[k];
        e->sample_indices[slot] = sample;
        e->stats.placement_samples[FF_PLACEMENT_REMOTE]++;
      } else {
        ff__loader_redo(l, mb->entry, slot, FF__REDO_REMOTE, mb->gen);
        redo++;
      }
    }
    l->stats.remote_fallbacks += (uint64_t)redo;
    if (redo) pthread_cond_broadcast(&l->work_cv);
    ff__loader_sample_finished(l, e, ok);
  }
  mb_clear(mb);
  r->in_use--;
  pthread_cond_broadcast(&l->ready_cv);
  pthread_mutex_unlock(&l->mu);
  return st;
}

void ff__remote_reset(ff_loader *l) {
  ff__remote *r = l->remote;
  for (int i = 0; r && i < r->ex.max_in_flight; i++)
    if (r->mbs[i].state == MB_QUEUED || r->mbs[i].state == MB_SUBMITTED) mb_clear(&r->mbs[i]), r->in_use--;
}

void ff__remote_wait(ff_loader *l) {
  ff__remote *r = l->remote;
  uint64_t now = ff__now_ns(), due = UINT64_MAX, limit = r ? r->ex.timeout_ms * 1000000u : 0;
  for (int i = 0; r && i < r->ex.max_in_flight; i++) {
    remote_mb *mb = &r->mbs[i];
    if (mb->state != MB_SUBMITTED) continue;
    if (now - mb->submit_ns >= limit) {
      l->stats.remote_timeouts++;
      take_back(l, mb);
      pthread_cond_broadcast(&l->work_cv);
      return; /* the caller looks at the ring again */
    }
    if (mb->submit_ns + limit < due) due = mb->submit_ns + limit;
  }
  if (due == UINT64_MAX) {
    pthread_cond_wait(&l->ready_cv, &l->mu);
    return;
  }
  uint64_t wait = due - now < 100000000u ? due - now : 100000000u; /* a look every 100 ms at most */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + wait;
  ts.tv_sec += (time_t)(ns / 1000000000u), ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_cond_timedwait(&l->ready_cv, &l->mu, &ts);
}

void ff__remote_observe(ff_loader *l, const ff__sched_obs *o) {
  ff__remote *r = l->remote;
  if (!r) return;
  ff__remote_obs ro = {o->interval_s, o->wait_s, o->ring_ready, o->batch_size, o->cpu_samples, o->cpu_busy_s,
                       o->cpu_threads, o->device_samples, !r->stopped};
  ff__remote_update(&l->sched_params, &r->st, &ro);
  l->stats.remote_share = r->st.share;
}

void ff__remote_close(ff_loader *l) {
  ff__remote *r = l->remote;
  /* a loader that failed to open stops its executor too (it may hold resources for it) */
  const ff_remote_executor *ex = r ? &r->ex : l->cfg.struct_size > offsetof(ff_config, remote) ? l->cfg.remote : NULL;
  if (r) {
    pthread_mutex_lock(&l->mu);
    r->stopped = 1;
    pthread_mutex_unlock(&l->mu);
  }
  if (ex && ex->stop) ex->stop(ex->ctx);
}
