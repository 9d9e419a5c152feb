/* test_coord_faults.c — the node coordinator's shared segment attacked from
 * another process while its members run: garbage written over the table
 * (and over its lock), members stopped (SIGSTOP) at random moments, inside
 * their updates too, and killed there, and a segment under the group's name
 * that belongs to another user. Whatever happens, every member keeps
 * running: each report answers within its lock timeout (never a hang), with
 * a thread count in range; a member that can no longer trust the table runs
 * alone on its threads and says so in one line on stderr. The members are
 * forked processes that report in a loop and send back what they saw; a
 * watchdog fails the test instead of hanging the suite. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "sched/coord.h"
#include "sched/coord_segment.h"

#define MEMBERS 3
#define MAX_THREADS 4
#define LOCK_TIMEOUT_MS 100

static const ff__coord_report_data STALL = {0.5, 0.0, 1.0, 0, 0};

static char group[160], shm_name[FF__COORD_GROUP_MAX + 64];

static void new_group(const char *tag) {
  snprintf(group, sizeof group, "ut-fault-%s-%d-%llu", tag, (int)getpid(),
           (unsigned long long)(ff__now_ns() % 1000000007ull));
  assert_int_equal(ff__coord_shm_name(group, shm_name, sizeof shm_name), FF_OK);
}

static void on_watchdog(int sig) {
  (void)sig;
  static const char msg[] = "watchdog: a member or the test hung\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* What a member saw over its run. */
typedef struct seen {
  int joined;            /* its join succeeded */
  int reports;           /* reports made */
  int bad_threads;       /* answers outside 0..MAX_THREADS */
  uint64_t slowest_ns;   /* the longest report */
  int alone;             /* it ended running alone (ff__coord_group is "") */
  int lines;             /* lines it wrote on stderr */
  char first_line[512];
} seen;

typedef struct member {
  pid_t pid;
  int result;             /* read end of its result pipe */
  char err_path[600];     /* its stderr */
} member;

/* How the members run: their heartbeat timeout, and the pause between reports (0: none, so that a
 * good part of their time is spent inside an update, holding the lock). */
static int heartbeat_ms = 600000, pause_ms = 1;

static ff__coord_params member_params(void) {
  ff__coord_params p;
  ff__coord_params_init(&p);
  p.budget_threads = 8;
  p.expected_members = MEMBERS;
  p.trainer_cores = 0;
  p.lock_timeout_ms = LOCK_TIMEOUT_MS;
  p.heartbeat_timeout_ms = heartbeat_ms;
  return p;
}

/* A member: joins, then reports every pause_ms for run_ms, then writes what
 * it saw to fd. Its stderr is a file. */
static void member_main(int fd, const char *err_path, int run_ms) {
  if (!freopen(err_path, "w", stderr)) _exit(90);
  setvbuf(stderr, NULL, _IONBF, 0);
  seen s = {0};
  ff__coord_params p = member_params();
  ff__coord *c = NULL;
  ff__error err = {0};
  s.joined = ff__coord_join_params(group, MAX_THREADS, &p, &c, &err) == FF_OK;
  uint64_t end = ff__now_ns() + (uint64_t)run_ms * 1000000u;
  while (s.joined && ff__now_ns() < end) {
    int threads = -1;
    uint64_t t0 = ff__now_ns();
    if (ff__coord_report(c, &STALL, &threads) != FF_OK) _exit(91);
    uint64_t took = ff__now_ns() - t0;
    if (took > s.slowest_ns) s.slowest_ns = took;
    if (threads < 0 || threads > MAX_THREADS) s.bad_threads++;
    s.reports++;
    if (pause_ms) sleep_ms(pause_ms);
  }
  s.alone = s.joined && !*ff__coord_group(c);
  ff__coord_leave(c);
  if (write(fd, &s, sizeof s) != (ssize_t)sizeof s) _exit(92);
  _exit(0);
}

static void start_members(member *m, int n, int run_ms) {
  static char dir[512];
  if (!dir[0]) snprintf(dir, sizeof dir, "%s", ff_test_dir("coord-faults")); /* made fresh once */
  static int made;
  for (int i = 0; i < n; i++, made++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    snprintf(m[i].err_path, sizeof m[i].err_path, "%s/member-%d.err", dir, made);
    m[i].pid = fork();
    assert_true(m[i].pid >= 0);
    if (m[i].pid == 0) {
      close(fds[0]);
      member_main(fds[1], m[i].err_path, run_ms);
    }
    close(fds[1]);
    m[i].result = fds[0];
  }
}

/* Waits for member m, returns what it saw, its stderr's lines counted. */
static seen finish_member(member *m) {
  seen s = {0};
  int status = 0;
  assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
  int failed = !WIFEXITED(status) || WEXITSTATUS(status);
  if (!failed) assert_int_equal(read(m->result, &s, sizeof s), (ssize_t)sizeof s);
  close(m->result);
  FILE *f = fopen(m->err_path, "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    if (!s.lines++) snprintf(s.first_line, sizeof s.first_line, "%s", line);
    if (failed) fputs(line, stderr); /* what it said before it ended: a sanitizer's report, say */
  }
  if (f) fclose(f);
  if (failed) fail_msg("member %d ended with status %d", (int)m->pid, status);
  return s;
}

/* Every report answered within the lock timeout and a margin for a busy
 * machine, with a thread count in range. */
static void assert_never_hung(const seen *s) {
  if (getenv("FF_TEST_VERBOSE"))
    fprintf(stderr, "reports %d slowest %.3f s alone %d lines %d %s", s->reports, (double)s->slowest_ns * 1e-9,
            s->alone, s->lines, s->lines ? s->first_line : "\n");
  assert_true(s->joined);
  assert_true(s->reports > 10);
  assert_int_equal(s->bad_threads, 0);
  if (s->slowest_ns > (uint64_t)(LOCK_TIMEOUT_MS + 2000) * 1000000u)
    fail_msg("a report took %.3f s", (double)s->slowest_ns * 1e-9);
}

static ff__coord_segment *map_segment(void) {
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 500; tries++) /* the first member creates it */
    if ((fd = shm_open(shm_name, O_RDWR, 0)) < 0) sleep_ms(10);
  assert_true(fd >= 0);
  struct stat st;
  while (fstat(fd, &st) == 0 && st.st_size < (off_t)sizeof(ff__coord_segment)) sleep_ms(10);
  ff__coord_segment *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(g != MAP_FAILED);
  while (!atomic_load(&g->ready)) sleep_ms(10);
  return g;
}

enum { TABLE, LOCK, PHANTOM };

/* Another process writes random bytes over the segment for ms milliseconds:
 * over everything after the lock (TABLE), or over the lock alone (LOCK);
 * or (PHANTOM) it only leaves the lock held by a thread that does not
 * exist, as a holder stopped for good would (glibc's lock word is its
 * owner's thread id). */
static void vandalise(int what, int ms) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    ff__coord_segment *g = map_segment();
    unsigned char *bytes = (unsigned char *)g;
    size_t from = what == TABLE ? offsetof(ff__coord_segment, members) : offsetof(ff__coord_segment, lock);
    size_t to = what == TABLE ? sizeof *g : from + sizeof g->lock;
    uint32_t rng = (uint32_t)getpid();
    uint64_t end = ff__now_ns() + (uint64_t)ms * 1000000u;
    while (what != PHANTOM && ff__now_ns() < end) {
      for (int k = 0; k < 64; k++) {
        size_t at = from + ff_test_rand(&rng) % (to - from);
        bytes[at] = (unsigned char)ff_test_rand(&rng);
      }
      sleep_ms(1);
    }
    if (what == PHANTOM) {
      int phantom = 0x3ffffff0; /* no such thread: the lock is never given back */
      memcpy(&g->lock, &phantom, sizeof phantom);
    }
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Garbage over the table while the members report: each finds the damage at
 * a report, leaves with one line naming the segment, and runs alone on all
 * its threads; none waits past its lock timeout. */
static void garbage_over_the_table_sends_every_member_alone_with_one_line(void **state) {
  (void)state;
  signal(SIGALRM, on_watchdog);
  alarm(60);
  new_group("table");
  member m[MEMBERS];
  start_members(m, MEMBERS, 1500);
  sleep_ms(300); /* they joined and report */
  vandalise(TABLE, 500);
  for (int i = 0; i < MEMBERS; i++) {
    seen s = finish_member(&m[i]);
    assert_never_hung(&s);
    if (!s.alone || s.lines != 1 || !strstr(s.first_line, shm_name) || !strstr(s.first_line, "runs alone"))
      fail_msg("member %d: alone %d, %d line(s): %s", i, s.alone, s.lines, s.first_line);
  }
  alarm(0);
  shm_unlink(shm_name);
}

/* Garbage over the lock: glibc asserts on a mutex whose kind it does not
 * know (the members aborted in pthread_mutex_trylock), so each member checks
 * the kind first and runs alone, with one line. A lock left held by a
 * thread that does not exist is a lock nobody gives back: no report waits
 * past its lock timeout (the next ones only try it), and once it has been
 * held for the heartbeat timeout (half a second here) each member runs alone,
 * with one line (they kept their last allotment, in silence, for good). */
static void garbage_over_the_lock_never_hangs_or_crashes_a_member(void **state) {
  (void)state;
  static const struct {
    int what;
    const char *says;
  } cases[] = {{LOCK, "its lock written over"}, {PHANTOM, "stayed locked past the heartbeat timeout"}};
  signal(SIGALRM, on_watchdog);
  alarm(60);
  for (int k = 0; k < 2; k++) {
    new_group("lock");
    heartbeat_ms = 500;
    member m[MEMBERS];
    start_members(m, MEMBERS, 1500);
    heartbeat_ms = 600000;
    sleep_ms(300);
    vandalise(cases[k].what, 300);
    for (int i = 0; i < MEMBERS; i++) {
      seen s = finish_member(&m[i]);
      assert_never_hung(&s);
      if (!s.alone || s.lines != 1 || !strstr(s.first_line, shm_name) || !strstr(s.first_line, cases[k].says))
        fail_msg("%s, member %d: alone %d, %d line(s): %s", cases[k].says, i, s.alone, s.lines, s.first_line);
    }
    shm_unlink(shm_name);
  }
  alarm(0);
}

/* Members stopped (SIGSTOP) at random moments for 30 ms, many times: some
 * stops land inside an update, with the lock held. The others wait at most
 * their lock timeout for it, and once the stops end the group is whole:
 * nobody left it, nobody said a word. Then a member is killed (SIGKILL)
 * while stopped: the next locker recovers the table from EOWNERDEAD. */
static void members_stopped_inside_their_updates_never_hang_the_others(void **state) {
  (void)state;
  signal(SIGALRM, on_watchdog);
  alarm(60);
  new_group("stop");
  member m[MEMBERS];
  pause_ms = 0;
  start_members(m, MEMBERS, 2000);
  pause_ms = 1;
  sleep_ms(200);
  uint32_t rng = 7;
  for (int k = 0; k < 30; k++) {
    pid_t who = m[ff_test_rand(&rng) % (MEMBERS - 1)].pid; /* the last member is never stopped */
    kill(who, SIGSTOP);
    sleep_ms(30);
    kill(who, SIGCONT);
    sleep_ms((int)(ff_test_rand(&rng) % 20));
  }
  member last[1];
  start_members(last, 1, 1500); /* joins, then is killed stopped at a random moment */
  sleep_ms(200);
  for (int k = 0; k < 5; k++) {
    kill(last[0].pid, SIGSTOP);
    sleep_ms(5);
    kill(last[0].pid, SIGCONT);
  }
  kill(last[0].pid, SIGSTOP);
  kill(last[0].pid, SIGKILL);
  int status;
  assert_int_equal(waitpid(last[0].pid, &status, 0), last[0].pid);
  close(last[0].result);
  for (int i = 0; i < MEMBERS; i++) {
    seen s = finish_member(&m[i]);
    assert_never_hung(&s);
    if (s.alone || s.lines) fail_msg("member %d left the group or spoke: %s", i, s.first_line);
  }
  alarm(0);
  shm_unlink(shm_name);
}

/* A segment under the group's name that another user owns (/dev/shm is
 * everyone's): a loader asked to join the group runs alone on its threads,
 * its batches come, and it says why in one line. Needs a privileged run to
 * give the file away (skipped otherwise). */
static void a_segment_of_another_user_leaves_the_loader_alone_with_one_line(void **state) {
  (void)state;
  signal(SIGALRM, on_watchdog);
  alarm(60);
  new_group("owner");
  int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0666);
  assert_true(fd >= 0);
  int given = ftruncate(fd, sizeof(ff__coord_segment)) == 0 && fchown(fd, getuid() + 1, (gid_t)-1) == 0;
  close(fd);
  if (!given) {
    shm_unlink(shm_name);
    skip();
  }
  char root[512];
  snprintf(root, sizeof root, "%s", ff_test_dir("coord-faults-images"));
  ff_test_make_imagefolder(root, 2, 4, 16, 24, 3);
  char err_path[600];
  snprintf(err_path, sizeof err_path, "%s/loader.err", ff_test_dir("coord-faults-owner"));
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* a process of its own: the loader's stderr and environment */
    if (!freopen(err_path, "w", stderr)) _exit(90);
    setvbuf(stderr, NULL, _IONBF, 0); /* _exit flushes nothing */
    setenv("FF_NODE_GROUP", group, 1);
    ff_config c;
    ff_config_init(&c);
    c.source = root;
    c.pipeline = "decode | resize(size=(8, 8))";
    c.batch_size = 2, c.num_threads = 2;
    ff_loader *l = NULL;
    if (ff_loader_open(&c, &l) != FF_OK) _exit(91);
    ff_batch *b;
    int batches = 0;
    while (ff_loader_next(l, &b) == FF_OK) ff_batch_release(b), batches++;
    ff_stats s;
    ff_loader_stats(l, &s);
    int ok = batches == 4 && !*s.node_group && s.num_threads == 2;
    ff_loader_close(l);
    _exit(ok ? 0 : 92);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  size_t n;
  char *text = (char *)ff_test_read(err_path, &n);
  text = realloc(text, n + 1);
  text[n] = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status)) fail_msg("the loader's process ended with %d: %s", status, text);
  if (!strstr(text, "belongs to another user") || !strstr(text, "runs alone") || strchr(text, '\n') != text + n - 1)
    fail_msg("not one line saying why: '%s'", text);
  free(text);
  alarm(0);
  shm_unlink(shm_name);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(garbage_over_the_table_sends_every_member_alone_with_one_line),
      cmocka_unit_test(garbage_over_the_lock_never_hangs_or_crashes_a_member),
      cmocka_unit_test(members_stopped_inside_their_updates_never_hang_the_others),
      cmocka_unit_test(a_segment_of_another_user_leaves_the_loader_alone_with_one_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
