/* augmenter.c — a loader's per-sample work for callers that order and batch
 * the samples themselves (ff_augmenter in fusionflow.h): Ray Data's
 * map_batches callable, remote workers. A run hands items to a pool of
 * threads (the caller's among them); each runs its sample with the CPU
 * worker's path (exec/cpu.h) into its slot of the caller's buffer, planned
 * by (seed, epoch, index) as a loader plans it, so the pixels are the
 * loader's whatever thread ran it. Samples fail one by one: a run records
 * each item's status and message and never stops early.
 *
 * Threads: a run publishes its items under the lock and bumps a generation;
 * every thread takes the next item (locked), runs it (unlocked), writes its
 * own status slot and counts it done (locked). The caller returns once all
 * are counted, so its reads of the slots follow every write. */
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "exec/cpu.h"
#include "pipeline/views.h"
#include "source/source.h"

struct ff_augmenter {
  ff__error err;
  ff_config cfg;       /* the fields the work reads (see ff_augmenter_open) */
  ff__pipeline *pipe;  /* the output's format */
  ff__index index;     /* of cfg.source; count 0 without one */
  int opened;         /* ff_augmenter_open succeeded */
  int num_threads;
  pthread_t *threads;  /* num_threads - 1 helpers */
  int started;         /* helpers running */
  ff__worker *workers; /* one per thread, the caller's last */
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  /* Under mu: the run in progress. */
  uint64_t gen;        /* bumped per run: a helper runs each generation once */
  int quit;
  uint64_t epoch;
  const ff_augment_item *items;
  size_t n, next, done;
  uint8_t *out;
  ff_status *statuses;
  /* The messages of the last run's failed items (NULL for the others), msgs_cap slots. */
  char **msgs;
  size_t msgs_cap, msgs_n;
};

typedef struct helper_arg {
  ff_augmenter *aug;
  ff__worker *worker;
} helper_arg;

/* Runs item k of the current run; its message, on failure, goes to msgs[k]. Unlocked. */
static ff_status run_item(ff_augmenter *a, ff__worker *w, uint64_t epoch, const ff_augment_item *it, uint8_t *out,
                          size_t k) {
  const ff_config *c = &a->cfg;
  ff__error err = {0};
  char name[64];
  ff__sample_job job = {.seed = c->seed, .epoch = epoch, .index = it->index, .max_pixels = c->max_image_pixels,
                        .max_scans = c->max_jpeg_scans, .max_metadata_bytes = c->max_metadata_bytes,
                        .strict = c->strict_decode, .data = it->data, .data_bytes = it->size_bytes};
  ff_status st = FF_OK;
  if (!it->data && it->index >= a->index.count) {
    snprintf(name, sizeof name, "sample[%llu]", (unsigned long long)it->index);
    st = a->index.count ? ff__error_set(&err, FF_EINVAL, "%s: past the source's %zu samples",
                                        it->name ? it->name : name, a->index.count)
                        : ff__error_set(&err, FF_EINVAL, "%s: no bytes given and no source to read them from",
                                        it->name ? it->name : name);
  } else if (!it->data) {
    job.path = a->index.paths[it->index];
    ff__index_locate(&a->index, (size_t)it->index, &job.shard, &job.offset, &job.length);
  } else {
    snprintf(name, sizeof name, "sample[%llu]", (unsigned long long)it->index);
    job.path = name;
  }
  if (it->name) job.path = it->name;
  if (!st) st = ff__sample_run(w, a->pipe, &job, out, (int)k, &err);
  if (st) a->msgs[k] = strdup(err.msg[0] ? err.msg : ff_status_str(st)); /* NULL when out of memory: the status stays */
  return st;
}

/* Takes items of the current run (generation gen) until none is left. Called and returns locked. */
static void work(ff_augmenter *a, ff__worker *w, uint64_t gen) {
  while (a->gen == gen && a->next < a->n) {
    size_t k = a->next++;
    const ff_augment_item *it = &a->items[k];
    uint64_t epoch = a->epoch;
    uint8_t *out = a->out;
    pthread_mutex_unlock(&a->mu);
    ff_status st = run_item(a, w, epoch, it, out, k);
    pthread_mutex_lock(&a->mu);
    a->statuses[k] = st;
    if (++a->done == a->n) pthread_cond_signal(&a->done_cv);
  }
}

static void *helper_main(void *p) {
  helper_arg arg = *(helper_arg *)p;
  free(p);
  ff_augmenter *a = arg.aug;
  pthread_mutex_lock(&a->mu);
  uint64_t seen = a->gen;
  for (;;) {
    while (!a->quit && a->gen == seen) pthread_cond_wait(&a->work_cv, &a->mu);
    if (a->quit) break;
    seen = a->gen;
    work(a, arg.worker, seen);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

/* progress of a tar: source's open: a streamed one is given up at once (no random access). */
static int refuse_stream(void *ctx, const ff_open_progress *p) {
  (void)p;
  *(int *)ctx = 1;
  return 1;
}

static ff_status parse(ff_augmenter *a, ff__error *err) {
  const ff_config *c = &a->cfg;
  ff__views views = {0};
  ff_status st = ff__views_parse(c->pipeline, &views, err);
  int has_views = views.num_groups > 0;
  ff__views_free(&views);
  if (st) return st;
  if (has_views)
    return ff__error_set(err, FF_EINVAL, "an augmenter runs one image per sample: a pipeline with views (||) "
                         "is for a loader");
  ff__pipeline *p = a->pipe;
  if ((st = ff__pipeline_parse(c->pipeline, p, err))) return st;
  ff__pipeline_set_semantics(p, c->semantics);
  if (p->has_mix)
    return ff__error_set(err, FF_EINVAL, "mixup_cutmix (pipeline column %d) mixes a loader's batches: an "
                         "augmenter has none (mix on the consumer's batches)", p->ops[p->num_ops - 1].column);
  int uint8_out = c->output_dtype == FF_OUTPUT_UINT8 && p->output == FF__OUTPUT_NCHW_F32;
  if (uint8_out) { /* the pixels before the final to_dtype/normalize */
    ff__pipeline full = *p;
    if (!ff__pipeline_uint8_transport(&full, p))
      return ff__error_set(err, FF_EINVAL, "random_erasing writes the float output: ask for float32 output, "
                           "or erase on the consumer");
  }
  if ((st = ff__pipeline_set_output(p, uint8_out ? FF_OUTPUT_DTYPE_AUTO : c->output_dtype, c->memory_format, err)))
    return st;
  if ((st = ff__pipeline_check_erasing(p, err))) return st;
  return ff__pipeline_check_peak(p, c->max_image_pixels, err);
}

static ff_status start(ff_augmenter *a) {
  ff__error *err = &a->err;
  ff_config *c = &a->cfg;
  if (c->struct_size < offsetof(ff_config, memory_format) + sizeof c->memory_format)
    return ff__error_set(err, FF_EINVAL, "config.struct_size is %zu: call ff_config_init first", c->struct_size);
  if (!c->pipeline) return ff__error_set(err, FF_EINVAL, "config.pipeline is required");
  if (c->num_threads < 0) return ff__error_set(err, FF_EINVAL, "num_threads must be >= 0 (got %d)", c->num_threads);
  if (c->max_jpeg_scans < 0)
    return ff__error_set(err, FF_EINVAL, "max_jpeg_scans must be >= 0 (got %d)", c->max_jpeg_scans);
  if (c->semantics != FF_SEMANTICS_V1 && c->semantics != FF_SEMANTICS_V2)
    return ff__error_set(err, FF_EINVAL, "semantics must be v1 or v2 (got %d)", (int)c->semantics);
  if (!(a->pipe = calloc(1, sizeof *a->pipe))) return ff__error_set(err, FF_ENOMEM, "out of memory");
  ff_status st = parse(a, err);
  if (!st && c->source) {
    int streamed = 0;
    st = ff__source_open_watched(c->source, c->allow_empty, refuse_stream, &streamed, &a->index, err);
    if (streamed)
      st = ff__error_set(err, FF_EINVAL, "%s: streamed shards (URLs, pipe:, compressed) are read from start to "
                         "end; an augmenter reads samples by index (give the bytes instead)", c->source);
  }
  c->pipeline = c->source = NULL; /* the caller's strings: not kept */
  if (st) return st;
  a->num_threads = c->num_threads ? c->num_threads : ff__cpu_cores();
  a->workers = calloc((size_t)a->num_threads, sizeof *a->workers);
  a->threads = calloc((size_t)a->num_threads, sizeof *a->threads);
  if (!a->workers || !a->threads) return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (; a->started < a->num_threads - 1; a->started++) {
    helper_arg *arg = malloc(sizeof *arg);
    if (arg) *arg = (helper_arg){a, &a->workers[a->started]};
    int rc = arg ? pthread_create(&a->threads[a->started], NULL, helper_main, arg) : -1;
    if (rc) {
      free(arg);
      return ff__error_set(err, FF_ENOMEM, "cannot start thread %d of %d: %s", a->started + 1, a->num_threads,
                           rc > 0 ? strerror(rc) : "out of memory");
    }
  }
  return FF_OK;
}

ff_status ff_augmenter_open(const ff_config *cfg, ff_augmenter **out) {
  if (!out) return FF_EINVAL;
  ff_augmenter *a = calloc(1, sizeof *a);
  *out = a;
  if (!a) return FF_ENOMEM;
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->work_cv, NULL);
  pthread_cond_init(&a->done_cv, NULL);
  if (!cfg) return ff__error_set(&a->err, FF_EINVAL, "config is NULL");
  a->cfg = *cfg;
  if (cfg->struct_size < sizeof *cfg) { /* an older caller: the defaults of what it lacks */
    ff_config_init(&a->cfg);
    memcpy(&a->cfg, cfg, cfg->struct_size);
  }
  ff_status st = start(a);
  a->opened = st == FF_OK;
  return st;
}

static void clear_msgs(ff_augmenter *a) {
  for (size_t k = 0; k < a->msgs_n; k++) free(a->msgs[k]), a->msgs[k] = NULL;
  a->msgs_n = 0;
}

void ff_augmenter_close(ff_augmenter *a) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->quit = 1;
  pthread_cond_broadcast(&a->work_cv);
  pthread_mutex_unlock(&a->mu);
  for (int i = 0; i < a->started; i++) pthread_join(a->threads[i], NULL);
  for (int i = 0; a->workers && i < a->num_threads; i++) ff__worker_free(&a->workers[i]);
  clear_msgs(a);
  free(a->msgs);
  free(a->workers);
  free(a->threads);
  free(a->pipe);
  ff__index_free(&a->index);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->work_cv);
  pthread_cond_destroy(&a->done_cv);
  free(a);
}

const char *ff_augmenter_errmsg(const ff_augmenter *a) { return a ? a->err.msg : "augmenter is NULL"; }

size_t ff_augmenter_sample_bytes(const ff_augmenter *a) {
  return a && a->opened ? ff__pipeline_sample_bytes(a->pipe) : 0;
}

void ff_augmenter_sample_shape(const ff_augmenter *a, ff_tensor *out) {
  if (!out) return;
  *out = (ff_tensor){0};
  if (!a || !a->opened) return;
  const ff__pipeline *p = a->pipe;
  int64_t h = p->out_height, w = p->out_width;
  int planar = p->out_planar, cl = p->out_channels_last;
  out->dtype = (ff_dtype)p->out_dtype;
  out->layout = planar || cl ? FF_NCHW : FF_NHWC;
  out->ndim = 3;
  if (planar) {
    out->shape[0] = 3, out->shape[1] = h, out->shape[2] = w;
    out->strides[0] = h * w, out->strides[1] = w, out->strides[2] = 1;
  } else if (cl) {
    out->shape[0] = 3, out->shape[1] = h, out->shape[2] = w;
    out->strides[0] = 1, out->strides[1] = 3 * w, out->strides[2] = 3;
  } else {
    out->shape[0] = h, out->shape[1] = w, out->shape[2] = 3;
    out->strides[0] = 3 * w, out->strides[1] = 3, out->strides[2] = 1;
  }
}

size_t ff_augmenter_dataset_size(const ff_augmenter *a) { return a ? a->index.count : 0; }

ff_status ff_augmenter_sample(const ff_augmenter *a, size_t i, const char **path, const char **member,
                              int64_t *label) {
  if (!a || i >= a->index.count) return FF_EINVAL;
  const ff__index *x = &a->index;
  const char *shard = x->offsets ? x->shards[x->shard_of[i]] : NULL;
  if (path) *path = shard ? shard : x->paths[i];
  if (member) *member = shard ? x->paths[i] + strlen(shard) + 1 : NULL; /* paths[i] is "SHARD:MEMBER" */
  if (label) *label = x->labels ? x->labels[i] : -1;
  return FF_OK;
}

ff_status ff_augmenter_run(ff_augmenter *a, uint64_t epoch, const ff_augment_item *items, size_t n, void *out,
                           size_t out_size_bytes, ff_status *statuses) {
  if (!a || !a->opened) return FF_EINVAL; /* a failed augmenter keeps its open's message */
  ff__error *err = &a->err;
  size_t bytes = ff__pipeline_sample_bytes(a->pipe);
  if (n && (!items || !out || !statuses)) return ff__error_set(err, FF_EINVAL, "items, out and statuses are required");
  if (n > INT_MAX) return ff__error_set(err, FF_EINVAL, "%zu items: at most %d per run", n, INT_MAX);
  if (n && out_size_bytes / n < bytes)
    return ff__error_set(err, FF_EINVAL, "out holds %zu bytes: %zu samples of %zu bytes do not fit", out_size_bytes,
                         n, bytes);
  clear_msgs(a);
  if (n > a->msgs_cap) {
    char **grown = realloc(a->msgs, n * sizeof *grown);
    if (!grown) return ff__error_set(err, FF_ENOMEM, "out of memory for %zu items", n);
    memset(grown + a->msgs_cap, 0, (n - a->msgs_cap) * sizeof *grown);
    a->msgs = grown, a->msgs_cap = n;
  }
  a->msgs_n = n;
  pthread_mutex_lock(&a->mu);
  a->items = items, a->n = n, a->next = a->done = 0;
  a->epoch = epoch, a->out = out, a->statuses = statuses;
  uint64_t gen = ++a->gen;
  pthread_cond_broadcast(&a->work_cv);
  work(a, &a->workers[a->num_threads - 1], gen);
  while (a->done < a->n) pthread_cond_wait(&a->done_cv, &a->mu);
  a->items = NULL, a->n = a->next = a->done = 0; /* a helper that wakes late finds nothing */
  pthread_mutex_unlock(&a->mu);
  return FF_OK;
}

const char *ff_augmenter_item_errmsg(const ff_augmenter *a, size_t k) {
  return a && k < a->msgs_n ? a->msgs[k] : NULL;
}
