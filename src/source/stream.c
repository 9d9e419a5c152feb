/* stream.c — tar shards that can only be read from start to end: http:// and
 * https:// (libcurl), pipe:COMMAND (the command's standard output, as
 * WebDataset's pipe: URLs) and compressed files (libarchive's filters),
 * each read in passes from its first byte (transport.c) under the limits
 * of docs/limits.md.
 *
 * At open every shard is read once (ff__stream_index) to count its samples
 * and learn their labels and names, with the grouping of tar.c; so the
 * sizes of the epoch, of each rank's share and of each batch are known
 * before the first batch, and every rank gets the same number of batches.
 * The epoch's order is a pure function of (seed, epoch, rank, world_size)
 * (see stream.h): a shard permutation, shards dealt to the rank with the
 * fewest samples, a shuffle buffer over the rank's stream, the tail cut.
 *
 * A reader thread per loader then reads the rank's shards in that order and
 * keeps the bytes of the samples the epoch wants in a store until a worker
 * takes them (ff__stream_take). The store is bounded by the shuffle buffer
 * plus the loader's window: an output position p needs the stream read up
 * to input p + buffer, and all inputs before it with outputs before the
 * oldest sample still wanted are taken, so buffer + window + 1 entries never
 * block a sample that is wanted. A restart (seek, resume) gives up what is
 * waited for and re-reads the epoch's shards, skipping whole shards whose
 * samples all come before the position: resume is exact.
 *
 * A sample's bytes are held once on their way to the worker: the scanner
 * reads them into a buffer of their own, which the store keeps and the
 * worker's buffer adopts; a member over max_member_bytes or not an image by
 * its first bytes is refused before it is held. A reading pass stops once
 * it has every sample the shard had at open.
 *
 * Network errors (refused or dropped connections, HTTP 5xx, 408, 429,
 * stalls) are retried with exponential backoff; a shard read again resumes
 * at the sample after the last one kept. After the last retry the shard's
 * remaining samples fail with a message naming the URL (the loader's
 * on_error then raises or skips them). Other HTTP errors (404), too many
 * redirects and the byte and sample limits fail at once. */
#include "source/stream.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/philox.h"
#include "source/tar.h"
#include "source/transport.h"

enum { FF__RNG_SHARDS = 0x53484152u, FF__RNG_BUFFER = 0x42554646u };
#define DEFAULT_RETRIES 3
#define DEFAULT_BACKOFF_MS 200

int ff__stream_name(const char *name) {
  if (!strncmp(name, "http://", 7) || !strncmp(name, "https://", 8) || !strncmp(name, "pipe:", 5)) return 1;
  static const char *const ext[] = {".gz", ".tgz", ".bz2", ".xz", ".zst", ".lz4", ".lzma"};
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
    size_t k = strlen(ext[i]);
    if (n > k && !strcmp(name + n - k, ext[i])) return 1;
  }
  return 0;
}

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* --------------------------------------------------------------- index */

/* The open's progress (ff_config.open_progress): told at each attempt's
 * start (force) and at most every 100 ms in between, with whether a line
 * is due (ff__open_rule_due); once it answers nonzero, every read in
 * progress is abandoned and the open ends. */
typedef struct open_watch {
  ff_open_progress_fn fn;
  void *ctx;
  ff_open_progress p;
  ff__open_rule rule;
  uint64_t start_ns, shard_ns, told_ns;
  int given_up;
  const ff__pass *pass;      /* the attempt in progress: its bytes so far */
  const ff__tar_shard *scan; /* and the samples it counted */
} open_watch;

int ff__open_rule_due(ff__open_rule *r, const ff_open_progress *p) {
  double now = p->elapsed_s;
  if (r->shard != p->shard_index || r->attempt != p->attempt || r->backing_off != p->backing_off)
    r->shard = p->shard_index, r->attempt = p->attempt, r->backing_off = p->backing_off, r->since_s = now,
    r->said = 0;
  if (now < 2 || !(!r->lines || (!r->said && now - r->since_s >= 0.5) || now - r->line_s >= 10)) return 0;
  r->said = 1, r->lines++, r->line_s = now;
  return 1;
}

static int watch_tell(open_watch *w, int force) {
  if (!w->fn || w->given_up) return w->given_up;
  uint64_t now = ff__now_ns();
  if (!force && now - w->told_ns < 100000000u) return 0;
  w->told_ns = now;
  w->p.elapsed_s = (double)(now - w->start_ns) * 1e-9;
  w->p.shard_s = (double)(now - w->shard_ns) * 1e-9;
  w->p.shard_bytes = w->pass ? w->pass->bytes : 0;
  w->p.shard_samples = w->scan ? w->scan->n : 0;
  w->p.due = ff__open_rule_due(&w->rule, &w->p);
  w->given_up = w->fn(w->ctx, &w->p) != 0;
  return w->given_up;
}

static int watch_poll(void *w) { return watch_tell(w, 0); }

ff_status ff__stream_index(const char *pattern, ff__strlist *shards, ff_open_progress_fn progress, void *ctx,
                           ff__index *out, ff__error *err) {
  ff__stream_limits limits;
  ff_status st = ff__stream_limits_read(&limits, err);
  if (st) return st;
  int retries = env_int("FF_STREAM_RETRIES", DEFAULT_RETRIES), backoff = env_int("FF_STREAM_BACKOFF_MS", DEFAULT_BACKOFF_MS);
  size_t n = shards->n;
  ff__tar_shard *scans = calloc(n ? n : 1, sizeof *scans);
  if (!scans) return ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
  open_watch w = {.fn = progress,
                  .ctx = ctx,
                  .p = {.num_shards = n, .max_attempts = 1 + (retries > 0 ? retries : 0)},
                  .start_ns = ff__now_ns()};
  for (size_t i = 0; i < n && !st; i++) {
    int tries = 0;
    char last[512] = ""; /* the previous attempt's failure, while the next one runs */
    ff__pass pass = {.name = shards->v[i], .abort_fn = progress ? watch_poll : NULL, .abort_ctx = &w,
                     .limits = &limits, .say_exit = 1};
    w.shard_ns = ff__now_ns();
    w.p.shard = shards->v[i], w.p.shard_index = i;
    w.pass = &pass, w.scan = &scans[i];
    for (;;) {
      ff__tar_shard_free(&scans[i]);
      w.p.attempt = tries + 1, w.p.backing_off = 0, w.p.last_error = last;
      if (watch_tell(&w, 1)) break;
      st = ff__transport_pass(&pass, &scans[i], err);
      snprintf(last, sizeof last, "%s", pass.why);
      tries++;
      if (w.given_up || st != FF_EIO || !pass.retryable || tries > retries) break;
      w.p.attempt = tries + 1, w.p.backing_off = 1;
      watch_tell(&w, 1);
      for (int waited = 0; waited < backoff << (tries - 1) && !watch_poll(&w); waited += 10) ff__sleep_ms(10);
    }
    w.pass = NULL, w.scan = NULL;
    if (w.given_up) {
      st = ff__error_set(err, FF_EIO, "tar:%s: opening was given up while reading %s (attempt %d of %d)", pattern,
                         shards->v[i], w.p.attempt, w.p.max_attempts);
    } else if (st == FF_EIO) {
      ff__tar_shard_free(&scans[i]);
      char msg[FF__ERRMSG_MAX];
      snprintf(msg, sizeof msg, "%s: cannot read the shard: %s%s", shards->v[i], pass.why,
               pass.retryable && tries > 1 ? " (after retries)" : "");
      st = ff__strlist_push(&scans[i].bad, msg) ? FF_ENOMEM : FF_OK;
    } else if (!st) {
      st = ff__tar_shard_finish(&scans[i], shards->v[i], err);
    }
  }
  if (st == FF_ENOMEM) ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
  if (!st) st = ff__tar_index_build(pattern, shards, scans, 0, out, err);
  if (!st) out->streamed = 1;
  for (size_t i = 0; i < n; i++) ff__tar_shard_free(&scans[i]);
  free(scans);
  return st;
}

/* --------------------------------------------------------------- order */

/* A sample kept for a worker: its bytes, or why it or its shard failed. */
typedef struct kept {
  uint64_t epoch;
  int64_t sample;
  uint8_t *data;
  size_t size;
  char *error;
  ff_status status; /* with error: FF_EIO (the shard), FF_ETOOBIG or FF_EDATA (the member refused) */
} kept;

struct ff__stream {
  const ff__index *index;
  ff__stream_cfg cfg;
  ff__stream_limits limits;
  ff__tar_read_opts read; /* the cfg's member limit and image check */
  size_t *first;        /* first sample index of each shard (num_shards + 1) */
  size_t per_rank;      /* ff__stream_num_samples */

  pthread_mutex_t mu;
  pthread_cond_t cv;    /* the store changed, a restart, a close */
  pthread_t thread;
  int started, stop;
  uint64_t gen;         /* bumped by each restart */
  uint64_t asked;       /* the latest epoch a take asked for since the restart: the reader stays within one of it */
  uint64_t epoch;       /* where the reader is to (re)start, for gen */
  size_t position;
  kept *store;
  size_t n_kept, cap_kept;
};

static void shard_permutation(size_t n, uint64_t seed, uint64_t epoch, int shuffle, size_t *perm) {
  for (size_t i = 0; i < n; i++) perm[i] = i;
  if (!shuffle || n < 2) return;
  ff__philox rng;
  ff__philox_init(&rng, seed, FF__RNG_SHARDS, 0, epoch);
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)ff__philox_randint(&rng, 0, (int64_t)i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
}

/* The rank's shards for the epoch, in reading order; returns how many. */
static size_t rank_shards(const ff__stream *s, uint64_t epoch, size_t *mine) {
  size_t n = s->index->num_shards, w = (size_t)s->cfg.world_size, k = 0;
  size_t *perm = malloc(n * sizeof *perm), *load = calloc(w, sizeof *load);
  if (!perm || !load) {
    free(perm), free(load);
    return 0;
  }
  shard_permutation(n, s->cfg.seed, epoch, s->cfg.shuffle, perm);
  for (size_t i = 0; i < n; i++) {
    size_t r = 0;
    for (size_t q = 1; q < w; q++)
      if (load[q] < load[r]) r = q;
    load[r] += s->first[perm[i] + 1] - s->first[perm[i]];
    if (r == (size_t)s->cfg.rank) mine[k++] = perm[i];
  }
  free(perm), free(load);
  return k;
}

/* The rank's input stream through the shuffle buffer; writes up to `limit` outputs. */
static void order_fill(const ff__stream *s, uint64_t epoch, int64_t *out, size_t limit) {
  size_t n = s->index->num_shards, got = 0;
  size_t *mine = malloc((n ? n : 1) * sizeof *mine);
  size_t b = s->cfg.shuffle ? s->cfg.buffer : 0, used = 0;
  int64_t *buf = malloc((b ? b : 1) * sizeof *buf);
  if (!mine || !buf) {
    free(mine), free(buf);
    for (size_t i = 0; i < limit; i++) out[i] = 0; /* out of memory: an order still, never garbage */
    return;
  }
  size_t k = rank_shards(s, epoch, mine);
  ff__philox rng;
  ff__philox_init(&rng, s->cfg.seed, FF__RNG_BUFFER, (uint64_t)s->cfg.rank, epoch);
  for (size_t i = 0; i < k && got < limit; i++)
    for (size_t id = s->first[mine[i]]; id < s->first[mine[i] + 1] && got < limit; id++) {
      if (!b) {
        out[got++] = (int64_t)id;
      } else if (used < b) {
        buf[used++] = (int64_t)id;
      } else {
        size_t j = (size_t)ff__philox_randint(&rng, 0, (int64_t)b - 1);
        out[got++] = buf[j], buf[j] = (int64_t)id;
      }
    }
  while (used && got < limit) {
    size_t j = (size_t)ff__philox_randint(&rng, 0, (int64_t)used - 1);
    out[got++] = buf[j], buf[j] = buf[--used];
  }
  free(mine), free(buf);
}

size_t ff__stream_num_samples(const ff__stream *s) { return s->per_rank; }

void ff__stream_order(const ff__stream *s, uint64_t epoch, int64_t *out) { order_fill(s, epoch, out, s->per_rank); }

/* --------------------------------------------------------------- store */

static void kept_free(kept *k) {
  free(k->data), free(k->error);
  k->data = NULL, k->error = NULL;
}

/* Keeps a sample for gen; waits for room. 0, or -1 when gen is over. */
static int store_put(ff__stream *s, uint64_t gen, kept k) {
  pthread_mutex_lock(&s->mu);
  while (!s->stop && s->gen == gen && s->n_kept == s->cap_kept) pthread_cond_wait(&s->cv, &s->mu);
  int ok = !s->stop && s->gen == gen;
  if (ok) s->store[s->n_kept++] = k;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (!ok) kept_free(&k);
  return ok ? 0 : -1;
}

uint64_t ff__stream_gen(const ff__stream *s) { return __atomic_load_n(&s->gen, __ATOMIC_RELAXED); }

ff_status ff__stream_take(ff__stream *s, uint64_t gen, uint64_t epoch, int64_t sample, ff__buf *buf,
                          size_t *size_bytes, ff__error *err) {
  pthread_mutex_lock(&s->mu);
  ff_status st = FF_END;
  if (s->gen == gen && epoch > s->asked) s->asked = epoch, pthread_cond_broadcast(&s->cv);
  while (!s->stop && s->gen == gen) {
    size_t i = 0;
    while (i < s->n_kept && !(s->store[i].epoch == epoch && s->store[i].sample == sample)) i++;
    if (i == s->n_kept) {
      pthread_cond_wait(&s->cv, &s->mu);
      continue;
    }
    kept k = s->store[i];
    s->store[i] = s->store[--s->n_kept];
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    const char *path = s->index->paths[sample];
    if (k.error) {
      st = ff__error_set(err, k.status, "%s: %s", path, k.error);
    } else { /* the worker's buffer takes the bytes over: no copy */
      ff__buf_adopt(buf, k.data, k.size);
      k.data = NULL, *size_bytes = k.size, st = FF_OK;
    }
    kept_free(&k);
    return st;
  }
  pthread_mutex_unlock(&s->mu);
  return ff__error_set(err, FF_END, "%s: the stream moved on", s->index->paths[sample]);
}

/* --------------------------------------------------------------- reader */

typedef struct pass_ctx {
  ff__stream *s;
  uint64_t gen, epoch;
  size_t shard, next;    /* the shard; its next sample (counting those the index has) */
  size_t done;           /* samples of the shard already dealt with in an earlier pass */
  const int64_t *pos;    /* output position of each sample this epoch, -1: not in the rank's epoch */
  size_t from;           /* the restart position: outputs before it are not kept */
  int complete;          /* the pass has had every sample the shard had at open: it stops */
} pass_ctx;

static int pass_over(void *p) {
  pass_ctx *c = p;
  return __atomic_load_n(&c->s->stop, __ATOMIC_RELAXED) || __atomic_load_n(&c->s->gen, __ATOMIC_RELAXED) != c->gen;
}

static int wanted(const pass_ctx *c, size_t sample) {
  return c->pos[sample] >= 0 && (size_t)c->pos[sample] >= c->from;
}

/* A sample of the pass (its bytes are ours: kept, or freed), or the reason
 * its member was refused: kept when this epoch wants it. After the shard's
 * last sample the pass stops (FF_END, complete set). */
static ff_status on_sample(void *p, const ff__tar_sample *t, uint8_t *data, const ff__error *problem,
                           ff__error *err) {
  pass_ctx *c = p;
  ff__stream *s = c->s;
  size_t end = s->first[c->shard + 1];
  if (pass_over(c)) return free(data), ff__error_set(err, FF_END, "given up");
  size_t id = s->first[c->shard] + c->next;
  const char *member = id < end ? strrchr(s->index->paths[id], ':') : NULL;
  /* a sample the index left out (a repeated key) is not the next one it has */
  if (!member || strcmp(member + 1, t->member)) return free(data), FF_OK;
  c->next++;
  c->complete = id + 1 == end;
  ff_status st = FF_OK;
  if (c->next > c->done && wanted(c, id)) {
    kept k = {c->epoch, (int64_t)id, data, t->size, NULL, FF_OK};
    if (problem && !(k.error = strdup(problem->msg))) return ff__error_set(err, FF_ENOMEM, "out of memory");
    k.status = problem ? problem->status : FF_OK, data = NULL;
    c->done = c->next;
    if (store_put(s, c->gen, k)) c->complete = 0, st = ff__error_set(err, FF_END, "given up");
  }
  free(data);
  return st || !c->complete ? st : ff__error_set(err, FF_END, "the shard's samples are all read");
}

/* Reads one shard of the epoch with retries; failing samples are kept as errors. */
static int read_shard(ff__stream *s, pass_ctx *c) {
  ff__pass pass = {.name = s->index->shards[c->shard], .fn = on_sample, .ctx = c, .read = &s->read,
                   .abort_fn = pass_over, .abort_ctx = c, .limits = &s->limits};
  int tries = 0;
  ff_status st;
  c->done = 0;
  for (;;) {
    ff__tar_shard sc = {0};
    ff__error err;
    c->next = 0, c->complete = 0;
    st = ff__transport_pass(&pass, &sc, &err);
    ff__tar_shard_free(&sc);
    tries++;
    if (pass_over(c)) return -1;
    if (c->complete) return 0;
    if (st == FF_ENOMEM) snprintf(pass.why, sizeof pass.why, "out of memory"), pass.retryable = 0;
    if (!st || st == FF_END || !pass.retryable || tries > s->cfg.retries) break;
    for (int waited = 0; waited < s->cfg.backoff_ms << (tries - 1) && !pass_over(c); waited += 10) ff__sleep_ms(10);
  }
  if (!st && c->next >= s->first[c->shard + 1] - s->first[c->shard]) return 0;
  if (!st) snprintf(pass.why, sizeof pass.why, "the shard holds fewer samples than when it was opened");
  char msg[700];
  snprintf(msg, sizeof msg, "%s%s", pass.why[0] ? pass.why : "cannot read the shard",
           pass.retryable && tries > 1 ? " (after retries)" : "");
  for (size_t id = s->first[c->shard] + c->done; id < s->first[c->shard + 1]; id++) {
    if (!wanted(c, id)) continue;
    kept k = {c->epoch, (int64_t)id, NULL, 0, strdup(msg), FF_EIO};
    if (store_put(s, c->gen, k)) return -1;
  }
  return 0;
}

/* Reads the rank's shards of one epoch from position `from` on; -1 when a restart or close ended it. */
static int read_epoch(ff__stream *s, uint64_t gen, uint64_t epoch, size_t from, int64_t *order, int64_t *pos,
                      size_t *mine) {
  ff__stream_order(s, epoch, order);
  for (size_t i = 0; i < s->index->count; i++) pos[i] = -1;
  for (size_t i = 0; i < s->per_rank; i++) pos[order[i]] = (int64_t)i;
  size_t k = rank_shards(s, epoch, mine);
  pass_ctx c = {.s = s, .gen = gen, .epoch = epoch, .pos = pos, .from = from};
  for (size_t i = 0; i < k; i++) {
    c.shard = mine[i];
    int any = 0;
    for (size_t id = s->first[c.shard]; id < s->first[c.shard + 1] && !any; id++) any = wanted(&c, id);
    if (any && read_shard(s, &c)) return -1;
  }
  return pass_over(&c) ? -1 : 0;
}

static void *reader_main(void *p) {
  ff__stream *s = p;
  int64_t *order = malloc((s->per_rank ? s->per_rank : 1) * sizeof *order);
  int64_t *pos = malloc(s->index->count * sizeof *pos);
  size_t *mine = malloc(s->index->num_shards * sizeof *mine);
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    uint64_t gen = s->gen, epoch = s->epoch;
    size_t from = s->position;
    pthread_mutex_unlock(&s->mu);
    if (order && pos && mine) { /* out of memory: nothing is read, every wait ends at close */
      while (!read_epoch(s, gen, epoch, from, order, pos, mine)) { /* then the next epoch, once asked for */
        epoch++, from = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->stop && s->gen == gen && s->asked + 1 < epoch) pthread_cond_wait(&s->cv, &s->mu);
        int over = s->stop || s->gen != gen;
        pthread_mutex_unlock(&s->mu);
        if (over) break;
      }
    }
    pthread_mutex_lock(&s->mu);
    while (!s->stop && s->gen == gen) pthread_cond_wait(&s->cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  free(order), free(pos), free(mine);
  return NULL;
}

ff_status ff__stream_open(const ff__index *index, const ff__stream_cfg *cfg, ff__stream **out, ff__error *err) {
  ff__stream *s = calloc(1, sizeof *s);
  if (!s) return ff__error_set(err, FF_ENOMEM, "out of memory");
  s->index = index, s->cfg = *cfg;
  s->read = (ff__tar_read_opts){cfg->max_member_bytes, cfg->is_image};
  ff_status st = ff__stream_limits_read(&s->limits, err);
  if (st) return free(s), st;
  if (s->cfg.retries < 0) s->cfg.retries = env_int("FF_STREAM_RETRIES", DEFAULT_RETRIES);
  if (s->cfg.backoff_ms < 0) s->cfg.backoff_ms = env_int("FF_STREAM_BACKOFF_MS", DEFAULT_BACKOFF_MS);
  s->first = calloc(index->num_shards + 1, sizeof *s->first);
  s->cap_kept = cfg->buffer + cfg->window + 1;
  s->store = calloc(s->cap_kept, sizeof *s->store);
  if (!s->first || !s->store) {
    ff__stream_close(s);
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  size_t largest = 0;
  for (size_t i = 0; i < index->count; i++) s->first[index->shard_of[i] + 1]++;
  for (size_t i = 0; i < index->num_shards; i++) {
    largest = s->first[i + 1] > largest ? s->first[i + 1] : largest;
    s->first[i + 1] += s->first[i];
  }
  size_t w = (size_t)cfg->world_size, spare = (w - 1) * largest;
  s->per_rank = index->count > spare ? (index->count - spare) / w : 0;
  if (!s->per_rank) {
    ff__stream_close(s);
    return ff__error_set(err, FF_EINVAL, "%zu streamed shard(s) of %zu samples (the largest %zu) cannot give %d "
                         "ranks the same number of samples: each rank needs shards of its own (use more, smaller "
                         "shards or fewer ranks)", index->num_shards, index->count, largest, cfg->world_size);
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->started = pthread_create(&s->thread, NULL, reader_main, s) == 0;
  if (!s->started) {
    ff__stream_close(s);
    return ff__error_set(err, FF_ENOMEM, "cannot start the stream reader thread");
  }
  *out = s;
  return FF_OK;
}

void ff__stream_restart(ff__stream *s, uint64_t epoch, size_t position) {
  pthread_mutex_lock(&s->mu);
  __atomic_add_fetch(&s->gen, 1, __ATOMIC_RELAXED);
  s->epoch = epoch, s->position = position, s->asked = epoch;
  for (size_t i = 0; i < s->n_kept; i++) kept_free(&s->store[i]);
  s->n_kept = 0;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void ff__stream_stop(ff__stream *s) {
  if (!s || !s->started) return;
  pthread_mutex_lock(&s->mu);
  __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void ff__stream_close(ff__stream *s) {
  if (!s) return;
  if (s->started) {
    ff__stream_stop(s);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
  }
  for (size_t i = 0; s->store && i < s->n_kept; i++) kept_free(&s->store[i]);
  free(s->store);
  free(s->first);
  free(s);
}
