/* stream.c — tar shards that can only be read from start to end: http:// and
 * https:// (libcurl), pipe:COMMAND (the command's standard output, as
 * WebDataset's pipe: URLs) and compressed files (libarchive's filters).
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
 * Network errors (refused or dropped connections, HTTP 5xx, 408, 429,
 * stalls of 30 s) are retried with exponential backoff; a shard read again
 * resumes at the sample after the last one kept. After the last retry the
 * shard's remaining samples fail with a message naming the URL (the
 * loader's on_error then raises or skips them). Other HTTP errors (404)
 * fail at once. */
#include "source/stream.h"

#include <archive.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/philox.h"
#include "source/tar.h"

extern char **environ;

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

/* ------------------------------------------------------------ one read */

/* One pass over one shard: the transport under libarchive's reader. */
typedef struct transport {
  const char *name;
  int kind;               /* 0 file, 1 http, 2 pipe */
  /* http */
  CURLM *multi;
  CURL *easy;
  char *rx;               /* bytes received, handed to libarchive */
  size_t rx_len, rx_cap;
  int done;
  CURLcode result;
  long http_code;
  /* pipe */
  int fd;
  pid_t pid;
  char buf[1 << 16];
  /* why the pass failed, and whether a retry may help */
  char why[512];
  int retryable;
  int (*abort_fn)(void *); /* nonzero: give up now (a restart or close) */
  void *abort_ctx;
} transport;

static size_t curl_write(char *data, size_t size, size_t n, void *p) {
  transport *t = p;
  size_t len = size * n;
  if (t->rx_len + len > t->rx_cap) {
    size_t cap = t->rx_cap ? t->rx_cap : 1 << 16;
    while (cap < t->rx_len + len) cap *= 2;
    char *rx = realloc(t->rx, cap);
    if (!rx) return 0; /* curl fails the transfer */
    t->rx = rx, t->rx_cap = cap;
  }
  memcpy(t->rx + t->rx_len, data, len);
  t->rx_len += len;
  return len;
}

static int http_retryable(CURLcode c, long code) {
  if (c == CURLE_HTTP_RETURNED_ERROR) return code >= 500 || code == 408 || code == 429;
  return c == CURLE_COULDNT_CONNECT || c == CURLE_PARTIAL_FILE || c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR ||
         c == CURLE_OPERATION_TIMEDOUT || c == CURLE_GOT_NOTHING || c == CURLE_COULDNT_RESOLVE_HOST;
}

static la_ssize_t http_read(struct archive *a, void *p, const void **out) {
  transport *t = p;
  t->rx_len = 0;
  for (;;) {
    if (t->rx_len) {
      *out = t->rx;
      return (la_ssize_t)t->rx_len;
    }
    if (t->done) {
      if (t->result == CURLE_OK) return 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->http_code);
      if (t->result == CURLE_HTTP_RETURNED_ERROR)
        snprintf(t->why, sizeof t->why, "HTTP %ld", t->http_code);
      else
        snprintf(t->why, sizeof t->why, "%s", curl_easy_strerror(t->result));
      t->retryable = http_retryable(t->result, t->http_code);
      archive_set_error(a, EIO, "%s", t->why);
      return -1;
    }
    if (t->abort_fn(t->abort_ctx)) {
      snprintf(t->why, sizeof t->why, "given up");
      archive_set_error(a, ECANCELED, "given up");
      return -1;
    }
    int running = 0;
    curl_multi_perform(t->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(t->multi, &left)))
      if (m->msg == CURLMSG_DONE) t->done = 1, t->result = m->data.result;
    if (!t->done && !t->rx_len) curl_multi_poll(t->multi, NULL, 0, 100, NULL);
  }
}

static la_ssize_t pipe_read(struct archive *a, void *p, const void **out) {
  transport *t = p;
  for (;;) {
    if (t->abort_fn(t->abort_ctx)) {
      snprintf(t->why, sizeof t->why, "given up");
      archive_set_error(a, ECANCELED, "given up");
      return -1;
    }
    struct pollfd pfd = {t->fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) == 0) continue;
    ssize_t r = read(t->fd, t->buf, sizeof t->buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(t->why, sizeof t->why, "read error: %s", strerror(errno));
      archive_set_error(a, EIO, "%s", t->why);
      return -1;
    }
    *out = t->buf;
    return r;
  }
}

/* Opens the transport of t->name and the archive reader over it. */
static int transport_open(transport *t, struct archive *a) {
  const char *name = t->name;
  t->fd = -1, t->pid = 0;
  if (!strncmp(name, "http://", 7) || !strncmp(name, "https://", 8)) {
    t->kind = 1;
    t->multi = curl_multi_init();
    t->easy = curl_easy_init();
    if (!t->multi || !t->easy) return snprintf(t->why, sizeof t->why, "out of memory"), -1;
    curl_easy_setopt(t->easy, CURLOPT_URL, name);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, curl_write);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(t->easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled server is an error, not a hang */
    curl_easy_setopt(t->easy, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_multi_add_handle(t->multi, t->easy);
    return archive_read_open(a, t, NULL, http_read, NULL) == ARCHIVE_OK ? 0 : -1;
  }
  if (!strncmp(name, "pipe:", 5)) {
    t->kind = 2;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC)) return snprintf(t->why, sizeof t->why, "pipe: %s", strerror(errno)), -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    /* SIGPIPE at its default for the command, which the caller may ignore
     * (Python does): a command cut off by a close then ends silently,
     * not with "write error: Broken pipe". */
    posix_spawnattr_t at;
    sigset_t dfl;
    posix_spawnattr_init(&at);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
    char *argv[] = {"sh", "-c", (char *)name + 5, NULL};
    int e = posix_spawn(&t->pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e) {
      close(fds[0]);
      t->pid = 0;
      return snprintf(t->why, sizeof t->why, "cannot start the command: %s", strerror(e)), -1;
    }
    t->fd = fds[0];
    return archive_read_open(a, t, NULL, pipe_read, NULL) == ARCHIVE_OK ? 0 : -1;
  }
  t->kind = 0;
  if (archive_read_open_filename(a, name, 1 << 16) != ARCHIVE_OK)
    return snprintf(t->why, sizeof t->why, "%s", archive_error_string(a)), -1;
  return 0;
}

/* Ends the pass; a command that failed makes the pass fail. 0 or -1. An
 * abandoned command (a close, a restart, a failed pass) is stopped before
 * the pipe is closed, so that it never writes into a closed pipe and says
 * so: what it says on its own while it runs is its own report. */
static int transport_close(transport *t, int abandon) {
  int bad = 0;
  if (t->easy) curl_multi_remove_handle(t->multi, t->easy), curl_easy_cleanup(t->easy);
  if (t->multi) curl_multi_cleanup(t->multi);
  free(t->rx);
  t->easy = NULL, t->multi = NULL, t->rx = NULL;
  if (t->fd >= 0 && !(abandon && t->pid > 0)) close(t->fd), t->fd = -1;
  if (t->pid > 0) {
    int status = 0;
    if (abandon) kill(t->pid, SIGKILL);
    while (waitpid(t->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    if (!abandon && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      bad = -1;
      if (!t->why[0])
        snprintf(t->why, sizeof t->why, "the command %s %d", WIFEXITED(status) ? "exited with status" : "was killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    t->pid = 0;
  }
  return bad;
}

static int never(void *ctx) {
  (void)ctx;
  return 0;
}

/* One pass over shard `name` grouping its samples (into sc, or to fn with
 * their bytes). Returns FF_OK (sc->bad may list data problems), FF_ENOMEM,
 * what fn returns, or FF_EIO with t->why / t->retryable set when the
 * transport failed. */
static ff_status read_pass(const char *name, ff__tar_sample_fn fn, void *ctx, int (*abort_fn)(void *), void *abort_ctx,
                           ff__tar_shard *sc, char *why, size_t why_cap, int *retryable, ff__error *err) {
  transport *t = calloc(1, sizeof *t);
  struct archive *a = ff__tar_archive_new();
  if (!t || !a) {
    free(t);
    if (a) archive_read_free(a);
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory", name);
  }
  t->name = name, t->abort_fn = abort_fn ? abort_fn : never, t->abort_ctx = abort_ctx;
  ff_status st = FF_OK;
  if (transport_open(t, a)) {
    if (!t->why[0]) snprintf(t->why, sizeof t->why, "%s", archive_error_string(a));
    st = FF_EIO;
  } else {
    size_t bad_before = sc->bad.n;
    st = ff__tar_scan_archive(a, name, 0, fn, ctx, sc, err);
    if (t->why[0] && !st) { /* the transport failed under libarchive: not a data problem */
      while (sc->bad.n > bad_before) free(sc->bad.v[--sc->bad.n]);
      st = FF_EIO;
    }
  }
  archive_read_free(a);
  if (transport_close(t, st != FF_OK) && !st) st = FF_EIO;
  snprintf(why, why_cap, "%s", t->why);
  *retryable = t->retryable;
  free(t);
  return st;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_start(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

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
  w->p.due = ff__open_rule_due(&w->rule, &w->p);
  w->given_up = w->fn(w->ctx, &w->p) != 0;
  return w->given_up;
}

static int watch_poll(void *w) { return watch_tell(w, 0); }

ff_status ff__stream_index(const char *pattern, ff__strlist *shards, ff_open_progress_fn progress, void *ctx,
                           ff__index *out, ff__error *err) {
  pthread_once(&curl_once, curl_start);
  int retries = env_int("FF_STREAM_RETRIES", DEFAULT_RETRIES), backoff = env_int("FF_STREAM_BACKOFF_MS", DEFAULT_BACKOFF_MS);
  size_t n = shards->n;
  ff__tar_shard *scans = calloc(n ? n : 1, sizeof *scans);
  if (!scans) return ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
  ff_status st = FF_OK;
  open_watch w = {.fn = progress,
                  .ctx = ctx,
                  .p = {.num_shards = n, .max_attempts = 1 + (retries > 0 ? retries : 0)},
                  .start_ns = ff__now_ns()};
  for (size_t i = 0; i < n && !st; i++) {
    char why[512] = "";
    int retryable = 0, tries = 0;
    w.shard_ns = ff__now_ns();
    w.p.shard = shards->v[i], w.p.shard_index = i;
    for (;;) {
      ff__tar_shard_free(&scans[i]);
      w.p.attempt = tries + 1, w.p.backing_off = 0, w.p.last_error = why;
      if (watch_tell(&w, 1)) break;
      st = read_pass(shards->v[i], NULL, NULL, progress ? watch_poll : NULL, &w, &scans[i], why, sizeof why,
                     &retryable, err);
      tries++;
      if (w.given_up || st != FF_EIO || !retryable || tries > retries) break;
      w.p.attempt = tries + 1, w.p.backing_off = 1;
      watch_tell(&w, 1);
      for (int waited = 0; waited < backoff << (tries - 1) && !watch_poll(&w); waited += 10) sleep_ms(10);
    }
    if (w.given_up) {
      st = ff__error_set(err, FF_EIO, "tar:%s: opening was given up while reading %s (attempt %d of %d)", pattern,
                         shards->v[i], w.p.attempt, w.p.max_attempts);
    } else if (st == FF_EIO) {
      ff__tar_shard_free(&scans[i]);
      char msg[FF__ERRMSG_MAX];
      snprintf(msg, sizeof msg, "%s: cannot read the shard: %s%s", shards->v[i], why,
               retryable ? " (after retries)" : "");
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

/* A sample kept for a worker: its bytes, or why its shard failed. */
typedef struct kept {
  uint64_t epoch;
  int64_t sample;
  uint8_t *data;
  size_t size;
  char *error;
} kept;

struct ff__stream {
  const ff__index *index;
  ff__stream_cfg cfg;
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
      st = ff__error_set(err, FF_EIO, "%s: %s", path, k.error);
    } else {
      uint8_t *dst = ff__buf_reserve(buf, k.size ? k.size : 1);
      if (!dst) st = ff__error_set(err, FF_ENOMEM, "%s: out of memory for %zu bytes", path, k.size);
      else memcpy(dst, k.data, k.size), *size_bytes = k.size, st = FF_OK;
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
} pass_ctx;

static int pass_over(void *p) {
  pass_ctx *c = p;
  return __atomic_load_n(&c->s->stop, __ATOMIC_RELAXED) || __atomic_load_n(&c->s->gen, __ATOMIC_RELAXED) != c->gen;
}

static int wanted(const pass_ctx *c, size_t sample) {
  return c->pos[sample] >= 0 && (size_t)c->pos[sample] >= c->from;
}

/* A sample of the pass: kept when this epoch wants it. */
static ff_status on_sample(void *p, const ff__tar_sample *t, const uint8_t *data, ff__error *err) {
  pass_ctx *c = p;
  ff__stream *s = c->s;
  size_t end = s->first[c->shard + 1];
  if (pass_over(c)) return ff__error_set(err, FF_END, "given up");
  size_t id = s->first[c->shard] + c->next;
  if (id >= end) return FF_OK; /* more than at open: left out */
  const char *member = strrchr(s->index->paths[id], ':');
  /* a sample the index left out (a repeated key) is not the next one it has */
  if (!member || strcmp(member + 1, t->member)) return FF_OK;
  c->next++;
  if (c->next <= c->done || !wanted(c, id)) return FF_OK;
  kept k = {c->epoch, (int64_t)id, malloc(t->size ? t->size : 1), t->size, NULL};
  if (!k.data) return ff__error_set(err, FF_ENOMEM, "out of memory");
  memcpy(k.data, data, t->size);
  c->done = c->next;
  return store_put(s, c->gen, k) ? ff__error_set(err, FF_END, "given up") : FF_OK;
}

/* Reads one shard of the epoch with retries; failing samples are kept as errors. */
static int read_shard(ff__stream *s, pass_ctx *c) {
  const char *name = s->index->shards[c->shard];
  char why[512] = "";
  int retryable = 0, tries = 0;
  ff_status st;
  c->done = 0;
  for (;;) {
    ff__tar_shard sc = {0};
    ff__error err;
    c->next = 0;
    st = read_pass(name, on_sample, c, pass_over, c, &sc, why, sizeof why, &retryable, &err);
    ff__tar_shard_free(&sc);
    tries++;
    if (pass_over(c)) return -1;
    if (st == FF_ENOMEM) snprintf(why, sizeof why, "out of memory"), retryable = 0;
    if (!st || st == FF_END || !retryable || tries > s->cfg.retries) break;
    for (int waited = 0; waited < s->cfg.backoff_ms << (tries - 1) && !pass_over(c); waited += 10) sleep_ms(10);
  }
  if (!st && c->next >= s->first[c->shard + 1] - s->first[c->shard]) return 0;
  if (!st) snprintf(why, sizeof why, "the shard holds fewer samples than when it was opened");
  char msg[700];
  snprintf(msg, sizeof msg, "%s%s", why[0] ? why : "cannot read the shard", retryable ? " (after retries)" : "");
  for (size_t id = s->first[c->shard] + c->done; id < s->first[c->shard + 1]; id++) {
    if (!wanted(c, id)) continue;
    kept k = {c->epoch, (int64_t)id, NULL, 0, strdup(msg)};
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
