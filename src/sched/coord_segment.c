/* coord_segment.c — the node coordinator's shared table: its name, its
 * header and range checks (a damaged or foreign segment is never obeyed),
 * its robust process-shared lock, and the member slots (taking, freeing,
 * reclaiming the dead). Every function that changes the table runs under
 * the lock; each member's workers publish their CPU beside its slot without
 * it (relaxed atomics). */
#include "sched/coord_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define COORD_MAGIC 0x46464344u /* "FFCD" */
#define COORD_VERSION 11u       /* changes with the layout or the meaning of a field */

ff_status ff__coord_shm_name(const char *group, char *buf, size_t cap) {
  size_t len = group ? strlen(group) : 0;
  if (!len || len >= FF__COORD_GROUP_MAX) return FF_EINVAL;
  int n = snprintf(buf, cap, "/fusionflow-%lu-", (unsigned long)getuid());
  if (n < 0 || (size_t)n + len + 1 > cap) return FF_EINVAL;
  int replaced = 0;
  uint64_t hash = 14695981039346656037ull; /* 64-bit FNV-1a of the exact name */
  for (size_t i = 0; i < len; i++) {
    char ch = group[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
             ch == '_' || ch == '-';
    buf[n + i] = ok ? ch : '_';
    replaced |= !ok;
    hash = (hash ^ (unsigned char)ch) * 1099511628211ull;
  }
  buf[n + len] = 0;
  if (!replaced) return FF_OK;
  /* "a/b" is not "a_b": a name with a character replaced gets the hash of
   * the exact name after a '~', which a name kept as it is never holds. */
  size_t end = (size_t)n + len;
  int h = snprintf(buf + end, cap - end, "~%016llx", (unsigned long long)hash);
  return h > 0 && (size_t)h < cap - end ? FF_OK : FF_EINVAL;
}

/* Makes m the table's lock: process-shared and robust. 0 or an errno. */
static int lock_init(pthread_mutex_t *m) {
  pthread_mutexattr_t a;
  int rc = pthread_mutexattr_init(&a);
  if (!rc) rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (!rc) rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (!rc) rc = pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
  return rc;
}

static int lock_kind = -1; /* glibc's kind of such a lock, from one made here */
static pthread_once_t lock_kind_once = PTHREAD_ONCE_INIT;
static void lock_kind_init(void) {
#ifdef __GLIBC__
  pthread_mutex_t m;
  if (!lock_init(&m)) lock_kind = m.__data.__kind, pthread_mutex_destroy(&m);
#endif
}

/* Whether the segment's mutex is no longer of the kind its creator made:
 * glibc picks its locking path by the kind and asserts on what it finds
 * there, so a kind written over (another process's garbage) would abort
 * the member inside pthread_mutex_trylock. */
static int lock_damaged(const coord_shm *s) {
#ifdef __GLIBC__
  pthread_once(&lock_kind_once, lock_kind_init);
  return lock_kind >= 0 && s->lock.__data.__kind != lock_kind;
#else
  (void)s;
  return 0;
#endif
}

/* Locks the table within timeout_ms (0: one try); ENOTRECOVERABLE when its
 * kind was written over (lock_damaged), never calling glibc on it. A dead
 * holder leaves EOWNERDEAD: its update may be half done, so the table is made consistent
 * and recounted (every field of a slot is valid on its own; only the count
 * can be off). Polled with trylock rather than waited in timedlock: the
 * bound is on the monotonic clock, not the settable wall clock, and
 * ThreadSanitizer sees the lock taken on EOWNERDEAD only from trylock. The
 * lock is held for microseconds, so the pauses start short. */
int ff__coord_lock(coord_shm *s, int timeout_ms) {
  uint64_t deadline = ff__now_ns() + (uint64_t)timeout_ms * 1000000u;
  long pause_ns = 20000;
  int rc;
  while (!(rc = lock_damaged(s) ? ENOTRECOVERABLE : 0) && (rc = pthread_mutex_trylock(&s->lock)) == EBUSY) {
    if (ff__now_ns() >= deadline) return ETIMEDOUT;
    struct timespec ts = {0, pause_ns};
    nanosleep(&ts, NULL);
    if (pause_ns < 1000000L) pause_ns *= 2;
  }
  if (rc == EOWNERDEAD) {
    pthread_mutex_consistent(&s->lock);
    int members = 0;
    for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) {
      ff__coord_member *e = &s->slot[i];
      if (!e->pid) continue;
      members++;
      e->threads = clampi(e->threads, 0, member_cap(e));
    }
    s->members = members;
    rc = 0;
  }
  return rc;
}

/* A kind written over while the table was held is left alone too: glibc
 * would refuse it (EINVAL), and the next lock finds it and runs alone. */
void ff__coord_unlock(coord_shm *s) {
  if (!lock_damaged(s)) pthread_mutex_unlock(&s->lock);
}

/* shm_open that never blocks: /dev/shm is writable by every user, and a
 * FIFO left under a segment's name would hang an open for reading. */
int ff__coord_open_shm(const char *name, int flags, mode_t mode) {
  return shm_open(name, flags | O_NONBLOCK | O_NOCTTY, mode);
}

/* Writes to why what makes the object behind st no segment of this user's
 * (0: it is one): a FIFO, a device or another user's file under the name. */
int ff__coord_foreign(const struct stat *st, char *why, size_t cap) {
  if (!S_ISREG(st->st_mode)) {
    int device = S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode);
    snprintf(why, cap, "is %s", S_ISFIFO(st->st_mode) ? "a FIFO, not shared memory"
                                : device              ? "a device, not shared memory"
                                                      : "not a regular file");
    return 1;
  }
  if (st->st_uid != getuid() && st->st_uid != geteuid()) {
    snprintf(why, cap, "belongs to another user, uid %lu", (unsigned long)st->st_uid);
    return 1;
  }
  return 0;
}

/* Writes to why what makes segment s unusable (0: nothing). Under the
 * lock, except for the header, which never changes once it is ready. */
int ff__coord_header_damage(const coord_shm *s, char *why, size_t cap) {
  if (s->magic == COORD_MAGIC && s->version == COORD_VERSION && s->size_bytes == sizeof *s) return 0;
  snprintf(why, cap, "belongs to another fusionflow build (magic %08x, version %u, %llu bytes)", s->magic,
           s->version, (unsigned long long)s->size_bytes);
  return 1;
}

/* Every field the rebalancing reads, within the range a member writes:
 * anything else would be obeyed (a budget of 0 pins every member to its
 * minimum; a slot with a live pid, a heartbeat in the future and a huge
 * allotment is never reclaimed and takes the whole budget). */
int ff__coord_table_damage(const coord_shm *s, uint64_t now_ns, char *why, size_t cap) {
  enum { MAX_THREADS = 1 << 20, MAX_MS = 86400000 };
  const ff__coord_params *p = &s->params;
  const char *bad = NULL;
  if (ff__coord_header_damage(s, why, cap)) return 1;
  if (p->budget_threads < 1 || p->budget_threads > MAX_THREADS)
    bad = "budget_threads";
  else if (p->min_threads < 0 || p->min_threads > MAX_THREADS)
    bad = "min_threads";
  else if ((p->trainer_cores < 0 && p->trainer_cores != FF__COORD_TRAINER_AUTO) || p->trainer_cores > 4096)
    bad = "trainer_cores";
  else if (p->reserve.cores < 0 || p->reserve.cores >= (p->budget_threads > 1 ? p->budget_threads : 2) ||
           p->reserve.hold < 0 || p->reserve.hold > FF__COORD_RESERVE_HOLD || p->reserve.windows < 0 ||
           p->reserve.changes < 0 ||
           !(p->reserve.others_cores >= -p->budget_threads && p->reserve.others_cores <= p->budget_threads) ||
           !(p->reserve.others_last >= -p->budget_threads && p->reserve.others_last <= p->budget_threads) ||
           p->reserve.start_ns > now_ns + 1000000000u)
    bad = "the trainers' reserve";
  else if (p->expected_members < 1 || p->expected_members > FF__COORD_MAX_MEMBERS)
    bad = "expected_members";
  else if (!in01(p->stall_threshold) || !in01(p->ring_full) || !in01(p->idle_threshold))
    bad = "a threshold";
  else if (!(p->alpha > 0 && p->alpha <= 1))
    bad = "alpha";
  else if (p->heartbeat_timeout_ms < 1 || p->heartbeat_timeout_ms > MAX_MS || p->lock_timeout_ms < 1 ||
           p->lock_timeout_ms > MAX_MS || p->init_timeout_ms < 1 || p->init_timeout_ms > MAX_MS ||
           p->quiet_ms < 1 || p->quiet_ms > MAX_MS)
    bad = "a timeout";
  else if (s->members < 0 || s->members > FF__COORD_MAX_MEMBERS || s->closed > 1)
    bad = "the member count";
  if (bad) {
    snprintf(why, cap, "is damaged (%s out of range)", bad);
    return 1;
  }
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) {
    const ff__coord_member *e = &s->slot[i];
    if (!e->pid) continue;
    if (e->pid < 0 || e->max_threads < 1 || e->max_threads > MAX_THREADS || e->threads < 0 ||
        e->threads > e->max_threads || e->reports < 0 || e->burst < 0 || e->burst > e->max_threads ||
        (e->quiet != 0 && e->quiet != 1) || e->heartbeat_ns > now_ns + 1000000000u || !in01(e->stall_share) ||
        !in01(e->ring_fill) || !in01(e->busy_share) || !in01(e->stall_now) || !in01(e->fill_now) ||
        !(e->worker_cores >= 0 && e->worker_cores <= MAX_THREADS) ||
        (e->in_window != 0 && e->in_window != 1) || e->slack_reports < 0 ||
        !(e->live_cores >= 0 && e->live_cores <= e->max_threads) || e->live_at_ns > now_ns + 1000000000u ||
        e->live_span_ns > e->live_at_ns || e->running < 0 || e->running > e->max_threads ||
        !in01(e->busy_speed) || !in01(e->live_speed)) {
      snprintf(why, cap, "is damaged (slot %d out of range)", i);
      return 1;
    }
  }
  return 0;
}

/* Gives up on the damaged segment of c: from now on c runs alone on all its
 * threads. why says what is wrong, advice what to do about it. A joiner
 * gets the message in err (err not NULL); a member already in the group
 * hears of it on stderr, once per handle (its loader goes on without the
 * group, and nobody else would hear of it). */
ff_status ff__coord_go_alone(ff__coord *c, const char *why, const char *advice, ff__error *err) {
  c->alone = 1;
  c->threads = c->max_threads;
  c->spares = 0;
  if (!err) /* a joiner is told in err */
    fprintf(stderr, "fusionflow: node coordinator: /dev/shm%s %s (%s): this loader runs alone on its %d thread%s\n",
            c->name, why, advice, c->max_threads, c->max_threads == 1 ? "" : "s");
  return ff__error_set(err, FF_EIO, "node coordinator: /dev/shm%s %s (%s)", c->name, why, advice);
}

int ff__coord_segment_init(coord_shm *s, const ff__coord_params *p) {
  s->magic = COORD_MAGIC;
  s->version = COORD_VERSION;
  s->size_bytes = sizeof *s;
  s->params = *p;
  int rc = lock_init(&s->lock);
  if (!rc) atomic_store_explicit(&s->ready, 1u, memory_order_release);
  return rc;
}

/* Whether slot i's workers published that they are parked, as of now. */
static int32_t parked_now(coord_shm *s, int i) {
  return atomic_load_explicit(&s->workers_parked[i], memory_order_relaxed) != 0;
}

/* Slot i's published worker CPU and parked into its member (under the lock). */
void ff__coord_read_published(coord_shm *s, int i) {
  s->slot[i].cpu_now_ns = atomic_load_explicit(&s->worker_cpu_now[i], memory_order_relaxed);
  s->slot[i].parked = parked_now(s, i);
}

/* Clears what slot i's workers published (a slot taken or freed). */
static void clear_published(coord_shm *s, int i) {
  atomic_store_explicit(&s->worker_cpu_now[i], 0, memory_order_relaxed);
  atomic_store_explicit(&s->workers_parked[i], 0, memory_order_relaxed);
}

/* Frees slot i (under the lock), its published CPU with it. */
void ff__coord_free_slot(coord_shm *s, int i) {
  ff__coord_read_published(s, i);
  ff__coord_depart(&s->params, &s->slot[i]);
  memset(&s->slot[i], 0, sizeof s->slot[i]);
  clear_published(s, i);
}

/* Frees slots whose process is gone or that stayed silent too long (not
 * `self`), and recounts the members. Under the lock. */
void ff__coord_reclaim(coord_shm *s, int self, uint64_t pidns, uint64_t now_ns) {
  int members = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) {
    ff__coord_member *e = &s->slot[i];
    if (!e->pid) continue;
    if (i != self && ff__coord_member_gone(&s->params, e, pidns, now_ns)) {
      ff__coord_free_slot(s, i);
      continue;
    }
    members++;
  }
  s->members = members;
}

/* Takes a free slot for c with its first allotment: its target, as far as
 * the free pool allows, and at least its minimum. Under the lock; returns
 * the slot or -1 if the table is full. */
int ff__coord_take_slot(coord_shm *s, ff__coord *c, uint64_t now_ns) {
  int i = 0;
  while (i < FF__COORD_MAX_MEMBERS && s->slot[i].pid)
    i++;
  if (i == FF__COORD_MAX_MEMBERS) return -1;
  ff__coord_member *e = &s->slot[i];
  clear_published(s, i);
  *e = (ff__coord_member){.pid = (int32_t)c->pid,
                          .max_threads = c->max_threads,
                          .ticket = ++s->next_ticket,
                          .pidns = c->pidns,
                          .heartbeat_ns = now_ns};
  s->members++;
  ff__coord_mark_quiet(&s->params, s->slot, FF__COORD_MAX_MEMBERS, i, now_ns);
  ff__coord_targets(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  int pool = ff__coord_guaranteed_budget(&s->params, s->slot, FF__COORD_MAX_MEMBERS) -
             allotted(s->slot, FF__COORD_MAX_MEMBERS);
  ff__coord_params q = ff__coord_effective(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  e->threads = clampi(e->target < pool ? e->target : pool, member_min(&q, e), member_cap(e));
  c->slot = i;
  c->reserve_cores = ff__coord_reserved(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  c->ticket = e->ticket;
  c->threads = e->threads;
  c->spares = ff__coord_member_spares(c->max_threads, e->threads);
  return i;
}

int ff__coord_owns_slot(const ff__coord *c) {
  if (c->slot < 0 || c->slot >= FF__COORD_MAX_MEMBERS) return 0;
  const ff__coord_member *e = &c->shm->slot[c->slot];
  return e->pid == (int32_t)c->pid && e->ticket == c->ticket;
}

void ff__coord_detach(ff__coord *c) {
  if (c->shm) munmap(c->shm, sizeof *c->shm);
  c->shm = NULL;
}

ff_status ff__coord_peek(const char *group, ff__coord_member *out, int *n_out, ff__coord_params *params_out,
                         ff__error *err) {
  char name[COORD_NAME_CAP];
  if (ff__coord_shm_name(group, name, sizeof name) != FF_OK)
    return ff__error_set(err, FF_EINVAL, "node coordinator: group name must have 1..%d bytes", FF__COORD_GROUP_MAX - 1);
  int fd = ff__coord_open_shm(name, O_RDWR, 0); /* the lock is in the segment: taking it writes */
  if (fd < 0 && errno == ENOENT)
    return ff__error_set(err, FF_EEMPTY, "node coordinator: no group %s on this node (no /dev/shm%s)", group, name);
  if (fd < 0)
    return ff__error_set(err, FF_EIO, "node coordinator: cannot open /dev/shm%s: %s", name, strerror(errno));
  struct stat st;
  char why[128] = "";
  if (fstat(fd, &st) != 0)
    snprintf(why, sizeof why, "cannot be read (%s)", strerror(errno));
  else
    ff__coord_foreign(&st, why, sizeof why);
  if (*why) {
    close(fd);
    return ff__error_set(err, FF_EIO, "node coordinator: /dev/shm%s %s", name, why);
  }
  if ((size_t)st.st_size != sizeof(coord_shm)) {
    close(fd);
    return ff__error_set(err, FF_EIO, "node coordinator: %s belongs to another fusionflow build", name);
  }
  coord_shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s == MAP_FAILED)
    return ff__error_set(err, FF_EIO, "node coordinator: cannot map %s: %s", name, strerror(errno));
  ff_status st_out = FF_OK;
  if (!atomic_load_explicit(&s->ready, memory_order_acquire) || ff__coord_header_damage(s, why, sizeof why)) {
    st_out = ff__error_set(err, FF_EIO, "node coordinator: %s is not ready or belongs to another build", name);
  } else if (ff__coord_lock(s, s->params.lock_timeout_ms > 0 && s->params.lock_timeout_ms < 10000 ? s->params.lock_timeout_ms : 200)) {
    st_out = ff__error_set(err, FF_EIO, "node coordinator: %s stays locked", name);
  } else {
    if (ff__coord_table_damage(s, ff__now_ns(), why, sizeof why)) {
      st_out = ff__error_set(err, FF_EIO, "node coordinator: /dev/shm%s %s", name, why);
    } else {
      int n = 0;
      uint64_t now = ff__now_ns();
      for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
        if (s->slot[i].pid) {
          if (out) { /* parked and quiet as of now, not of the last report */
            out[n] = s->slot[i];
            out[n].parked = parked_now(s, i);
            out[n].quiet = ff__coord_is_quiet(&s->params, &out[n], now);
          }
          n++;
        }
      if (n_out) *n_out = n;
      if (params_out) *params_out = s->params;
    }
    ff__coord_unlock(s);
  }
  munmap(s, sizeof *s);
  return st_out;
}

void ff__coord_test_hold_lock(ff__coord *c) {
  if (c && c->shm) ff__coord_lock(c->shm, 1000);
}
