/* test_remote.c — the remote placement (ff_config.remote) against an
 * in-process engine: worker threads that run each microbatch with an
 * ff_augmenter, as a remote worker does, and complete it through
 * ff_loader_remote_complete. Batches are those of a CPU-only loader
 * whatever share ran remotely (indices read from the source or bytes
 * sent), each sample exactly once through lost, late, failed and refused
 * microbatches and restarts; remote errors follow on_error as local ones;
 * close is prompt with work outstanding; what cannot go remote is refused
 * at open. The policy's pure functions are checked on their own. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "sched/remote.h"

#define CLASSES 3
#define PER_CLASS 10
#define COUNT (CLASSES * PER_CLASS)
#define BATCH 6
#define PIPE "decode | random_resized_crop(size=32) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9)"
#define NORM PIPE " | normalize(mean=imagenet, std=imagenet)"

static char root[512], spec[600], bad_root[512], bad_spec[600];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "%s", ff_test_dir("remote-folder"));
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  ff_test_make_imagefolder(root, CLASSES, PER_CLASS, 40, 90, 5);
  /* the same with one truncated file */
  snprintf(bad_root, sizeof bad_root, "%s", ff_test_dir("remote-bad"));
  snprintf(bad_spec, sizeof bad_spec, "imagefolder:%s", bad_root);
  ff_test_make_imagefolder(bad_root, CLASSES, PER_CLASS, 40, 90, 5);
  char path[1024];
  size_t n;
  uint8_t *data = ff_test_read(ff_test_imagefolder_path(bad_root, 1, 3, path, sizeof path), &n);
  ff_test_write(path, data, n / 3);
  free(data);
  return 0;
}

/* ---- the engine ---- */

typedef struct task {
  uint64_t id, epoch;
  size_t n;
  uint64_t *indices;
  void **data;
  size_t *sizes;
  struct task *next;
} task;

typedef struct engine {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  task *head, *tail;
  int stop, ready, threads;
  pthread_t thread[2];
  ff_loader *loader;
  ff_augmenter *aug[2]; /* one per thread: an augmenter runs one run at a time */
  size_t sample_bytes;
  /* faults */
  int lose_every;      /* k > 0: every k-th microbatch is completed only after the loader's timeout (late) */
  int refuse_after;    /* k > 0: submits past the k-th are refused */
  int lost_pool_every; /* k > 0: every k-th microbatch comes back with no samples (a worker lost) */
  int sleep_ms;        /* each microbatch takes this long at least */
  int late_ms;         /* how late a lost microbatch comes */
  int submits, completed;
  int bad_calls; /* checked by the test thread (cmocka's asserts belong to it) */
} engine;

static int engine_submit(void *ctx, const ff_remote_task *t) {
  engine *g = ctx;
  pthread_mutex_lock(&g->mu);
  int k = ++g->submits;
  if (g->refuse_after && k > g->refuse_after) {
    pthread_mutex_unlock(&g->mu);
    return 1;
  }
  task *c = calloc(1, sizeof *c);
  c->id = t->id, c->epoch = t->epoch, c->n = t->n;
  c->indices = malloc(t->n * sizeof *c->indices);
  memcpy(c->indices, t->indices, t->n * sizeof *c->indices);
  g->bad_calls += t->sample_bytes != g->sample_bytes;
  if (t->data) {
    c->data = calloc(t->n, sizeof *c->data), c->sizes = malloc(t->n * sizeof *c->sizes);
    for (size_t i = 0; i < t->n; i++) {
      c->data[i] = malloc(t->size_bytes[i] ? t->size_bytes[i] : 1);
      memcpy(c->data[i], t->data[i], t->size_bytes[i]);
      c->sizes[i] = t->size_bytes[i];
    }
  }
  if (g->tail) g->tail->next = c;
  else g->head = c;
  g->tail = c;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return 0;
}

static void task_free(task *c) {
  for (size_t i = 0; c->data && i < c->n; i++) free(c->data[i]);
  free(c->data), free(c->sizes), free(c->indices), free(c);
}

/* Sleeps ms unless the engine stops; 1 when it stopped. Locked. */
static int nap(engine *g, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000u;
  ts.tv_sec += (time_t)(ns / 1000000000u), ts.tv_nsec = (long)(ns % 1000000000u);
  while (!g->stop && pthread_cond_timedwait(&g->cv, &g->mu, &ts) == 0) {
  }
  return g->stop;
}

typedef struct engine_thread {
  engine *g;
  ff_augmenter *aug;
} engine_thread;

static void *engine_loop(void *p) {
  engine *g = ((engine_thread *)p)->g;
  ff_augmenter *aug = ((engine_thread *)p)->aug;
  free(p);
  pthread_mutex_lock(&g->mu);
  for (;;) {
    while (!g->stop && (!g->head || !g->ready)) pthread_cond_wait(&g->cv, &g->mu);
    if (g->stop) break;
    task *c = g->head;
    g->head = c->next;
    if (!g->head) g->tail = NULL;
    int k = ++g->completed;
    int lose = g->lose_every && k % g->lose_every == 0, lost_pool = g->lost_pool_every && k % g->lost_pool_every == 0;
    if ((g->sleep_ms && nap(g, g->sleep_ms)) || (lose && nap(g, g->late_ms))) {
      task_free(c);
      break;
    }
    pthread_mutex_unlock(&g->mu);
    ff_augment_item items[64];
    for (size_t i = 0; i < c->n; i++)
      items[i] = (ff_augment_item){c->data ? c->data[i] : NULL, c->data ? c->sizes[i] : 0, c->indices[i], NULL};
    size_t bytes = c->n * g->sample_bytes;
    uint8_t *out = malloc(bytes);
    ff_status st[64];
    int bad = !lost_pool && ff_augmenter_run(aug, c->epoch, items, c->n, out, bytes, st) != FF_OK;
    bad |= ff_loader_remote_complete(g->loader, c->id, lost_pool ? NULL : out, bytes, lost_pool ? NULL : st,
                                     1 + lost_pool, 1000) != FF_OK;
    if (lose) /* the same result again: a duplicate must be dropped too */
      bad |= ff_loader_remote_complete(g->loader, c->id, out, bytes, st, 1, 0) != FF_OK;
    free(out);
    task_free(c);
    pthread_mutex_lock(&g->mu);
    g->bad_calls += bad;
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

static void engine_stop(void *ctx) {
  engine *g = ctx;
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  for (int i = 0; i < g->threads; i++) pthread_join(g->thread[i], NULL);
  g->threads = 0;
  while (g->head) {
    task *c = g->head;
    g->head = c->next;
    task_free(c);
  }
  g->tail = NULL;
}

static void engine_start(engine *g, const char *pipeline, const char *source, int threads) {
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  ff_config c;
  ff_config_init(&c);
  c.pipeline = pipeline, c.seed = 11, c.num_threads = 1, c.output_dtype = FF_OUTPUT_UINT8, c.source = source;
  for (int i = 0; i < threads; i++) {
    if (ff_augmenter_open(&c, &g->aug[i])) fail_msg("augmenter: %s", ff_augmenter_errmsg(g->aug[i]));
    engine_thread *t = malloc(sizeof *t);
    *t = (engine_thread){g, g->aug[i]};
    pthread_create(&g->thread[i], NULL, engine_loop, t);
  }
  g->sample_bytes = ff_augmenter_sample_bytes(g->aug[0]);
  g->threads = threads;
}

static void engine_free(engine *g) {
  engine_stop(g);
  assert_int_equal(g->bad_calls, 0);
  for (int i = 0; i < 2; i++) ff_augmenter_close(g->aug[i]);
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}

/* ---- loaders ---- */

typedef struct run_opts {
  const char *pipeline, *source;
  int reads_source, threads, on_error, epochs, prefetch, microbatch;
  const char *trace; /* a Chrome trace of the run goes there */
  uint64_t timeout_ms;
} run_opts;

static ff_config config_of(const run_opts *o) {
  ff_config c;
  ff_config_init(&c);
  c.source = o->source ? o->source : spec, c.pipeline = o->pipeline ? o->pipeline : NORM;
  c.batch_size = BATCH, c.seed = 11, c.num_threads = o->threads ? o->threads : 1, c.rank = 0, c.world_size = 1;
  c.on_error = o->on_error, c.prefetch = o->prefetch ? o->prefetch : 2;
  return c;
}

/* The batches of `epochs` epochs as one byte string (images, labels, indices), and the stats. */
typedef struct result {
  uint8_t *bytes;
  size_t size;
  ff_stats stats;
  ff_status last;
  char errmsg[512];
  char skipped[512];
  char note[160]; /* stats.remote_note (the loader's memory) */
} result;

static void append(result *r, const void *p, size_t n) {
  r->bytes = realloc(r->bytes, r->size + n);
  memcpy(r->bytes + r->size, p, n);
  r->size += n;
}

static size_t tensor_bytes(const ff_tensor *t) {
  size_t n = t->dtype == FF_FLOAT32 || t->dtype == FF_INT64 ? (t->dtype == FF_INT64 ? 8 : 4) : 1;
  for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
  return n;
}

static void drain(ff_loader *l, int epochs, result *r) {
  for (int ep = 0; ep < epochs; ep++) {
    ff_batch *b;
    ff_status st;
    while ((st = ff_loader_next(l, &b)) == FF_OK || st == FF_EDATA) {
      if (st) {
        r->last = st;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", ff_loader_errmsg(l));
        continue;
      }
      ff_tensor t;
      ff_batch_images(b, &t), append(r, t.data, tensor_bytes(&t));
      ff_batch_labels(b, &t), append(r, t.data, tensor_bytes(&t));
      append(r, ff_batch_sample_indices(b), ff_batch_size(b) * sizeof(int64_t));
      ff_batch_release(b);
    }
    assert_int_equal(st, FF_END);
  }
  ff_loader_stats(l, &r->stats);
  snprintf(r->note, sizeof r->note, "%s", r->stats.remote_note ? r->stats.remote_note : "");
  r->stats.remote_note = NULL;
  if (ff_loader_skipped(l, 0)) snprintf(r->skipped, sizeof r->skipped, "%s", ff_loader_skipped(l, 0));
}

static result run_local(const run_opts *o) {
  ff_config c = config_of(o);
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l)) fail_msg("open: %s", ff_loader_errmsg(l));
  result r = {0};
  drain(l, o->epochs ? o->epochs : 2, &r);
  ff_loader_close(l);
  return r;
}

static ff_loader *open_remote(const run_opts *o, engine *g, int threads) {
  const char *pipeline = o->pipeline ? o->pipeline : NORM;
  engine_start(g, pipeline, o->reads_source ? (o->source ? o->source : spec) : NULL, threads);
  ff_config c = config_of(o);
  ff_remote_executor ex = {engine_submit, engine_stop, g, 2, 0, o->microbatch ? o->microbatch : 2, o->reads_source,
                           o->timeout_ms};
  c.remote = &ex; /* copied at open */
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l)) fail_msg("open: %s", ff_loader_errmsg(l));
  pthread_mutex_lock(&g->mu);
  g->loader = l, g->ready = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return l;
}

static result run_remote(const run_opts *o, engine *g) {
  ff_loader *l = open_remote(o, g, 2);
  result r = {0};
  if (o->trace) assert_int_equal(ff_loader_trace_start(l, 0), FF_OK);
  drain(l, o->epochs ? o->epochs : 2, &r);
  if (o->trace) assert_int_equal(ff_loader_trace_write(l, o->trace, NULL, NULL), FF_OK);
  ff_loader_close(l);
  engine_free(g);
  return r;
}

static void assert_same(const result *a, const result *b) {
  assert_int_equal(a->size, b->size);
  assert_memory_equal(a->bytes, b->bytes, a->size);
}

static uint64_t placed(const ff_stats *s) {
  uint64_t n = 0;
  for (int p = 0; p < FF_PLACEMENTS; p++) n += s->placement_samples[p];
  return n;
}

/* ---- tests ---- */

static void remote_batches_equal_cpu_only_batches(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "0.5", 1);
  for (int reads = 0; reads < 2; reads++)
    for (int norm = 0; norm < 2; norm++) {
      char trace[700];
      snprintf(trace, sizeof trace, "%s/trace.json", root);
      run_opts o = {.pipeline = norm ? NORM : PIPE, .reads_source = reads, .trace = trace};
      result local = run_local(&o);
      engine g = {0};
      result remote = run_remote(&o, &g);
      assert_same(&local, &remote);
      assert_true(remote.stats.placement_samples[FF_PLACEMENT_REMOTE] > 0);
      assert_int_equal(placed(&remote.stats), remote.stats.samples);
      assert_int_equal(remote.stats.samples, 2 * COUNT);
      assert_true(remote.stats.remote_microbatches > 0);
      assert_int_equal(remote.stats.remote_workers, 2);
      /* bytes travel only when the workers cannot read the source */
      assert_true(reads ? remote.stats.remote_bytes_sent == 0 : remote.stats.remote_bytes_sent > 0);
      assert_int_equal(remote.stats.remote_bytes_received,
                       remote.stats.remote_microbatches ? remote.stats.remote_bytes_received : 0);
      assert_true(remote.stats.remote_bytes_received >=
                  remote.stats.placement_samples[FF_PLACEMENT_REMOTE] * 32 * 32 * 3);
      size_t n;
      char *text = (char *)ff_test_read(trace, &n); /* the trace shows the microbatches on their own track */
      text = realloc(text, n + 1), text[n] = 0;
      assert_non_null(strstr(text, "remote workers (microbatches"));
      assert_non_null(strstr(text, "\"remote microbatch\""));
      free(text);
      free(local.bytes), free(remote.bytes);
    }
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static void a_consumer_that_outpaces_one_thread_gets_remote_help(void **state) {
  (void)state;
  run_opts o = {.reads_source = 1, .epochs = 6};
  result local = run_local(&o);
  engine g = {0};
  result remote = run_remote(&o, &g);
  assert_same(&local, &remote);
  assert_true(remote.stats.remote_share > 0 || remote.stats.placement_samples[FF_PLACEMENT_REMOTE] > 0);
  assert_true(remote.stats.placement_samples[FF_PLACEMENT_REMOTE] > 0);
  assert_true(remote.stats.remote_rtt_s > 0);
  free(local.bytes), free(remote.bytes);
}

static void lost_late_and_failed_microbatches_deliver_each_sample_once(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "0.7", 1);
  run_opts o = {.reads_source = 1, .timeout_ms = 150, .epochs = 3};
  result local = run_local(&o);
  engine g = {.lose_every = 3, .late_ms = 400, .lost_pool_every = 4};
  result remote = run_remote(&o, &g);
  assert_same(&local, &remote);
  assert_int_equal(placed(&remote.stats), remote.stats.samples);
  assert_true(remote.stats.remote_timeouts > 0);
  assert_true(remote.stats.remote_late > 0);    /* the late results and their duplicates */
  assert_true(remote.stats.remote_fallbacks > 0);
  assert_true(remote.stats.remote_retries > 0); /* the lost-pool completions said 2 attempts */
  free(local.bytes), free(remote.bytes);
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static void remote_sample_errors_follow_on_error_as_local_ones(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "1", 1);
  for (int mode = 0; mode < 3; mode++) {
    ff_on_error on_error = mode == 0 ? FF_ON_ERROR_SKIP : mode == 1 ? FF_ON_ERROR_REPLACE : FF_ON_ERROR_RAISE;
    run_opts o = {.source = bad_spec, .reads_source = 1, .on_error = on_error, .epochs = 1, .microbatch = 16,
                  .prefetch = 4};
    result local = run_local(&o);
    engine g = {0};
    result remote = run_remote(&o, &g);
    assert_same(&local, &remote);
    assert_int_equal(local.stats.skipped, remote.stats.skipped);
    assert_int_equal(local.stats.replaced, remote.stats.replaced);
    assert_string_equal(local.skipped, remote.skipped);
    assert_int_equal(local.last, remote.last);
    assert_string_equal(local.errmsg, remote.errmsg);
    assert_true(mode == 2 ? local.last == FF_EDATA && strstr(remote.errmsg, "03") : local.last == FF_OK);
    assert_true(remote.stats.remote_fallbacks >= 1); /* the bad file ran here again */
    free(local.bytes), free(remote.bytes);
  }
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static void a_refused_submit_sends_the_rest_to_the_local_workers(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "0.5", 1);
  run_opts o = {.reads_source = 1};
  result local = run_local(&o);
  engine g = {.refuse_after = 2};
  result remote = run_remote(&o, &g);
  assert_same(&local, &remote);
  assert_non_null(strstr(remote.note, "refused"));
  assert_true(remote.stats.placement_samples[FF_PLACEMENT_REMOTE] <= 4);
  assert_int_equal(placed(&remote.stats), remote.stats.samples);
  free(local.bytes), free(remote.bytes);
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static void seek_with_remote_work_in_flight_gives_the_same_batches(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "0.5", 1);
  run_opts o = {.reads_source = 1};
  for (int pass = 0; pass < 2; pass++) {
    engine g = {.sleep_ms = 30};
    ff_config c = config_of(&o);
    ff_loader *l;
    if (pass) {
      l = open_remote(&o, &g, 1);
    } else {
      c.remote = NULL;
      assert_int_equal(ff_loader_open(&c, &l), FF_OK);
    }
    ff_batch *b;
    assert_int_equal(ff_loader_next(l, &b), FF_OK); /* remote work goes out for the next ones */
    ff_batch_release(b);
    assert_int_equal(ff_loader_seek(l, 1, 2), FF_OK);
    static result r[2];
    r[pass] = (result){0};
    drain(l, 1, &r[pass]);
    ff_loader_close(l);
    if (pass) {
      engine_free(&g);
      assert_same(&r[0], &r[1]);
      assert_int_equal(r[1].size, r[0].size);
      free(r[0].bytes), free(r[1].bytes);
    }
  }
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static void close_with_remote_work_outstanding_is_prompt(void **state) {
  (void)state;
  setenv("FF_FORCE_REMOTE_SHARE", "1", 1);
  run_opts o = {.reads_source = 1};
  engine g = {.sleep_ms = 60000};
  ff_loader *l = open_remote(&o, &g, 1);
  for (int i = 0; i < 500; i++) { /* until the engine holds a microbatch */
    pthread_mutex_lock(&g.mu);
    int submits = g.submits;
    pthread_mutex_unlock(&g.mu);
    if (submits) break;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  uint64_t t0 = ff__now_ns();
  ff_loader_close(l);
  double s = (double)(ff__now_ns() - t0) * 1e-9;
  assert_true(s < 10); /* the engine's microbatch would take 60 s */
  assert_true(g.submits > 0);
  engine_free(&g);
  unsetenv("FF_FORCE_REMOTE_SHARE");
}

static ff_status open_with(ff_remote_executor *ex, const char *pipeline, char *msg, size_t cap) {
  ff_config c;
  ff_config_init(&c);
  c.source = spec, c.pipeline = pipeline, c.batch_size = 4, c.num_threads = 1, c.remote = ex;
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&c, &l);
  snprintf(msg, cap, "%s", ff_loader_errmsg(l));
  ff_loader_close(l);
  return st;
}

static void what_cannot_go_remote_is_refused_at_open(void **state) {
  (void)state;
  char msg[512];
  ff_remote_executor ok = {engine_submit, NULL, NULL, 1, 0, 0, 1, 0};
  ff_remote_executor none = ok, nosubmit = ok;
  none.workers = 0, nosubmit.submit = NULL;
  assert_int_equal(open_with(&none, PIPE, msg, sizeof msg), FF_EINVAL);
  assert_non_null(strstr(msg, "workers must be >= 1"));
  assert_int_equal(open_with(&nosubmit, PIPE, msg, sizeof msg), FF_EINVAL);
  assert_non_null(strstr(msg, "submit"));
  assert_int_equal(open_with(&ok, NORM " | random_erasing(p=0.5)", msg, sizeof msg), FF_EINVAL);
  assert_non_null(strstr(msg, "random_erasing"));
  assert_int_equal(open_with(&ok, "decode || 2 x random_resized_crop(size=16)", msg, sizeof msg), FF_EINVAL);
  assert_non_null(strstr(msg, "views"));
  setenv("FF_FORCE_REMOTE_SHARE", "2", 1);
  assert_int_equal(open_with(&ok, PIPE, msg, sizeof msg), FF_EINVAL);
  assert_non_null(strstr(msg, "FF_FORCE_REMOTE_SHARE"));
  unsetenv("FF_FORCE_REMOTE_SHARE");
  /* a late or unknown ticket on a loader without remote workers is only counted */
  ff_config c;
  ff_config_init(&c);
  c.source = spec, c.pipeline = PIPE, c.batch_size = 4, c.num_threads = 1;
  ff_loader *l;
  assert_int_equal(ff_loader_open(&c, &l), FF_OK);
  assert_int_equal(ff_loader_remote_complete(l, 7, NULL, 0, NULL, 1, 0), FF_OK);
  ff_stats s;
  ff_loader_stats(l, &s);
  assert_int_equal(s.remote_late, 1);
  assert_int_equal(s.remote_workers, 0);
  ff_loader_close(l);
}

/* ---- the policy (sched/remote.h) ---- */

static ff__remote_obs stalled_obs(int ring_ready) {
  /* 64 samples every 100 ms asked for, 1 thread at 10 ms a sample: capacity 100/s, demand 640/s */
  return (ff__remote_obs){.interval_s = 0.64, .wait_s = 0.54, .ring_ready = ring_ready, .batch_size = 64,
                          .cpu_samples = 64, .cpu_busy_s = 0.64, .cpu_threads = 1, .remote_ok = 1};
}

static void the_policy_fills_the_deficit_and_gives_it_back(void **state) {
  (void)state;
  ff__sched_params p;
  ff__sched_params_init(&p, 2);
  ff__remote_state s;
  ff__remote_state_init(&s);
  ff__remote_obs stalled = stalled_obs(0);
  for (int i = 0; i < 30; i++) ff__remote_update(&p, &s, &stalled);
  assert_true(s.share > 0.8 && s.share <= 1); /* deficit 1 - 100/640 = 0.84, and the ring's */
  assert_float_equal(s.local_sps, 100, 1e-6);
  /* a remote pool measured at 100 samples/s: beyond half of a batch it would hold the batch up */
  for (int i = 0; i < 30; i++) ff__remote_learn(&p, &s, 16, 0.32, 16 * 3072, 2);
  assert_float_equal(s.remote_sps, 100, 1e-6);
  ff__remote_update(&p, &s, &stalled);
  assert_float_equal(s.share, 0.5, 1e-9);
  assert_float_equal(s.rtt_s, 0.32, 1e-9);
  /* the consumer slows down to the local rate: no stall, full ring, the share decays to 0 */
  ff__remote_obs calm = {.interval_s = 0.64, .wait_s = 0, .ring_ready = 2, .batch_size = 64, .cpu_samples = 64,
                         .cpu_busy_s = 0.64, .cpu_threads = 1, .remote_ok = 1};
  for (int i = 0; i < 200; i++) ff__remote_update(&p, &s, &calm);
  assert_float_equal(s.share, 0, 1e-9);
  /* an executor that takes no work gets none */
  ff__remote_obs off = stalled_obs(0);
  off.remote_ok = 0;
  ff__remote_update(&p, &s, &off);
  assert_float_equal(s.share, 0, 0);
}

static void work_goes_out_only_a_round_trip_ahead_and_never_into_a_full_ring(void **state) {
  (void)state;
  ff__remote_state s;
  ff__remote_state_init(&s);
  s.share = 0.5, s.rtt_s = 0.2;
  assert_int_equal(ff__remote_count(&s, 64, 64, 64, 0.3, 0, 2), 32);
  assert_int_equal(ff__remote_count(&s, 64, 64, 64, 0.1, 0, 2), 0);  /* less than a round trip ahead */
  assert_int_equal(ff__remote_count(&s, 64, 64, 64, 0.3, 2, 2), 0);  /* the ring is full */
  assert_int_equal(ff__remote_count(&s, 64, 20, 64, 0.3, 0, 2), 20); /* the device took the rest */
  assert_int_equal(ff__remote_count(&s, 64, 64, 8, 0.3, 0, 2), 8);   /* free microbatch slots */
  s.rtt_s = 0;
  assert_int_equal(ff__remote_count(&s, 64, 64, 64, 0, 0, 2), 0); /* no lead measured yet */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(remote_batches_equal_cpu_only_batches),
      cmocka_unit_test(a_consumer_that_outpaces_one_thread_gets_remote_help),
      cmocka_unit_test(lost_late_and_failed_microbatches_deliver_each_sample_once),
      cmocka_unit_test(remote_sample_errors_follow_on_error_as_local_ones),
      cmocka_unit_test(a_refused_submit_sends_the_rest_to_the_local_workers),
      cmocka_unit_test(seek_with_remote_work_in_flight_gives_the_same_batches),
      cmocka_unit_test(close_with_remote_work_outstanding_is_prompt),
      cmocka_unit_test(what_cannot_go_remote_is_refused_at_open),
      cmocka_unit_test(the_policy_fills_the_deficit_and_gives_it_back),
      cmocka_unit_test(work_goes_out_only_a_round_trip_ahead_and_never_into_a_full_ring),
  };
  if (getenv("FF_TEST_FILTER")) cmocka_set_test_filter(getenv("FF_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, NULL);
}
