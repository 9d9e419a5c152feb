/* coord_lifetime.c — a node coordinator segment's life: the first joiner
 * creates it (O_CREAT|O_EXCL, sized, initialised, then marked ready), the
 * others open it and wait for ready, the last member to leave marks it
 * closed and unlinks it under its lock, and a join sweeps this user's
 * segments of groups whose members all died without leaving. A name is
 * only unlinked while it still names the segment that was judged. */
#include "sched/coord_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define COORD_ATTACH_TRIES 64
#define COORD_UNREADY_S 60 /* a segment its creator never made ready, older than this, is dead */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* Unlinks the name only while it still names segment `ino`: never a newer
 * segment that someone created meanwhile. */
void ff__coord_unlink_if_same(const char *name, ino_t ino) {
  int fd = ff__coord_open_shm(name, O_RDONLY, 0);
  if (fd < 0) return;
  struct stat st;
  int same = fstat(fd, &st) == 0 && st.st_ino == ino;
  close(fd);
  if (same) shm_unlink(name);
}

/* Whether the group of segment s is over for an outsider, under its lock:
 * it has no member, or each one's process is gone (kill(pid, 0) says ESRCH
 * within our pid namespace) or silent past COORD_ABANDONED_MS — and every
 * member stayed silent past the group's own heartbeat timeout, so that a
 * group whose member just died is left to its own next joiner, which
 * reinitialises it. A live member that is only silent (a stopped trainer)
 * keeps the segment for COORD_ABANDONED_MS (the bound also covers a dead
 * member's pid taken by another process, and other pid namespaces). */
static int abandoned(const coord_shm *s, uint64_t pidns, uint64_t now_ns) {
  uint64_t timeout_ns = (uint64_t)s->params.heartbeat_timeout_ms * 1000000u;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) {
    const ff__coord_member *e = &s->slot[i];
    if (!e->pid) continue;
    uint64_t silent = now_ns > e->heartbeat_ns ? now_ns - e->heartbeat_ns : 0;
    if (silent <= timeout_ns || !ff__coord_over(e, pidns, now_ns)) return 0;
  }
  return 1;
}

/* Removes the segment `name` of another group of this user if that group is
 * over: its last member died without leaving (kill -9, a crash, a killed
 * job), so nobody else would ever unlink it. Safe against a joiner of that
 * group: the decision is taken under the segment's lock, which is only
 * tried (a held lock means a live group), and the segment is marked closed
 * before its name is unlinked, so a joiner that still opened it starts
 * over, as after the last member's leave. An object left unsized or never
 * made ready by a creator that died is removed once it is older than
 * COORD_UNREADY_S; another build's segment (another size or header) is not
 * judged. */
static void sweep_one(const char *name, uint64_t pidns) {
  int fd = ff__coord_open_shm(name, O_RDWR, 0);
  if (fd < 0) return;
  struct stat st;
  char why[128];
  if (fstat(fd, &st) != 0 || ff__coord_foreign(&st, why, sizeof why) ||
      (st.st_size != 0 && (size_t)st.st_size != sizeof(coord_shm))) {
    close(fd);
    return;
  }
  int old = time(NULL) - st.st_ctime > COORD_UNREADY_S;
  coord_shm *s = st.st_size ? mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (s == MAP_FAILED) {
    if (!st.st_size && old) ff__coord_unlink_if_same(name, st.st_ino);
    return;
  }
  if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
    if (old) ff__coord_unlink_if_same(name, st.st_ino);
  } else if (!ff__coord_header_damage(s, why, sizeof why) && ff__coord_lock(s, 0) == 0) {
    uint64_t now = ff__now_ns();
    if (s->closed) { /* its last member died between closing and unlinking */
      ff__coord_unlink_if_same(name, st.st_ino);
    } else if (!ff__coord_table_damage(s, now, why, sizeof why) && (s->members || old) && abandoned(s, pidns, now)) {
      s->closed = 1;
      ff__coord_unlink_if_same(name, st.st_ino);
    }
    ff__coord_unlock(s);
  }
  munmap(s, sizeof *s);
}

/* Sweeps this user's other groups' segments (/dev/shm/fusionflow-<uid>-*)
 * for groups that are over (sweep_one): a join is the one moment a process
 * of the node looks, and a group whose last member died is otherwise left
 * in /dev/shm for good. */
void ff__coord_sweep_abandoned(const char *own, uint64_t pidns) {
  char prefix[64];
  int len = snprintf(prefix, sizeof prefix, "fusionflow-%lu-", (unsigned long)getuid());
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    char name[COORD_NAME_CAP];
    if (strncmp(de->d_name, prefix, (size_t)len) || strlen(de->d_name) + 2 > sizeof name) continue;
    snprintf(name, sizeof name, "/%s", de->d_name);
    if (strcmp(name, own)) sweep_one(name, pidns);
  }
  closedir(d);
}

/* Opens (or creates) the segment of c->name and takes a slot. */
ff_status ff__coord_attach(ff__coord *c, ff__error *err) {
  const ff__coord_params *p = &c->params;
  for (int attempt = 0; attempt < COORD_ATTACH_TRIES; attempt++) {
    if (attempt) sleep_ms(1);
    int fd = ff__coord_open_shm(c->name, O_RDWR | O_CREAT | O_EXCL, 0600), created = fd >= 0;
    if (!created) {
      if (errno != EEXIST)
        return ff__error_set(err, FF_EIO, "node coordinator: cannot create /dev/shm%s: %s", c->name,
                             strerror(errno));
      fd = ff__coord_open_shm(c->name, O_RDWR, 0);
      if (fd < 0 && errno == ENOENT) continue; /* the last member just unlinked it */
      if (fd < 0)
        return ff__error_set(err, FF_EIO, "node coordinator: cannot open /dev/shm%s: %s (set FF_NODE_GROUP to "
                             "another name)", c->name, strerror(errno));
    } else if (ftruncate(fd, sizeof(coord_shm)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(c->name);
      return ff__error_set(err, FF_EIO, "node coordinator: cannot size shared memory %s: %s", c->name,
                           strerror(e));
    }

    struct stat st = {0};
    char why[128];
    if (fstat(fd, &st) == 0 && ff__coord_foreign(&st, why, sizeof why)) {
      close(fd);
      return ff__coord_go_alone(c, why, "set FF_NODE_GROUP to another name", err);
    }
    uint64_t deadline = ff__now_ns() + (uint64_t)p->init_timeout_ms * 1000000u;
    while (fstat(fd, &st) == 0 && st.st_size == 0 && ff__now_ns() < deadline)
      sleep_ms(1);
    if (fstat(fd, &st) != 0) {
      int e = errno;
      close(fd);
      return ff__error_set(err, FF_EIO, "node coordinator: cannot stat %s: %s", c->name, strerror(e));
    }
    if (st.st_size == 0) { /* its creator died before sizing it */
      close(fd);
      ff__coord_unlink_if_same(c->name, st.st_ino);
      continue;
    }
    if ((size_t)st.st_size != sizeof(coord_shm)) {
      close(fd);
      snprintf(why, sizeof why, "belongs to another fusionflow build (%lld bytes)", (long long)st.st_size);
      return ff__coord_go_alone(c, why, COORD_REMOVE_IT, err);
    }
    coord_shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
      return ff__error_set(err, FF_EIO, "node coordinator: cannot map %s: %s", c->name, strerror(errno));
    c->shm = s;
    c->ino = st.st_ino;

    if (created) {
      int rc = ff__coord_segment_init(s, p);
      if (rc) {
        ff__coord_detach(c);
        shm_unlink(c->name);
        return ff__error_set(err, FF_EIO, "node coordinator: cannot make a shared mutex: %s", strerror(rc));
      }
    } else {
      while (!atomic_load_explicit(&s->ready, memory_order_acquire) && ff__now_ns() < deadline)
        sleep_ms(1);
      if (!atomic_load_explicit(&s->ready, memory_order_acquire)) { /* its creator died mid-way */
        ff__coord_detach(c);
        ff__coord_unlink_if_same(c->name, st.st_ino);
        continue;
      }
      if (ff__coord_header_damage(s, why, sizeof why)) {
        ff__coord_detach(c);
        return ff__coord_go_alone(c, why, COORD_REMOVE_IT, err);
      }
    }

    int rc = ff__coord_lock(s, p->init_timeout_ms);
    if (rc == ENOTRECOVERABLE) {
      ff__coord_detach(c);
      ff__coord_unlink_if_same(c->name, st.st_ino);
      continue;
    }
    if (rc) {
      ff__coord_detach(c);
      return ff__error_set(err, FF_EIO, "node coordinator: %s stays locked (%s)", c->name, strerror(rc));
    }
    if (s->closed) {
      /* Its last member left. It unlinks under this lock, so the name is
       * normally gone already; if it died in between, finish its job. */
      ff__coord_unlink_if_same(c->name, st.st_ino);
      ff__coord_unlock(s);
      ff__coord_detach(c);
      continue;
    }
    uint64_t now = ff__now_ns();
    if (ff__coord_table_damage(s, now, why, sizeof why)) {
      ff__coord_unlock(s);
      ff__coord_detach(c);
      return ff__coord_go_alone(c, why, COORD_REMOVE_IT, err);
    }
    ff__coord_reclaim(s, -1, c->pidns, now);
    if (!s->members) { /* new, or every member of a crashed run is dead: start afresh */
      memset(s->slot, 0, sizeof s->slot);
      s->params = *p;
    }
    if (ff__coord_take_slot(s, c, now) < 0) {
      ff__coord_unlock(s);
      ff__coord_detach(c);
      return ff__error_set(err, FF_EINVAL, "node coordinator: group %s is full (%d members)", c->group,
                           FF__COORD_MAX_MEMBERS);
    }
    ff__coord_unlock(s);
    return FF_OK;
  }
  return ff__error_set(err, FF_EIO, "node coordinator: could not open %s after %d attempts", c->name,
                       COORD_ATTACH_TRIES);
}
