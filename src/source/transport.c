/* transport.c — one pass over one streamed shard (transport.h): libcurl's
 * multi interface for http:// and https://, a command's standard output for
 * pipe:COMMAND (WebDataset's pipe: URLs), the file for a compressed local
 * shard; each under libarchive's reader (any compression) and the
 * WebDataset grouping of tar.c.
 *
 * The limits of docs/limits.md keep a hostile server or command from holding
 * a pass for ever or filling memory. Redirects are counted and may only go
 * to http or https. A transfer slower than a minimum rate over a window of
 * the time the pass waited for data is a stall: only waiting counts, so a
 * reader blocked on a slow consumer is no stall (curl's own low-speed rule
 * counts wall time, which is why it is not used). A pass reads at most so
 * many bytes of tar data, and a counting pass takes at most so many samples.
 * A command runs in a process group of its own: abandoned, the group is
 * killed; once its shard has ended the command may run on for a grace
 * period, then its group gets SIGTERM and, a grace period later, SIGKILL. */
#include "source/transport.h"

#include <archive.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"

extern char **environ;

/* ------------------------------------------------------------------ limits */

/* The variable as a whole number in [min, max], else fallback when unset. */
static ff_status env_number(const char *name, uint64_t fallback, uint64_t min, uint64_t max, uint64_t *out,
                            ff__error *err) {
  const char *v = getenv(name);
  if (!v || !*v) return *out = fallback, FF_OK;
  char *end = NULL;
  errno = 0;
  unsigned long long x = *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
  if (!end || errno || *end || x < min || x > max)
    return ff__error_set(err, FF_EINVAL, "%s='%s': expected a whole number in %" PRIu64 "..%" PRIu64, name, v, min,
                         max);
  *out = x;
  return FF_OK;
}

ff_status ff__stream_limits_read(ff__stream_limits *out, ff__error *err) {
  uint64_t redirects = 0, rate = 0, stall = 0, bytes = 0, samples = 0, grace = 0;
  ff_status st = env_number("FF_HTTP_MAX_REDIRECTS", 5, 0, 1000, &redirects, err);
  if (!st) st = env_number("FF_STREAM_MIN_BYTES_PER_S", 10000, 0, (uint64_t)1 << 40, &rate, err);
  if (!st) st = env_number("FF_STREAM_STALL_S", 30, 1, 86400, &stall, err);
  if (!st) st = env_number("FF_STREAM_MAX_SHARD_BYTES", (uint64_t)64 << 30, 0, UINT64_MAX, &bytes, err);
  if (!st) st = env_number("FF_STREAM_MAX_SHARD_SAMPLES", 1000000, 0, UINT64_MAX, &samples, err);
  if (!st) st = env_number("FF_PIPE_EXIT_GRACE_MS", 5000, 0, 3600000, &grace, err);
  if (!st)
    *out = (ff__stream_limits){(long)redirects, rate, (long)stall, bytes, samples, (long)grace};
  return st;
}

/* ------------------------------------------------------------------ a pass */

typedef struct transport {
  ff__pass *p;
  const ff__tar_shard *sc; /* the pass's scan: a counting pass's samples are counted there */
  int kind; /* 0 file, 1 http, 2 pipe */
  /* http */
  CURLM *multi;
  CURL *easy;
  char *rx; /* bytes received since libarchive last asked, handed to it */
  size_t rx_len, rx_cap;
  size_t header_bytes; /* response headers received since the last count: a server sending them is no stall */
  int done, rx_failed;
  CURLcode result;
  char curl_error[CURL_ERROR_SIZE];
  /* pipe and file */
  int fd;
  pid_t pid;
  char buf[1 << 16];
  /* the rate rule's window: time spent waiting for data, and the bytes that came in it */
  uint64_t window_ns, window_bytes;
} transport;

static la_ssize_t fail(struct archive *a, transport *t, int retryable, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the pass (the first reason stays) and tells libarchive why. */
static la_ssize_t fail(struct archive *a, transport *t, int retryable, const char *fmt, ...) {
  if (!t->p->why[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->p->why, sizeof t->p->why, fmt, ap);
    va_end(ap);
    t->p->retryable = retryable;
  }
  archive_set_error(a, EIO, "%s", t->p->why);
  return -1;
}

static int aborted(const transport *t) { return t->p->abort_fn && t->p->abort_fn(t->p->abort_ctx); }

static la_ssize_t give_up(struct archive *a, transport *t) {
  snprintf(t->p->why, sizeof t->p->why, "given up");
  archive_set_error(a, ECANCELED, "given up");
  return -1;
}

/* Counts n bytes that came after the pass waited waited_ns for them; -1
 * (the pass failed) past a limit: the shard's tar bytes, a counting pass's
 * samples, or the rate over a window of waiting. */
static int count(struct archive *a, transport *t, uint64_t waited_ns, size_t n) {
  const ff__stream_limits *L = t->p->limits;
  t->p->bytes += n;
  int64_t filtered = archive_filter_bytes(a, 0); /* decompressed: a bomb is bounded too (-1 while opening) */
  uint64_t tar_bytes = filtered > 0 ? (uint64_t)filtered : 0;
  if (L->max_shard_bytes && (t->p->bytes > L->max_shard_bytes || tar_bytes > L->max_shard_bytes))
    return (int)fail(a, t, 0, "more than %" PRIu64 " bytes of tar data (FF_STREAM_MAX_SHARD_BYTES): an endless "
                     "stream?", L->max_shard_bytes);
  if (!t->p->fn && L->max_shard_samples && t->sc->n > L->max_shard_samples)
    return (int)fail(a, t, 0, "more than %" PRIu64 " samples in the shard (FF_STREAM_MAX_SHARD_SAMPLES): an endless "
                     "stream?", L->max_shard_samples);
  t->window_ns += waited_ns, t->window_bytes += n;
  if (!L->min_bytes_per_s || t->window_ns < (uint64_t)L->stall_s * 1000000000u) return 0;
  if (t->window_bytes < L->min_bytes_per_s * (uint64_t)L->stall_s)
    return (int)fail(a, t, t->kind == 1, "stalled: %" PRIu64 " bytes in %ld s of waiting, under %" PRIu64 " bytes/s "
                     "(FF_STREAM_MIN_BYTES_PER_S, FF_STREAM_STALL_S)", t->window_bytes, L->stall_s, L->min_bytes_per_s);
  t->window_ns = 0, t->window_bytes = 0;
  return 0;
}

static size_t curl_write(char *data, size_t size, size_t n, void *p) {
  transport *t = p;
  size_t len = size * n;
  if (t->rx_len + len > t->rx_cap) {
    size_t cap = t->rx_cap ? t->rx_cap : 1 << 16;
    while (cap < t->rx_len + len) cap *= 2;
    char *rx = realloc(t->rx, cap);
    if (!rx) return t->rx_failed = 1, 0; /* curl fails the transfer */
    t->rx = rx, t->rx_cap = cap;
  }
  memcpy(t->rx + t->rx_len, data, len);
  t->rx_len += len;
  return len;
}

static size_t curl_header(char *data, size_t size, size_t n, void *p) {
  (void)data;
  ((transport *)p)->header_bytes += size * n;
  return size * n;
}

static int http_retryable(CURLcode c, long code) {
  if (c == CURLE_HTTP_RETURNED_ERROR) return code >= 500 || code == 408 || code == 429;
  return c == CURLE_COULDNT_CONNECT || c == CURLE_PARTIAL_FILE || c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR ||
         c == CURLE_OPERATION_TIMEDOUT || c == CURLE_GOT_NOTHING || c == CURLE_COULDNT_RESOLVE_HOST;
}

/* Why a transfer failed, in the words of its cause: the limit it met, or curl's own detail. */
static la_ssize_t http_failed(struct archive *a, transport *t) {
  long code = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
  CURLcode c = t->result;
  const char *detail = t->curl_error[0] ? t->curl_error : curl_easy_strerror(c);
  if (c == CURLE_HTTP_RETURNED_ERROR) return fail(a, t, http_retryable(c, code), "HTTP %ld", code);
  if (c == CURLE_TOO_MANY_REDIRECTS)
    return fail(a, t, 0, "more than %ld redirects (FF_HTTP_MAX_REDIRECTS)", t->p->limits->max_redirects);
  if (c == CURLE_UNSUPPORTED_PROTOCOL)
    return fail(a, t, 0, "a redirect or URL to a protocol other than http or https (%s)", detail);
  if (c == CURLE_WRITE_ERROR && t->rx_failed) return fail(a, t, 0, "out of memory receiving the shard");
  if (c == CURLE_OUT_OF_MEMORY) /* curl says no more when a header line passes CURL_MAX_HTTP_HEADER */
    return fail(a, t, 0, "the server's response headers are too large for curl (a header line over 100 kB), or "
                "curl ran out of memory (%s)", detail);
  return fail(a, t, http_retryable(c, code), "%s", detail);
}

static la_ssize_t http_read(struct archive *a, void *p, const void **out) {
  transport *t = p;
  t->rx_len = 0;
  uint64_t since = ff__now_ns();
  for (;;) {
    if (aborted(t)) return give_up(a, t);
    int running = 0, left;
    curl_multi_perform(t->multi, &running);
    CURLMsg *m;
    while ((m = curl_multi_info_read(t->multi, &left)))
      if (m->msg == CURLMSG_DONE) t->done = 1, t->result = m->data.result;
    uint64_t now = ff__now_ns();
    if (count(a, t, now - since, t->rx_len + t->header_bytes)) return -1;
    since = now, t->header_bytes = 0;
    if (t->rx_len) return *out = t->rx, (la_ssize_t)t->rx_len;
    if (t->done) return t->result == CURLE_OK ? 0 : http_failed(a, t);
    curl_multi_poll(t->multi, NULL, 0, 100, NULL);
  }
}

/* A command's output or a file, read as it comes (a command may be slow to write). */
static la_ssize_t fd_read(struct archive *a, void *p, const void **out) {
  transport *t = p;
  uint64_t since = ff__now_ns();
  for (;;) {
    if (aborted(t)) return give_up(a, t);
    struct pollfd pfd = {t->fd, POLLIN, 0};
    int ready = poll(&pfd, 1, 100);
    ssize_t r = 0;
    if (ready > 0 && (r = read(t->fd, t->buf, sizeof t->buf)) < 0) {
      if (errno != EINTR && errno != EAGAIN) return fail(a, t, 0, "read error: %s", strerror(errno));
      ready = 0, r = 0;
    }
    uint64_t now = ff__now_ns();
    if (count(a, t, now - since, (size_t)r)) return -1;
    since = now;
    if (ready > 0) return *out = t->buf, r; /* 0: the end */
  }
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_start(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static int http_open(transport *t, struct archive *a) {
  t->kind = 1;
  t->multi = curl_multi_init();
  t->easy = curl_easy_init();
  if (!t->multi || !t->easy) return snprintf(t->p->why, sizeof t->p->why, "out of memory"), -1;
  CURL *e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, t->p->name);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, curl_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, curl_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_error);
  curl_easy_setopt(e, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, t->p->limits->max_redirects);
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85 */
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_multi_add_handle(t->multi, e);
  return archive_read_open(a, t, NULL, http_read, NULL) == ARCHIVE_OK ? 0 : -1;
}

static int pipe_open(transport *t, struct archive *a) {
  t->kind = 2;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) return snprintf(t->p->why, sizeof t->p->why, "pipe: %s", strerror(errno)), -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  /* SIGPIPE at its default for the command, which the caller may ignore
   * (Python does): a command cut off by a close then ends silently, not
   * with "write error: Broken pipe". A group of its own: what it starts
   * is stopped with it. */
  posix_spawnattr_t at;
  sigset_t dfl;
  posix_spawnattr_init(&at);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  char *argv[] = {"sh", "-c", (char *)t->p->name + 5, NULL};
  int e = posix_spawn(&t->pid, "/bin/sh", &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (e) {
    close(fds[0]);
    t->pid = 0;
    return snprintf(t->p->why, sizeof t->p->why, "cannot start the command: %s", strerror(e)), -1;
  }
  t->fd = fds[0];
  return archive_read_open(a, t, NULL, fd_read, NULL) == ARCHIVE_OK ? 0 : -1;
}

/* Opens the transport of p->name and the archive reader over it. */
static int transport_open(transport *t, struct archive *a) {
  const char *name = t->p->name;
  if (!strncmp(name, "http://", 7) || !strncmp(name, "https://", 8)) return http_open(t, a);
  if (!strncmp(name, "pipe:", 5)) return pipe_open(t, a);
  t->kind = 0;
  if ((t->fd = open(name, O_RDONLY | O_CLOEXEC)) < 0)
    return snprintf(t->p->why, sizeof t->p->why, "%s", strerror(errno)), -1;
  return archive_read_open(a, t, NULL, fd_read, NULL) == ARCHIVE_OK ? 0 : -1;
}

/* Waits up to ms for the command to end (a give-up ends the wait at once);
 * whether it ended. */
static int wait_command(transport *t, int *status, long ms) {
  for (long waited = 0;; waited += 10) {
    pid_t r = waitpid(t->pid, status, WNOHANG);
    if (r == t->pid) return 1;
    if (r < 0 && errno != EINTR) return *status = 0, 1; /* reaped elsewhere */
    if (waited >= ms || aborted(t)) return 0;
    ff__sleep_ms(10);
  }
}

/* Ends the pass; a command that failed makes the pass fail: -1. An abandoned
 * command (a close, a restart, a failed or finished pass) is killed with its
 * group before the pipe is closed, so that it never writes into a closed
 * pipe and says so: what it says on its own while it runs is its own report.
 * A command still running after its shard ended gets the grace rule. */
static int transport_close(transport *t, int abandon) {
  if (t->easy) curl_multi_remove_handle(t->multi, t->easy), curl_easy_cleanup(t->easy);
  if (t->multi) curl_multi_cleanup(t->multi);
  free(t->rx);
  t->easy = NULL, t->multi = NULL, t->rx = NULL;
  if (t->fd >= 0 && !(abandon && t->pid > 0)) close(t->fd), t->fd = -1;
  if (t->pid <= 0) return 0;
  int status = 0, ended_by = 0, reaped = 0;
  long grace = t->p->limits->exit_grace_ms;
  if (!abandon) {
    reaped = wait_command(t, &status, grace);
    if (!reaped && !aborted(t)) {
      kill(-t->pid, SIGTERM), ended_by = SIGTERM;
      reaped = wait_command(t, &status, grace);
      if (!reaped && !aborted(t)) ended_by = SIGKILL;
    }
  }
  if (!reaped) { /* abandoned, given up, or deaf to SIGTERM */
    kill(-t->pid, SIGKILL);
    while (waitpid(t->pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (t->fd >= 0) close(t->fd);
  t->fd = -1, t->pid = 0;
  if (ended_by && t->p->say_exit)
    fprintf(stderr, "fusionflow: %s: the command still ran %.1f s after its shard ended: ended with %s "
            "(FF_PIPE_EXIT_GRACE_MS=%ld)\n", t->p->name, (ended_by == SIGKILL ? 2 : 1) * grace / 1000.0,
            ended_by == SIGKILL ? "SIGKILL, as SIGTERM did not end it" : "SIGTERM", grace);
  if (abandon || ended_by || !reaped || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return 0;
  if (!t->p->why[0])
    snprintf(t->p->why, sizeof t->p->why, "the command %s %d", WIFEXITED(status) ? "exited with status" :
             "was killed by signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return -1;
}

ff_status ff__transport_pass(ff__pass *p, ff__tar_shard *sc, ff__error *err) {
  pthread_once(&curl_once, curl_start);
  p->bytes = 0, p->why[0] = 0, p->retryable = 0;
  transport *t = calloc(1, sizeof *t);
  struct archive *a = ff__tar_archive_new();
  if (!t || !a) {
    free(t);
    if (a) archive_read_free(a);
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory", p->name);
  }
  t->p = p, t->sc = sc, t->fd = -1;
  ff_status st = FF_OK;
  if (transport_open(t, a)) {
    if (!p->why[0]) snprintf(p->why, sizeof p->why, "%s", archive_error_string(a));
    st = FF_EIO;
  } else {
    size_t bad_before = sc->bad.n;
    st = ff__tar_scan_archive(a, p->name, 0, p->fn, p->ctx, p->read, sc, err);
    if (p->why[0] && !st) { /* the transport failed under libarchive: not a data problem */
      while (sc->bad.n > bad_before) free(sc->bad.v[--sc->bad.n]);
      st = FF_EIO;
    }
  }
  archive_read_free(a);
  if (transport_close(t, st != FF_OK) && !st) st = FF_EIO;
  free(t);
  return st;
}
