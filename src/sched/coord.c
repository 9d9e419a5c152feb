/* coord.c — the node coordinator. When several training processes share a
 * node (one per GPU, as torchrun starts them), each runs its own loader, and
 * a fixed split of the cores leaves one loader stalling its GPU while another
 * idles. The members of a group meet in a POSIX shared memory segment,
 * "/fusionflow-<uid>-<group>" (ff__coord_shm_name; the group defaults to FF_NODE_GROUP, else the
 * torchrun job's TORCHELASTIC_RUN_ID or MASTER_PORT, so that the ranks of a
 * job find each other and tests can pick unique names). The segment holds a
 * node-wide thread budget (default: the node's online cores), a table of 64
 * member slots — pid, heartbeat, smoothed demand signals (stall share, ring
 * fill, busy share), fair share, target and allotment — and a
 * process-shared robust mutex: a member killed while holding it leaves
 * EOWNERDEAD to the next locker, which marks the mutex consistent and
 * recounts the table, so nobody is wedged; a member stopped while holding it
 * makes one report of each other member wait lock_timeout_ms, and their
 * later reports only try the lock, until they get it again (each of them
 * answers the previous allotment), so a stopped holder does not slow the
 * group batch after batch; a lock that stays held past the heartbeat
 * timeout (a holder stopped that long, a lock word written over) sends
 * each of them alone, as a damaged segment does. Every member checks the table each time it holds
 * the lock: a damaged segment (another build's header, a field out of its
 * range) is never obeyed — a joiner is refused and a member leaves the group
 * to run alone on all its threads, each with one line on stderr.
 * Each loader reports once per batch: under the lock its slot gets the new
 * observation and heartbeat, slots of dead members (kill(pid, 0) says ESRCH
 * within our pid namespace, or silent past the heartbeat timeout) are
 * reclaimed, the pure ff__coord_targets computes every member's target and
 * ff__coord_step moves only the reporter's allotment one thread toward its
 * target — shrinking only when the member itself hears it and growing only
 * from the free pool, so the threads actually running stay within the
 * budget. Members with slack lend to members that stall in proportion to
 * their stall; a former borrower keeps what it holds until it shows slack or
 * the lender needs it back (hysteresis), and every move is one thread per
 * report. Allotments are guarantees, not caps on the node: a core that no
 * member uses — a slack member's allotment (slack by its smoothed signals
 * or in its last two reports; it uses its cores now and then, and its
 * slack absorbs sharing them with the burst when it does), a quiet
 * member's whole allotment (silent past
 * quiet_ms and 4 of its batch intervals: its trainer stopped asking, or the
 * process is stopped), the budget nobody holds — goes at once to the
 * stalled members as a burst on top of their allotment (ff__coord_burst),
 * and so do the cores of a member whose workers, by the CPU they publish,
 * parked since its last report.
 * Without that a member with slack keeps a thread that idles while a
 * stalled peer is capped, and joining the group loses to the OS's own
 * sharing. A burst is recomputed at every report of its holder, so when a
 * lender (or a quiet member coming back) needs its cores, it has them at
 * once (its allotment never left it) and the borrower gives the burst back
 * at its next batch. The node's budget is the cores the process may use
 * (CPU affinity and the cgroup's cpu.max quota), or FF_NODE_THREADS; the
 * allotments and bursts share it less the trainers' reserve: the trainer's
 * own thread — a Python training loop, which launches the GPU's work — must
 * never wait for a loader's thread, so the threads the coordinator hands
 * out run at normal priority only on the cores the trainers leave. By
 * default (FF_NODE_TRAINER_CORES=auto) the reserve is adaptive: every
 * FF__COORD_WINDOW_MS or more, the reporting member measures the node's busy
 * CPU (the quota's cgroup, else the affinity's CPUs in /proc/stat, steal
 * left out) less the members' worker-thread CPU (each member's workers
 * publish its cumulative CPU beside its slot after every sample, without
 * the lock; members that left within the window keep theirs), the CPU of
 * everything else — trainers in the loaders' processes or in others —
 * and keeps that many cores, rounded with hysteresis
 * (ff__coord_reserve_decide), out of the allotments and bursts: a
 * CPU-bound trainer gets its core back within a few batches, and one that
 * leaves its core idle costs the loaders nothing. An integer N keeps N
 * cores per member for good instead. Every thread a member owns beyond them is a
 * spare that its loader created in SCHED_IDLE and never raises (an
 * unprivileged process cannot): the kernel runs spares only on cores no
 * normal-priority thread wants, at once, so a core a trainer or a peer
 * leaves idle is used without a round of reports, and a trainer that wakes
 * up takes its core back at once. A member runs its spares only while it
 * has no thread at normal priority (ff__coord_spares): a sample on a spare
 * waits for an idle core, and beside guaranteed threads it would hold back
 * the batch they could have finished. The
 * segment's lifetime: the first joiner creates it
 * (O_CREAT|O_EXCL, ftruncate, init, then an atomic "ready" flag others wait
 * for, bounded); the last member to leave marks it closed and unlinks it
 * while holding its lock, so a joiner that still opened the old one sees
 * "closed" and starts over; a segment whose members all died is
 * reinitialised by the next joiner; one whose creator died before "ready"
 * is unlinked after init_timeout_ms and created anew. A group whose last
 * member died without leaving would never be joined again under its name
 * (bench runs, tests and jobs pick fresh names), so every join also sweeps
 * this user's other segments and removes those of groups that are over
 * (sweep_one: by the same closed-then-unlink protocol, under their lock). */
#include "sched/coord.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define COORD_MAGIC 0x46464344u /* "FFCD" */
#define COORD_VERSION 11u /* 11: min_threads as asked; the rebalancing drops it where the reserve leaves none */
#define COORD_NAME_CAP (FF__COORD_GROUP_MAX + 64)
#define COORD_ATTACH_TRIES 64
#define COORD_SIGNAL_NS 1e8 /* the interval a report of weight alpha stands for */
#define COORD_ABANDONED_MS 600000ull /* silent this long, a member is gone to other groups */
#define COORD_UNREADY_S 60           /* a segment its creator never made ready, older than this, is dead */

typedef ff__coord_segment coord_shm;

struct ff__coord {
  coord_shm *shm;
  int stuck; /* the last report timed out on the lock: only try it until it is had again */
  uint64_t stuck_since_ns; /* when the reports began to find it held (stuck) */
  int alone; /* left a damaged segment: runs on all its threads from now on */
  ino_t ino; /* identifies the segment behind the name */
  pid_t pid;
  int slot;
  uint64_t ticket;
  uint64_t pidns;
  int max_threads;
  int threads;
  int spares;
  int reserve_cores; /* ff__coord_reserved as of the last join or report */
  pthread_mutex_t pub_mu;     /* held by a report or the leave (they may remap shm or move slot) and by
                                 ff__coord_publish_cpu, which only tries it */
  ff__coord_busy_source busy; /* where the adaptive reserve reads the node's busy CPU */
  ff__coord_params params; /* this member's wishes, used when it (re)initialises a segment */
  char name[COORD_NAME_CAP];
  char group[FF__COORD_GROUP_MAX]; /* the group's name as the member gave it (auto resolved) */
};

/* ---- parameters ---- */

int ff__coord_cpu_max_cores(const char *text) {
  char *end;
  errno = 0;
  long long quota = strtoll(text, &end, 10);
  if (end == text || errno || quota <= 0 || *end != ' ') return 0; /* "max", or not a quota */
  const char *q = end + 1;
  long long period = strtoll(q, &end, 10);
  if (end == q || errno || period <= 0 || (*end && *end != '\n')) return 0;
  long long cores = (quota + period - 1) / period;
  return cores > 4096 ? 4096 : (int)cores;
}

int ff__coord_cgroup_quota(const char *proc_cgroup, const char *root, char *dir_out, size_t cap) {
  char line[4096], path[4200];
  FILE *f = fopen(proc_cgroup, "r");
  if (!f) return 0;
  int found = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) { /* the v2 hierarchy's entry */
      found = 1;
      break;
    }
  fclose(f);
  if (!found) return 0;
  line[strcspn(line, "\n")] = 0;
  char *dir = line + 3;
  int best = 0;
  for (;;) {
    snprintf(path, sizeof path, "%s%s/cpu.max", root, dir);
    char text[128];
    FILE *m = fopen(path, "r");
    if (m) {
      if (fgets(text, sizeof text, m)) {
        int n = ff__coord_cpu_max_cores(text);
        if (n > 0 && (!best || n < best)) {
          best = n;
          if (dir_out) snprintf(dir_out, cap, "%s%s", root, dir);
        }
      }
      fclose(m);
    }
    char *slash = strrchr(dir, '/');
    if (!slash || (slash == dir && !dir[1])) break;
    if (slash == dir)
      dir[1] = 0; /* the root: "/" */
    else
      *slash = 0;
  }
  return best;
}

/* The tightest quota of this process's cgroup and its parents. */
static int cgroup_cores(char *dir_out, size_t cap) {
  return ff__coord_cgroup_quota("/proc/self/cgroup", "/sys/fs/cgroup", dir_out, cap);
}

static int affinity_cores(void) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 ? (int)(online > 4096 ? 4096 : online) : 1;
  }
  return n;
}

int ff__coord_node_cores(void) {
  int n = affinity_cores(), quota = cgroup_cores(NULL, 0);
  return quota > 0 && quota < n ? quota : n;
}

void ff__coord_busy_source_init(ff__coord_busy_source *src) {
  char dir[4200];
  int quota = cgroup_cores(dir, sizeof dir);
  src->cpu_stat[0] = 0;
  if (quota > 0 && quota < affinity_cores()) snprintf(src->cpu_stat, sizeof src->cpu_stat, "%s/cpu.stat", dir);
}

int ff__coord_proc_stat_busy_ns(const char *path, uint64_t *out) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[512];
  long hz = sysconf(_SC_CLK_TCK);
  unsigned long long ticks = 0;
  int cpus = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned cpu;
    unsigned long long v[7] = {0}; /* user nice system idle iowait irq softirq */
    /* per-CPU lines only: %u would read the total line's "cpu  <user ticks>" as a CPU number */
    if (strncmp(line, "cpu", 3) || !isdigit((unsigned char)line[3]) ||
        sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6]) < 8 ||
        cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set))
      continue;
    ticks += v[0] + v[1] + v[2] + v[5] + v[6];
    cpus++;
  }
  fclose(f);
  if (!cpus || hz <= 0) return -1;
  *out = (uint64_t)(ticks * (1000000000ull / (unsigned long long)hz));
  return 0;
}

/* The busy CPU of the cgroup whose quota makes the budget (cpu.stat
 * usage_usec), or of the affinity's CPUs in /proc/stat: the measurement of
 * the adaptive reserve, the one place it reads the system. */
int ff__coord_node_busy_ns(const ff__coord_busy_source *src, uint64_t *out) {
  if (src->cpu_stat[0]) {
    char line[512];
    FILE *f = fopen(src->cpu_stat, "r");
    unsigned long long usec = 0;
    int found = 0;
    if (f) {
      while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "usage_usec %llu", &usec) == 1;
      fclose(f);
    }
    if (found) {
      *out = (uint64_t)usec * 1000u;
      return 0;
    }
  }
  return ff__coord_proc_stat_busy_ns("/proc/stat", out);
}

void ff__coord_params_init(ff__coord_params *p) {
  *p = (ff__coord_params){
      .budget_threads = ff__coord_node_cores(),
      .min_threads = 1,
      .trainer_cores = FF__COORD_TRAINER_AUTO,
      .expected_members = 1,
      .stall_threshold = 0.05,
      .ring_full = 0.75,
      .idle_threshold = 0.25,
      .alpha = 0.25,
      .heartbeat_timeout_ms = 5000,
      .lock_timeout_ms = 200,
      .init_timeout_ms = 1000,
      .quiet_ms = 50,
  };
}

static double clamp01(double x) { return x > 0 ? (x < 1 ? x : 1) : 0; } /* NaN -> 0 */

void ff__coord_params_normalise(ff__coord_params *p) {
  ff__coord_params d;
  ff__coord_params_init(&d);
  if (p->budget_threads < 1) p->budget_threads = d.budget_threads;
  if (p->min_threads < 0) p->min_threads = 0;
  if (p->trainer_cores < 0) p->trainer_cores = FF__COORD_TRAINER_AUTO;
  p->reserve = (ff__coord_reserve){0}; /* measured by the group, never set */
  if (p->trainer_cores > 4096) p->trainer_cores = 4096;
  if (p->expected_members < 1) p->expected_members = 1;
  if (p->expected_members > FF__COORD_MAX_MEMBERS) p->expected_members = FF__COORD_MAX_MEMBERS;
  p->stall_threshold = clamp01(p->stall_threshold);
  p->ring_full = clamp01(p->ring_full);
  p->idle_threshold = p->idle_threshold > 0 ? (p->idle_threshold < 0.95 ? p->idle_threshold : 0.95) : 0;
  if (!(p->alpha > 0 && p->alpha <= 1)) p->alpha = d.alpha;
  if (p->heartbeat_timeout_ms < 1) p->heartbeat_timeout_ms = d.heartbeat_timeout_ms;
  if (p->lock_timeout_ms < 1) p->lock_timeout_ms = d.lock_timeout_ms;
  if (p->init_timeout_ms < 1) p->init_timeout_ms = d.init_timeout_ms;
  if (p->quiet_ms < 1) p->quiet_ms = d.quiet_ms;
}

/* ---- the pure rebalancing ---- */

static int member_cap(const ff__coord_member *m) { return m->max_threads > 1 ? m->max_threads : 1; }

static int member_min(const ff__coord_params *p, const ff__coord_member *m) {
  int mn = p->min_threads > 0 ? p->min_threads : 0;
  return mn < member_cap(m) ? mn : member_cap(m);
}

static int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

/* The threads allotted to the live members of the table. */
static int allotted(const ff__coord_member *m, int n) {
  int sum = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) sum += m[i].threads;
  return sum;
}

/* max(members, expected_members): what the fair shares divide by. */
static int member_shares(const ff__coord_params *p, const ff__coord_member *m, int n) {
  int live = 0;
  for (int i = 0; i < n; i++)
    live += m[i].pid != 0;
  return live > p->expected_members ? live : p->expected_members;
}

int ff__coord_reserved(const ff__coord_params *p, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  if (p->trainer_cores == FF__COORD_TRAINER_AUTO) return p->reserve.cores > 0 ? p->reserve.cores : 0;
  long long fixed = (long long)(p->trainer_cores > 0 ? p->trainer_cores : 0) * member_shares(p, m, n);
  return fixed < INT32_MAX ? (int)fixed : INT32_MAX;
}

/* Whether the adaptive reserve leaves less than min_threads (at least one)
 * per share. */
static int reserve_starves(const ff__coord_params *p, const ff__coord_member *m, int n) {
  long long each = p->min_threads > 1 ? p->min_threads : 1;
  return p->trainer_cores == FF__COORD_TRAINER_AUTO && p->reserve.cores > 0 &&
         (long long)p->budget_threads - p->reserve.cores < each * member_shares(p, m, n);
}

/* The parameters the rebalancing runs by: those of the segment, with no
 * minimum while the trainers' cores leave less than min_threads per share
 * (the loaders run on spares; a fixed reserve counts the members live now,
 * who may outnumber the expected ones). Without a reserve the minimum stays,
 * even where the members outnumber the budget: a loader with no
 * normal-priority thread beside hungry peers would get nothing from its
 * SCHED_IDLE spares. */
static ff__coord_params effective(const ff__coord_params *p, const ff__coord_member *m, int n) {
  ff__coord_params q = *p;
  if (reserve_starves(p, m, n) ||
      (p->trainer_cores > 0 && (long long)p->budget_threads - ff__coord_reserved(p, m, n) <
                                   (long long)p->min_threads * member_shares(p, m, n)))
    q.min_threads = 0;
  return q;
}

int ff__coord_guaranteed_budget(const ff__coord_params *p, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  /* Too little for a thread each: every member runs on its spares, which
   * share the cores the trainers leave fairly (a thread to some members
   * and none to the others would starve those behind the trainers). */
  if (reserve_starves(p, m, n)) return 0;
  ff__coord_params q = effective(p, m, n);
  int mins = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) mins += member_min(&q, &m[i]);
  long long left = (long long)q.budget_threads - ff__coord_reserved(&q, m, n);
  int budget = left > 0 ? (int)left : 0;
  return budget > mins ? budget : mins;
}

/* Splits `amount` among n entries in proportion to w (entries with w <= 0
 * take nothing), out[i] <= cap[i]; hands out min(amount, what the caps of
 * the entries admit). Entries that the proportion would overfill are capped
 * and the rest re-split; integer parts by largest remainder, ties to the
 * lower index, so the split is deterministic. Returns the total handed out. */
static int split(int amount, const double *w, const int *cap, int *out, int n) {
  unsigned char done[FF__COORD_MAX_MEMBERS];
  double x[FF__COORD_MAX_MEMBERS];
  int given = 0;
  for (int i = 0; i < n; i++) {
    out[i] = 0;
    done[i] = !(w[i] > 0) || cap[i] <= 0;
  }
  while (given < amount) {
    double wsum = 0;
    for (int i = 0; i < n; i++)
      if (!done[i]) wsum += w[i];
    if (wsum <= 0) break;
    int rem = amount - given, saturated = 0;
    for (int i = 0; i < n; i++) {
      if (done[i]) continue;
      x[i] = rem * (w[i] / wsum);
      if (x[i] >= cap[i] - out[i]) { /* the exact shares sum to rem: capping never overspends */
        given += cap[i] - out[i];
        out[i] = cap[i];
        done[i] = 1;
        saturated = 1;
      }
    }
    if (saturated) continue;
    for (int i = 0; i < n; i++) {
      if (done[i]) continue;
      int whole = (int)floor(x[i]);
      out[i] += whole;
      given += whole;
      x[i] -= whole;
    }
    while (given < amount) {
      int best = -1;
      for (int i = 0; i < n; i++)
        if (!done[i] && x[i] >= 0 && (best < 0 || x[i] > x[best])) best = i;
      if (best < 0) break;
      x[best] = -1; /* at most one extra each: x < room, so floor(x) + 1 <= room */
      out[best]++;
      given++;
    }
    break;
  }
  return given;
}

enum { NEUTRAL, STALLED, SLACK };
enum { SLACK_REPORTS = 2 }; /* reports in a row that had slack: see burst_class */

/* Whether signals (smoothed, or one report's) say a member has slack: its
 * trainer does not wait, its ring is full and its workers idle. */
static int has_slack(const ff__coord_params *p, double stall, double fill, double busy) {
  return stall <= p->stall_threshold && fill >= p->ring_full && 1.0 - busy > p->idle_threshold;
}

/* Whether each of a member's last SLACK_REPORTS reports had slack. */
static int slack_lately(const ff__coord_member *e) { return e->slack_reports >= SLACK_REPORTS; }

static int member_class(const ff__coord_params *p, const ff__coord_member *e) {
  if (e->quiet) return SLACK;
  if (e->reports > 0 && e->stall_share > p->stall_threshold) return STALLED;
  if (e->reports > 0 && has_slack(p, e->stall_share, e->ring_fill, e->busy_share)) return SLACK;
  return NEUTRAL;
}

/* The spares a member with max_threads `cap` runs beside `running` threads
 * at normal priority: all of its threads when it runs none at normal
 * priority, else none. A sample on a spare waits for a core no
 * normal-priority thread wants: beside guaranteed threads it would hold
 * back a batch they could have finished (measured: with spares also for
 * stalled members, a slow trainer beside busy ungrouped peers lost up to a
 * quarter of its rate), so a member with an allotment grows through bursts
 * only. */
int ff__coord_member_spares(int cap, int running) { return running == 0 ? cap : 0; }

void ff__coord_targets(const ff__coord_params *params, ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = effective(params, m, n), *p = &q;
  int live[FF__COORD_MAX_MEMBERS], k = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) live[k++] = i;
  if (!k) return;

  int budget = ff__coord_guaranteed_budget(p, m, n);
  int shares = k > p->expected_members ? k : p->expected_members;
  int base = budget / shares, extra = budget % shares, fair_sum = 0;
  /* The remainder goes to `extra` members in turn, one place further each
   * window of the adaptive reserve: for good to the lowest slots, it would
   * leave one hungry member a thread short of its peers for the whole run. */
  int turn = p->reserve.windows % shares;
  for (int j = 0; j < k; j++) {
    ff__coord_member *e = &m[live[j]];
    e->fair = clampi(base + ((j - turn + shares) % shares < extra), member_min(p, e), member_cap(e));
    fair_sum += e->fair;
  }
  int free_threads = budget > fair_sum ? budget - fair_sum : 0;

  int cls[FF__COORD_MAX_MEMBERS] = {0}, spare[FF__COORD_MAX_MEMBERS] = {0}, want[FF__COORD_MAX_MEMBERS] = {0};
  int hold[FF__COORD_MAX_MEMBERS] = {0}, hold_grant[FF__COORD_MAX_MEMBERS], grant[FF__COORD_MAX_MEMBERS];
  int lend[FF__COORD_MAX_MEMBERS];
  double w_stall[FF__COORD_MAX_MEMBERS] = {0}, w_hold[FF__COORD_MAX_MEMBERS] = {0};
  double w_spare[FF__COORD_MAX_MEMBERS] = {0};
  int supply = free_threads, hold_sum = 0;
  for (int j = 0; j < k; j++) {
    const ff__coord_member *e = &m[live[j]];
    int mn = member_min(p, e);
    cls[j] = member_class(p, e);
    /* one whose last reports had slack asks for no more, though its smoothed stall share says so */
    if (cls[j] == STALLED && slack_lately(e)) cls[j] = NEUTRAL;
    if (cls[j] == STALLED) {
      want[j] = member_cap(e) - e->fair;
    } else if (cls[j] == SLACK) {
      /* Keep the threads that would run at most 1 - idle_threshold busy
       * (a quiet member runs none). */
      double work = e->quiet ? 0 : (e->threads > 0 ? e->threads : e->fair) * e->busy_share;
      int keep = (int)ceil(work / (1.0 - p->idle_threshold) - 1e-9);
      keep = clampi(keep, mn, e->fair);
      spare[j] = e->fair - keep;
      supply += spare[j];
    } else {
      int held = (e->threads < member_cap(e) ? e->threads : member_cap(e)) - e->fair;
      hold[j] = held > 0 ? held : 0;
      hold_sum += hold[j];
    }
    w_stall[j] = cls[j] == STALLED ? e->stall_share : 0;
    w_hold[j] = hold[j];
    w_spare[j] = spare[j];
  }

  /* Former borrowers keep what they hold first, then the stalled share the rest. */
  int held = split(supply < hold_sum ? supply : hold_sum, w_hold, hold, hold_grant, k);
  int granted = split(supply - held, w_stall, want, grant, k);
  int from_lenders = held + granted - free_threads;
  split(from_lenders > 0 ? from_lenders : 0, w_spare, spare, lend, k);

  for (int j = 0; j < k; j++) {
    ff__coord_member *e = &m[live[j]];
    e->target = e->fair + hold_grant[j] + grant[j] - lend[j];
  }
}

int ff__coord_step(const ff__coord_params *params, ff__coord_member *m, int n, int self) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = effective(params, m, n), *p = &q;
  ff__coord_member *me = &m[self];
  int budget = ff__coord_guaranteed_budget(p, m, n), sum = allotted(m, n);
  int t = me->threads;
  if (t > me->target) {
    /* One thread at a time, unless the table is overcommitted (a member
     * joined into an empty pool): then give back the excess at once. */
    int down = sum - budget > 1 ? sum - budget : 1;
    t = t - down > me->target ? t - down : me->target;
  } else if (t < me->target && sum < budget) {
    t++;
  }
  me->threads = clampi(t, member_min(p, me), member_cap(me));
  return me->threads;
}

/* A member's class for the bursts: member_class, but one whose last
 * SLACK_REPORTS reports each had slack has it now, though its smoothed
 * signals take a second or more to say so. One report is not enough: a
 * trainer that waits now and then reads slack between its waits. */
static int burst_class(const ff__coord_params *p, const ff__coord_member *e) {
  return slack_lately(e) ? SLACK : member_class(p, e);
}

double ff__coord_speed(const ff__coord_params *params, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = effective(params, m, n), *p = &q;
  double demand = p->trainer_cores != FF__COORD_TRAINER_AUTO ? ff__coord_reserved(p, m, n)
                  : p->reserve.others_cores > 0              ? p->reserve.others_cores
                                                             : 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid && burst_class(p, &m[i]) != SLACK)
      demand += m[i].running > 0 ? m[i].running : m[i].threads + m[i].burst;
  return demand > p->budget_threads ? p->budget_threads / demand : 1;
}

void ff__coord_burst(const ff__coord_params *params, ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = effective(params, m, n), *p = &q;
  int live[FF__COORD_MAX_MEMBERS], cls[FF__COORD_MAX_MEMBERS], k = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) live[k++] = i;
  if (!k) return;
  int room[FF__COORD_MAX_MEMBERS], held[FF__COORD_MAX_MEMBERS], hold_out[FF__COORD_MAX_MEMBERS];
  int grant[FF__COORD_MAX_MEMBERS];
  double w_hold[FF__COORD_MAX_MEMBERS], w_stall[FF__COORD_MAX_MEMBERS];
  double used = 0, left_idle = 0; /* left_idle: the cores neutral members' workers leave */
  int held_sum = 0;
  for (int j = 0; j < k; j++)
    cls[j] = burst_class(p, &m[live[j]]);
  for (int j = 0; j < k; j++) {
    const ff__coord_member *e = &m[live[j]];
    int threads = clampi(e->threads, 0, member_cap(e));
    double with_burst = threads + (e->burst > 0 ? e->burst : 0);
    /* what its workers did since its last report, where that is known: a
     * member whose ring filled up parks its workers at once, but its
     * reports say so only a batch or two later */
    int now_known = e->live_span_ns > 0 && e->live_at_ns - e->live_span_ns >= e->heartbeat_ns;
    /* what its workers would use alone: the measure over the speed when it was taken (one taken under
     * a burst that has ended since reads low, and read as idle cores it would call the next burst);
     * a neutral member whose trainer does not wait now has all it needs: what its workers use is its
     * demand, the sharing slows it without raising it */
    double then = now_known ? e->live_speed : e->busy_speed;
    /* so is one whose smoothed stall share still says it stalls, while its trainer took its last batch
     * without waiting from a full ring (at a change of demand: its workers refill the ring and park) */
    int ahead = e->stall_now <= p->stall_threshold &&
                (cls[j] == NEUTRAL || (cls[j] == STALLED && e->fill_now >= p->ring_full));
    double share = ahead ? 1 : then > 0 ? then : 1;
    double busy = e->parked ? 0 /* its workers wait for work: none of its cores is used now */
                  : now_known ? e->live_cores / share
                  : e->reports > 0
                      ? with_burst * e->busy_share / share
                      : threads; /* (a quiet member has slack) before its first report: all of it */
    if (cls[j] != SLACK) used += busy < threads ? busy : threads;
    if ((cls[j] == NEUTRAL || ahead) && busy < threads) left_idle += threads - busy;
    /* one whose threads wait for work now needs no more of them (compared with what it runs: a
     * burst written by another's report starts at its own next one) */
    int idles = e->parked ||
                (now_known && busy < (e->running > 0 ? e->running : with_burst) * (1.0 - p->idle_threshold));
    room[j] = cls[j] == SLACK || idles ? 0 : member_cap(e) - threads;
    held[j] = cls[j] == NEUTRAL && e->burst > 0 ? (e->burst < room[j] ? e->burst : room[j]) : 0;
    held_sum += held[j];
    w_hold[j] = held[j];
    /* its trainer waits now, or it holds a burst and found no batch ready (a hungry trainer
     * whose batch was nearly done keeps its burst) */
    int waits = e->stall_now > p->stall_threshold || (e->burst > 0 && e->fill_now == 0);
    w_stall[j] = cls[j] == STALLED && waits ? e->stall_share : 0;
  }
  double idle = ff__coord_guaranteed_budget(p, m, n) - used;
  int pool = idle > 0 ? (int)floor(idle + 0.5) : 0;
  int kept = split(pool < held_sum ? pool : held_sum, w_hold, held, hold_out, k);
  int waiting = 0;
  for (int j = 0; j < k; j++) {
    room[j] -= hold_out[j];
    waiting += w_stall[j] > 0 && room[j] > 0;
  }
  /* each a thread, which the OS lets run in the idle moments; not where cores are kept for the trainers,
   * whose threads it would share them with */
  if (left_idle > 0 && pool - kept < waiting && ff__coord_reserved(p, m, n) == 0)
    for (int j = 0; j < k; j++)
      grant[j] = w_stall[j] > 0 && room[j] > 0;
  else
    split(pool - kept, w_stall, room, grant, k);
  for (int j = 0; j < k; j++)
    m[live[j]].burst = hold_out[j] + grant[j];
}

/* Starts member e's live span at now_ns (its published CPU as of now). */
static void live_restart(ff__coord_member *e, uint64_t now_ns) {
  e->live_cpu_ns = e->cpu_now_ns, e->live_at_ns = now_ns, e->live_span_ns = 0;
}

void ff__coord_live(const ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  double speed = ff__coord_speed(p, m, n);
  for (int i = 0; i < n; i++) {
    ff__coord_member *e = &m[i];
    if (!e->pid || !e->cpu_now_ns) continue;
    if (!e->live_at_ns || now_ns < e->live_at_ns || e->cpu_now_ns < e->live_cpu_ns) {
      live_restart(e, now_ns);
      continue;
    }
    /* before it reports a sample its mean is unknown: FF__COORD_LIVE_MS alone */
    uint64_t span = now_ns - e->live_at_ns;
    uint64_t sample_ns = e->worker_samples ? e->worker_cpu_ns / e->worker_samples : 0;
    if (span < FF__COORD_LIVE_MS * 1000000ull || span / FF__COORD_LIVE_SAMPLES < sample_ns) continue;
    /* a sample published is counted whole when it ends: a span can read
     * more cores than the member has */
    double cores = (double)(e->cpu_now_ns - e->live_cpu_ns) / (double)span;
    e->live_cores = cores < member_cap(e) ? cores : member_cap(e);
    e->live_speed = speed;
    e->live_span_ns = span, e->live_cpu_ns = e->cpu_now_ns, e->live_at_ns = now_ns;
  }
}

void ff__coord_observe(const ff__coord_params *p, ff__coord_member *m, const ff__coord_report_data *r) {
  double stall = clamp01(r->stall_share), fill = clamp01(r->ring_fill), busy = clamp01(r->busy_share);
  double a = p->alpha > 0 && p->alpha <= 1 ? p->alpha : 1;
  m->stall_now = stall, m->fill_now = fill;
  m->slack_reports = !has_slack(p, stall, fill, busy) ? 0
                     : m->slack_reports < INT32_MAX   ? m->slack_reports + 1
                                                      : INT32_MAX;
  if (m->reports <= 0) {
    m->stall_share = stall;
    m->ring_fill = fill;
    m->busy_share = busy;
  } else {
    m->stall_share += a * (stall - m->stall_share);
    m->ring_fill += a * (fill - m->ring_fill);
    m->busy_share += a * (busy - m->busy_share);
  }
  if (m->reports < INT32_MAX) m->reports++;
}

/* ---- names and environment ---- */

int ff__coord_torchrun_group(char *buf, size_t cap) {
  const char *g;
  int n = -1;
  if ((g = getenv("TORCHELASTIC_RUN_ID")) && *g)
    n = snprintf(buf, cap, "torchelastic-%s", g);
  else if ((g = getenv("MASTER_PORT")) && *g)
    n = snprintf(buf, cap, "port-%s", g);
  return n > 0 && (size_t)n < cap;
}

int ff__coord_group_off(const char *value) { return !value || !*value || !strcasecmp(value, "off"); }

int ff__coord_group_auto(const char *value) { return value && !strcasecmp(value, "auto"); }

int ff__coord_default_group(char *buf, size_t cap) {
  const char *g = getenv("FF_NODE_GROUP");
  if (!g || !*g || ff__coord_group_auto(g)) return ff__coord_torchrun_group(buf, cap);
  int n = snprintf(buf, cap, "%s", g);
  return n > 0 && (size_t)n < cap;
}

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

static int env_int(const char *name, int lo, int hi) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long v = strtol(s, &end, 10);
  return *end || v < lo || v > hi ? 0 : (int)v;
}

/* An explicit setting of the join: *v gets FF_NODE_... in lo..hi (digits
 * only, no white space), or `word` (when not NULL, in any case) gets
 * word_value; unset or empty leaves *v. Returns FF_OK, or FF_EINVAL naming
 * the variable. */
static ff_status env_setting(const char *name, int lo, int hi, const char *word, int word_value, int *v,
                             ff__error *err) {
  const char *s = getenv(name);
  if (!s || !*s) return FF_OK;
  if (word && !strcasecmp(s, word)) {
    *v = word_value;
    return FF_OK;
  }
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (*end || !isdigit((unsigned char)*s) || errno || x < lo || x > hi)
    return ff__error_set(err, FF_EINVAL, "node coordinator: %s='%s' is not %s%s%san integer in %d..%d", name, s,
                         word ? "\"" : "", word ? word : "", word ? "\" or " : "", lo, hi);
  *v = (int)x;
  return FF_OK;
}

static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ---- the segment ---- */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* Locks the table within timeout_ms (0: one try); ENOTRECOVERABLE when its
 * kind was written over (lock_damaged), never calling glibc on it. A dead holder leaves
 * EOWNERDEAD: its update may be half done, so the table is made consistent
 * and recounted (every field of a slot is valid on its own; only the count
 * can be off). Polled with trylock rather than waited in timedlock: the
 * bound is on the monotonic clock, not the settable wall clock, and
 * ThreadSanitizer sees the lock taken on EOWNERDEAD only from trylock. The
 * lock is held for microseconds, so the pauses start short. */
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

static int coord_lock(coord_shm *s, int timeout_ms) {
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

static void coord_unlock(coord_shm *s) { pthread_mutex_unlock(&s->lock); }

/* shm_open that never blocks: /dev/shm is writable by every user, and a
 * FIFO left under a segment's name would hang an open for reading. */
static int open_shm(const char *name, int flags, mode_t mode) {
  return shm_open(name, flags | O_NONBLOCK | O_NOCTTY, mode);
}

/* Writes to why what makes the object behind st no segment of this user's
 * (0: it is one): a FIFO, a device or another user's file under the name. */
static int foreign(const struct stat *st, char *why, size_t cap) {
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

/* Unlinks the name only while it still names segment `ino`: never a newer
 * segment that someone created meanwhile. */
static void unlink_if_same(const char *name, ino_t ino) {
  int fd = open_shm(name, O_RDONLY, 0);
  if (fd < 0) return;
  struct stat st;
  int same = fstat(fd, &st) == 0 && st.st_ino == ino;
  close(fd);
  if (same) shm_unlink(name);
}

/* Writes to why what makes segment s unusable (0: nothing). Under the
 * lock, except for the header, which never changes once it is ready. */
static int header_damage(const coord_shm *s, char *why, size_t cap) {
  if (s->magic == COORD_MAGIC && s->version == COORD_VERSION && s->size_bytes == sizeof *s) return 0;
  snprintf(why, cap, "belongs to another fusionflow build (magic %08x, version %u, %llu bytes)", s->magic,
           s->version, (unsigned long long)s->size_bytes);
  return 1;
}

static int in01(double x) { return x >= 0 && x <= 1; } /* NaN fails */

/* Every field the rebalancing reads, within the range a member writes:
 * anything else would be obeyed (a budget of 0 pins every member to its
 * minimum; a slot with a live pid, a heartbeat in the future and a huge
 * allotment is never reclaimed and takes the whole budget). */
static int table_damage(const coord_shm *s, uint64_t now_ns, char *why, size_t cap) {
  enum { MAX_THREADS = 1 << 20, MAX_MS = 86400000 };
  const ff__coord_params *p = &s->params;
  const char *bad = NULL;
  if (header_damage(s, why, cap)) return 1;
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

static const char REMOVE_IT[] = "remove it when no trainer runs";

/* Gives up on the damaged segment of c: from now on c runs alone on all its
 * threads. why says what is wrong, advice what to do about it. A joiner
 * gets the message in err (err not NULL); a member already in the group
 * hears of it on stderr, once per handle (its loader goes on without the
 * group, and nobody else would hear of it). */
static ff_status go_alone(ff__coord *c, const char *why, const char *advice, ff__error *err) {
  c->alone = 1;
  c->threads = c->max_threads;
  c->spares = 0;
  if (!err) /* a joiner is told in err */
    fprintf(stderr, "fusionflow: node coordinator: /dev/shm%s %s (%s): this loader runs alone on its %d thread%s\n",
            c->name, why, advice, c->max_threads, c->max_threads == 1 ? "" : "s");
  return ff__error_set(err, FF_EIO, "node coordinator: /dev/shm%s %s (%s)", c->name, why, advice);
}

/* Quiet: its trainer stopped asking for batches (or it is stopped); its
 * workers park once its ring is full, so its cores are idle. */
static int is_quiet(const ff__coord_params *p, const ff__coord_member *e, uint64_t now_ns) {
  /* before its first report its trainer may not have asked yet: whether its workers make its
   * first batches or filled its ring and parked, they publish (parked), or its live cores say
   * (ff__coord_live) */
  if (e->reports == 0)
    return e->parked || (e->live_span_ns > 0 &&
                         e->live_cores < clampi(e->threads, 1, member_cap(e)) * (1.0 - p->idle_threshold));
  uint64_t quiet_ns = (uint64_t)p->quiet_ms * 1000000u, silent = now_ns > e->heartbeat_ns ? now_ns - e->heartbeat_ns : 0;
  if (quiet_ns < 4 * e->interval_ns) quiet_ns = 4 * e->interval_ns;
  return silent > quiet_ns;
}

/* Marks the members other than self that stopped asking for batches. */
static void mark_quiet(const ff__coord_params *p, ff__coord_member *m, int n, int self, uint64_t now_ns) {
  for (int i = 0; i < n; i++)
    if (m[i].pid) m[i].quiet = i != self && is_quiet(p, &m[i], now_ns);
}

int ff__coord_rebalance(const ff__coord_params *p, ff__coord_member *m, int n, int self,
                        const ff__coord_report_data *r, uint64_t now_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  ff__coord_member *me = &m[self];
  ff__coord_params weighted = *p;
  double speed = ff__coord_speed(p, m, n); /* as it ran since its last report */
  /* Until its second report measures a batch interval, the time from its
   * join to its first report (its first batches) stands for one: its
   * silence is then weighed against that, not against quiet_ms alone. */
  if (me->reports == 0 && now_ns > me->heartbeat_ns) me->interval_ns = now_ns - me->heartbeat_ns;
  if (me->reports > 0 && now_ns > me->heartbeat_ns) {
    uint64_t dt = now_ns - me->heartbeat_ns;
    me->interval_ns = me->reports > 1 ? me->interval_ns - me->interval_ns / 4 + dt / 4 : dt;
    /* A report stands for its interval: one of a member that asks for a
     * batch a second weighs as ten of one that asks every 100 ms, so that
     * its signals follow a change in seconds, not in tens of reports. */
    double w = 1.0 - pow(1.0 - weighted.alpha, (double)dt / COORD_SIGNAL_NS);
    if (w > weighted.alpha) weighted.alpha = w;
  }
  if (me->reports > 0 && now_ns > me->heartbeat_ns && r->worker_cpu_ns >= me->worker_cpu_ns) {
    double cores = (double)(r->worker_cpu_ns - me->worker_cpu_ns) / (double)(now_ns - me->heartbeat_ns);
    me->worker_cores = me->reports > 1 ? me->worker_cores + weighted.alpha * (cores - me->worker_cores) : cores;
  }
  me->busy_speed = me->reports > 0 ? me->busy_speed + weighted.alpha * (speed - me->busy_speed) : speed;
  me->worker_cpu_ns = r->worker_cpu_ns;
  me->worker_samples = r->worker_samples;
  me->heartbeat_ns = now_ns;
  if (me->cpu_now_ns) live_restart(me, now_ns); /* its report says how it runs now */
  ff__coord_observe(&weighted, me, r);
  mark_quiet(p, m, n, self, now_ns);
  ff__coord_targets(p, m, n);
  int threads = ff__coord_step(p, m, n, self);
  ff__coord_live(p, m, n, now_ns);
  ff__coord_burst(p, m, n);
  me->running = clampi(threads + me->burst, 0, member_cap(me));
  return me->running;
}

static void measure_if_due(ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns, ff__coord_busy_fn busy,
                           void *ctx) {
  uint64_t busy_ns;
  if (ff__coord_window_due(p, m, n, now_ns) && busy(ctx, &busy_ns) == 0) ff__coord_measure(p, m, n, now_ns, busy_ns);
}

int ff__coord_take_report(ff__coord_params *p, ff__coord_member *m, int n, int self,
                          const ff__coord_report_data *r, uint64_t now_ns, ff__coord_busy_fn busy, void *ctx) {
  measure_if_due(p, m, n, now_ns, busy, ctx);
  int threads = ff__coord_rebalance(p, m, n, self, r, now_ns);
  measure_if_due(p, m, n, now_ns, busy, ctx);
  return threads;
}

/* ---- the adaptive reserve ---- */

void ff__coord_reserve_decide(const ff__coord_params *p, ff__coord_reserve *r, double others_cores) {
  /* A window's measure errs both ways (a member's CPU between its reports
   * is estimated): negative values are kept, so that the smoothing averages
   * the errors out instead of raising the reserve on them. */
  double budget = p->budget_threads > 0 ? p->budget_threads : 1;
  double x = others_cores != others_cores ? 0 : others_cores > -budget ? (others_cores < budget ? others_cores : budget) : -budget;
  r->others_last = x;
  r->others_cores = r->windows > 0 ? 0.5 * (r->others_cores + x) : x;
  if (r->windows < INT32_MAX) r->windows++;
  int want = (int)ceil(r->others_cores - FF__COORD_RESERVE_FREE);
  int cap = p->budget_threads > 1 ? p->budget_threads - 1 : 0;
  want = clampi(want, 0, cap);
  int was = r->cores;
  if (want >= r->cores) {
    r->cores = want;
    r->hold = FF__COORD_RESERVE_HOLD;
  } else if (r->hold > 1) {
    r->hold--;
  } else {
    r->cores = want;
    r->hold = FF__COORD_RESERVE_HOLD;
  }
  if (r->cores != was && r->changes < INT32_MAX) r->changes++;
}

int ff__coord_window_due(const ff__coord_params *p, const ff__coord_member *m, int n, uint64_t now_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_reserve *r = &p->reserve;
  if (p->trainer_cores != FF__COORD_TRAINER_AUTO) return 0;
  if (!r->start_ns) return 1;
  /* A window opened before a member had reported twice is void: reopen it
   * as soon as every member has (at start, and after a join). */
  int void_window = 0, known_now = 1;
  for (int i = 0; i < n; i++)
    if (m[i].pid) void_window |= !m[i].in_window, known_now &= m[i].reports >= 2;
  if (void_window && known_now) return 1;
  /* Each member's CPU since its last report is estimated: a window of two
   * of its intervals or more keeps that error a fraction of the window. */
  uint64_t window_ns = FF__COORD_WINDOW_MS * 1000000ull;
  for (int i = 0; i < n; i++)
    if (m[i].pid && !m[i].quiet && 2 * m[i].interval_ns > window_ns) window_ns = 2 * m[i].interval_ns;
  return now_ns > r->start_ns && now_ns - r->start_ns >= window_ns;
}

/* Whether member e's published worker CPU (cpu_now_ns, as last read in)
 * is at least as new as its last report's. */
static int cpu_published(const ff__coord_member *e) {
  return e->cpu_now_ns && e->cpu_now_ns >= e->worker_cpu_ns;
}

/* Member e's worker CPU at now_ns: what its workers published, else its
 * last report's plus its rate since (none while it is quiet: its workers
 * park). */
static uint64_t worker_cpu_at(const ff__coord_params *p, const ff__coord_member *e, uint64_t now_ns) {
  if (cpu_published(e)) return e->cpu_now_ns;
  if (now_ns <= e->heartbeat_ns || is_quiet(p, e, now_ns) || !(e->worker_cores > 0)) return e->worker_cpu_ns;
  return e->worker_cpu_ns + (uint64_t)(e->worker_cores * (double)(now_ns - e->heartbeat_ns));
}

void ff__coord_measure(ff__coord_params *p, ff__coord_member *m, int n, uint64_t now_ns, uint64_t node_busy_ns) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  ff__coord_reserve *r = &p->reserve;
  int known = 1;
  double workers = (double)r->departed_ns;
  for (int i = 0; i < n; i++) {
    if (!m[i].pid) continue;
    known &= m[i].in_window;
    uint64_t cpu = worker_cpu_at(p, &m[i], now_ns);
    workers += cpu > m[i].window_cpu_ns ? (double)(cpu - m[i].window_cpu_ns) : 0;
  }
  if (r->start_ns && known && now_ns > r->start_ns && node_busy_ns >= r->node_busy_ns) {
    double busy = (double)(node_busy_ns - r->node_busy_ns);
    ff__coord_reserve_decide(p, r, (busy - workers) / (double)(now_ns - r->start_ns));
  }
  r->start_ns = now_ns;
  r->node_busy_ns = node_busy_ns;
  r->departed_ns = 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid) {
      m[i].window_cpu_ns = worker_cpu_at(p, &m[i], now_ns);
      m[i].in_window = m[i].reports >= 2;
    }
}

void ff__coord_depart(ff__coord_params *p, const ff__coord_member *e) {
  uint64_t cpu = cpu_published(e) ? e->cpu_now_ns : e->worker_cpu_ns;
  if (e->pid && e->in_window && cpu > e->window_cpu_ns) p->reserve.departed_ns += cpu - e->window_cpu_ns;
}

/* Whether member e's process is gone, as a process of pid namespace pidns
 * sees (pids only mean something within one pid namespace: containers
 * sharing /dev/shm). */
static int exited(const ff__coord_member *e, uint64_t pidns) {
  int same_ns = !pidns || !e->pidns || e->pidns == pidns;
  return same_ns && kill(e->pid, 0) == -1 && errno == ESRCH;
}

/* Whether member e is over: its process exited, or it stayed silent past
 * COORD_ABANDONED_MS (a stopped member only silent past the heartbeat
 * timeout is not). */
static int over(const ff__coord_member *e, uint64_t pidns, uint64_t now_ns) {
  return exited(e, pidns) ||
         (now_ns > e->heartbeat_ns && now_ns - e->heartbeat_ns > COORD_ABANDONED_MS * 1000000ull);
}

int ff__coord_member_over(const ff__coord_member *e, uint64_t now_ns) {
  return e && e->pid && over(e, pid_namespace(), now_ns);
}

/* Whether member e's process is gone (seen from pid namespace pidns) or
 * stayed silent past the heartbeat timeout. */
static int member_gone(const ff__coord_params *p, const ff__coord_member *e, uint64_t pidns, uint64_t now_ns) {
  uint64_t timeout_ns = (uint64_t)p->heartbeat_timeout_ms * 1000000u;
  if (exited(e, pidns)) return 1;
  return now_ns > e->heartbeat_ns && now_ns - e->heartbeat_ns > timeout_ns;
}

/* Whether slot i's workers published that they are parked, as of now. */
static int32_t parked_now(coord_shm *s, int i) {
  return atomic_load_explicit(&s->workers_parked[i], memory_order_relaxed) != 0;
}

/* Slot i's published worker CPU and parked into its member (under the lock). */
static void read_published(coord_shm *s, int i) {
  s->slot[i].cpu_now_ns = atomic_load_explicit(&s->worker_cpu_now[i], memory_order_relaxed);
  s->slot[i].parked = parked_now(s, i);
}

/* Clears what slot i's workers published (a slot taken or freed). */
static void clear_published(coord_shm *s, int i) {
  atomic_store_explicit(&s->worker_cpu_now[i], 0, memory_order_relaxed);
  atomic_store_explicit(&s->workers_parked[i], 0, memory_order_relaxed);
}

/* Frees slot i (under the lock), its published CPU with it. */
static void free_slot(coord_shm *s, int i) {
  read_published(s, i);
  ff__coord_depart(&s->params, &s->slot[i]);
  memset(&s->slot[i], 0, sizeof s->slot[i]);
  clear_published(s, i);
}

/* Frees slots whose process is gone or that stayed silent too long (not
 * `self`), and recounts the members. Under the lock. */
static void reclaim(coord_shm *s, int self, uint64_t pidns, uint64_t now_ns) {
  int members = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) {
    ff__coord_member *e = &s->slot[i];
    if (!e->pid) continue;
    if (i != self && member_gone(&s->params, e, pidns, now_ns)) {
      free_slot(s, i);
      continue;
    }
    members++;
  }
  s->members = members;
}

/* Takes a free slot for c with its first allotment: its target, as far as
 * the free pool allows, and at least its minimum. Under the lock; returns
 * the slot or -1 if the table is full. */
static int take_slot(coord_shm *s, ff__coord *c, uint64_t now_ns) {
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
  mark_quiet(&s->params, s->slot, FF__COORD_MAX_MEMBERS, i, now_ns);
  ff__coord_targets(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  int pool = ff__coord_guaranteed_budget(&s->params, s->slot, FF__COORD_MAX_MEMBERS) -
             allotted(s->slot, FF__COORD_MAX_MEMBERS);
  ff__coord_params q = effective(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  e->threads = clampi(e->target < pool ? e->target : pool, member_min(&q, e), member_cap(e));
  c->slot = i;
  c->reserve_cores = ff__coord_reserved(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  c->ticket = e->ticket;
  c->threads = e->threads;
  c->spares = ff__coord_member_spares(c->max_threads, e->threads);
  return i;
}

static int owns_slot(const ff__coord *c) {
  if (c->slot < 0 || c->slot >= FF__COORD_MAX_MEMBERS) return 0;
  const ff__coord_member *e = &c->shm->slot[c->slot];
  return e->pid == (int32_t)c->pid && e->ticket == c->ticket;
}

static void detach(ff__coord *c) {
  if (c->shm) munmap(c->shm, sizeof *c->shm);
  c->shm = NULL;
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
    if (silent <= timeout_ns || !over(e, pidns, now_ns)) return 0;
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
  int fd = open_shm(name, O_RDWR, 0);
  if (fd < 0) return;
  struct stat st;
  char why[128];
  if (fstat(fd, &st) != 0 || foreign(&st, why, sizeof why) ||
      (st.st_size != 0 && (size_t)st.st_size != sizeof(coord_shm))) {
    close(fd);
    return;
  }
  int old = time(NULL) - st.st_ctime > COORD_UNREADY_S;
  coord_shm *s = st.st_size ? mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (s == MAP_FAILED) {
    if (!st.st_size && old) unlink_if_same(name, st.st_ino);
    return;
  }
  if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
    if (old) unlink_if_same(name, st.st_ino);
  } else if (!header_damage(s, why, sizeof why) && coord_lock(s, 0) == 0) {
    uint64_t now = ff__now_ns();
    if (s->closed) { /* its last member died between closing and unlinking */
      unlink_if_same(name, st.st_ino);
    } else if (!table_damage(s, now, why, sizeof why) && (s->members || old) && abandoned(s, pidns, now)) {
      s->closed = 1;
      unlink_if_same(name, st.st_ino);
    }
    coord_unlock(s);
  }
  munmap(s, sizeof *s);
}

/* Sweeps this user's other groups' segments (/dev/shm/fusionflow-<uid>-*)
 * for groups that are over (sweep_one): a join is the one moment a process
 * of the node looks, and a group whose last member died is otherwise left
 * in /dev/shm for good. */
static void sweep_abandoned(const char *own, uint64_t pidns) {
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
static ff_status attach(ff__coord *c, ff__error *err) {
  const ff__coord_params *p = &c->params;
  for (int attempt = 0; attempt < COORD_ATTACH_TRIES; attempt++) {
    if (attempt) sleep_ms(1);
    int fd = open_shm(c->name, O_RDWR | O_CREAT | O_EXCL, 0600), created = fd >= 0;
    if (!created) {
      if (errno != EEXIST)
        return ff__error_set(err, FF_EIO, "node coordinator: cannot create /dev/shm%s: %s", c->name,
                             strerror(errno));
      fd = open_shm(c->name, O_RDWR, 0);
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
    if (fstat(fd, &st) == 0 && foreign(&st, why, sizeof why)) {
      close(fd);
      return go_alone(c, why, "set FF_NODE_GROUP to another name", err);
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
      unlink_if_same(c->name, st.st_ino);
      continue;
    }
    if ((size_t)st.st_size != sizeof(coord_shm)) {
      close(fd);
      snprintf(why, sizeof why, "belongs to another fusionflow build (%lld bytes)", (long long)st.st_size);
      return go_alone(c, why, REMOVE_IT, err);
    }
    coord_shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
      return ff__error_set(err, FF_EIO, "node coordinator: cannot map %s: %s", c->name, strerror(errno));
    c->shm = s;
    c->ino = st.st_ino;

    if (created) {
      s->magic = COORD_MAGIC;
      s->version = COORD_VERSION;
      s->size_bytes = sizeof *s;
      s->params = *p;
      int rc = lock_init(&s->lock);
      if (rc) {
        detach(c);
        shm_unlink(c->name);
        return ff__error_set(err, FF_EIO, "node coordinator: cannot make a shared mutex: %s", strerror(rc));
      }
      atomic_store_explicit(&s->ready, 1u, memory_order_release);
    } else {
      while (!atomic_load_explicit(&s->ready, memory_order_acquire) && ff__now_ns() < deadline)
        sleep_ms(1);
      if (!atomic_load_explicit(&s->ready, memory_order_acquire)) { /* its creator died mid-way */
        detach(c);
        unlink_if_same(c->name, st.st_ino);
        continue;
      }
      if (header_damage(s, why, sizeof why)) {
        detach(c);
        return go_alone(c, why, REMOVE_IT, err);
      }
    }

    int rc = coord_lock(s, p->init_timeout_ms);
    if (rc == ENOTRECOVERABLE) {
      detach(c);
      unlink_if_same(c->name, st.st_ino);
      continue;
    }
    if (rc) {
      detach(c);
      return ff__error_set(err, FF_EIO, "node coordinator: %s stays locked (%s)", c->name, strerror(rc));
    }
    if (s->closed) {
      /* Its last member left. It unlinks under this lock, so the name is
       * normally gone already; if it died in between, finish its job. */
      unlink_if_same(c->name, st.st_ino);
      coord_unlock(s);
      detach(c);
      continue;
    }
    uint64_t now = ff__now_ns();
    if (table_damage(s, now, why, sizeof why)) {
      coord_unlock(s);
      detach(c);
      return go_alone(c, why, REMOVE_IT, err);
    }
    reclaim(s, -1, c->pidns, now);
    if (!s->members) { /* new, or every member of a crashed run is dead: start afresh */
      memset(s->slot, 0, sizeof s->slot);
      s->params = *p;
    }
    if (take_slot(s, c, now) < 0) {
      coord_unlock(s);
      detach(c);
      return ff__error_set(err, FF_EINVAL, "node coordinator: group %s is full (%d members)", c->group,
                           FF__COORD_MAX_MEMBERS);
    }
    coord_unlock(s);
    return FF_OK;
  }
  return ff__error_set(err, FF_EIO, "node coordinator: could not open %s after %d attempts", c->name,
                       COORD_ATTACH_TRIES);
}

ff_status ff__coord_join_params(const char *group, int max_threads, const ff__coord_params *params,
                                ff__coord **out, ff__error *err) {
  char buf[FF__COORD_GROUP_MAX];
  if (!out) return ff__error_set(err, FF_EINVAL, "node coordinator: out is NULL");
  if (max_threads < 1)
    return ff__error_set(err, FF_EINVAL, "node coordinator: max_threads must be >= 1 (got %d)", max_threads);
  if (!group) {
    const char *env = getenv("FF_NODE_GROUP");
    if (env && *env && (isspace((unsigned char)env[0]) || isspace((unsigned char)env[strlen(env) - 1])))
      return ff__error_set(err, FF_EINVAL, "node coordinator: FF_NODE_GROUP='%s' begins or ends with white space "
                           "(set it to off, auto or a group name without it)", env);
    if (!ff__coord_default_group(buf, sizeof buf)) {
      if (env && *env && !ff__coord_group_auto(env))
        return ff__error_set(err, FF_EINVAL, "node coordinator: FF_NODE_GROUP: group name must have 1..%d bytes "
                             "(got %zu)", FF__COORD_GROUP_MAX - 1, strlen(env));
      return ff__error_set(err, FF_EINVAL,
                           env && *env ? "node coordinator: FF_NODE_GROUP=auto outside a torchrun job (neither "
                                         "TORCHELASTIC_RUN_ID nor MASTER_PORT is set, or the name is too long)"
                                       : "node coordinator: no group (set FF_NODE_GROUP, or run under torchrun)");
    }
    group = buf;
  }
  ff__coord *c = calloc(1, sizeof *c);
  if (!c) return ff__error_set(err, FF_ENOMEM, "node coordinator: out of memory");
  if (pthread_mutex_init(&c->pub_mu, NULL) != 0) {
    free(c);
    return ff__error_set(err, FF_ENOMEM, "node coordinator: cannot create a mutex");
  }
  if (ff__coord_shm_name(group, c->name, sizeof c->name) != FF_OK) {
    pthread_mutex_destroy(&c->pub_mu);
    free(c);
    return ff__error_set(err, FF_EINVAL, "node coordinator: group name must have 1..%d bytes",
                         FF__COORD_GROUP_MAX - 1);
  }
  snprintf(c->group, sizeof c->group, "%s", group);
  if (params)
    c->params = *params;
  else
    ff__coord_params_init(&c->params);
  ff__coord_params_normalise(&c->params);
  c->pid = getpid();
  c->pidns = pid_namespace();
  ff__coord_busy_source_init(&c->busy);
  c->max_threads = max_threads;
  c->slot = -1;
  ff_status st = attach(c, err);
  if (st != FF_OK) {
    pthread_mutex_destroy(&c->pub_mu);
    free(c);
    return st;
  }
  sweep_abandoned(c->name, c->pidns);
  *out = c;
  return FF_OK;
}

static int is_set(const char *name) {
  const char *s = getenv(name);
  return s && *s;
}

static const char *trainer_cores_text(int trainer_cores, char *buf, size_t cap) {
  if (trainer_cores == FF__COORD_TRAINER_AUTO) return "auto";
  snprintf(buf, cap, "%d", trainer_cores);
  return buf;
}

/* Tells on stderr, once at the join, which of this process's settings the
 * group does not use (those it set: the member that started the group set
 * the group's), and where the trainers' cores leave the loaders no thread. */
static void warn_settings(ff__coord *c, int set_threads, int set_trainer, int set_expected) {
  ff__coord_params g;
  int n = 0;
  if (ff__coord_snapshot(c, NULL, &n, &g) != FF_OK) return;
  const ff__coord_params *w = &c->params;
  char said[256] = "", a[16], b[16];
  size_t len = 0;
  if (set_threads && g.budget_threads != w->budget_threads)
    len += (size_t)snprintf(said + len, sizeof said - len, ", FF_NODE_THREADS=%d (the group's: %d)",
                            w->budget_threads, g.budget_threads);
  if (set_trainer && g.trainer_cores != w->trainer_cores && len < sizeof said)
    len += (size_t)snprintf(said + len, sizeof said - len, ", FF_NODE_TRAINER_CORES=%s (the group's: %s)",
                            trainer_cores_text(w->trainer_cores, a, sizeof a),
                            trainer_cores_text(g.trainer_cores, b, sizeof b));
  if (set_expected && g.expected_members != w->expected_members && len < sizeof said)
    snprintf(said + len, sizeof said - len, ", LOCAL_WORLD_SIZE=%d (the group's: %d)", w->expected_members,
             g.expected_members);
  if (*said)
    fprintf(stderr, "fusionflow: node coordinator: group %s keeps the settings of the member that started it, "
            "not this process's %s\n", c->group, said + 2);
  int shares = n > g.expected_members ? n : g.expected_members;
  if (g.trainer_cores > 0 && (long long)g.trainer_cores * shares >= g.budget_threads)
    fprintf(stderr,
            "fusionflow: node coordinator: FF_NODE_TRAINER_CORES=%d for each of %d trainer%s leaves none of the "
            "node's %d threads to the loaders: they run on their idle-priority spares only\n",
            g.trainer_cores, shares, shares == 1 ? "" : "s", g.budget_threads);
}

ff_status ff__coord_join(const char *group, int max_threads, ff__coord **out, ff__error *err) {
  ff__coord_params p;
  ff__coord_params_init(&p);
  int v;
  ff_status st = env_setting("FF_NODE_THREADS", 1, 1 << 20, NULL, 0, &p.budget_threads, err);
  if (!st)
    st = env_setting("FF_NODE_TRAINER_CORES", 0, 4096, "auto", FF__COORD_TRAINER_AUTO, &p.trainer_cores, err);
  if (st) return st;
  if ((v = env_int("LOCAL_WORLD_SIZE", 1, FF__COORD_MAX_MEMBERS))) p.expected_members = v;
  st = ff__coord_join_params(group, max_threads, &p, out, err);
  if (st == FF_OK) warn_settings(*out, is_set("FF_NODE_THREADS"), is_set("FF_NODE_TRAINER_CORES"), v != 0);
  return st;
}

void ff__coord_leave(ff__coord *c) {
  if (!c) return;
  /* A forked child holds a copy of the handle (and of pub_mu, maybe held
   * by a thread it does not have) but not the membership. */
  int own = c->pid == getpid();
  if (own) pthread_mutex_lock(&c->pub_mu);
  coord_shm *s = c->shm;
  if (s && own && coord_lock(s, c->params.lock_timeout_ms + 1000) == 0) {
    if (owns_slot(c)) free_slot(s, c->slot);
    reclaim(s, -1, c->pidns, ff__now_ns());
    if (!s->members && !s->closed) {
      s->closed = 1;
      unlink_if_same(c->name, c->ino);
    }
    coord_unlock(s);
  }
  detach(c);
  if (own) {
    pthread_mutex_unlock(&c->pub_mu);
    pthread_mutex_destroy(&c->pub_mu);
  }
  free(c);
}

/* Locks the table for a report: waits lock_timeout_ms, or only tries while
 * the last report found it held too long (a stopped holder must not cost
 * every batch a wait). */
static int report_lock(ff__coord *c) {
  int rc = coord_lock(c->shm, c->stuck ? 0 : c->params.lock_timeout_ms);
  if (rc && !c->stuck) c->stuck_since_ns = ff__now_ns();
  c->stuck = rc != 0;
  return rc;
}

static int node_busy(void *src, uint64_t *out) { return ff__coord_node_busy_ns(src, out); }

/* ff__coord_report with c->pub_mu held. */
static void report_held(ff__coord *c, const ff__coord_report_data *r, int *threads_out) {
  if (c->alone || (!c->shm && attach(c, NULL) != FF_OK)) { /* a previous re-attach failed */
    *threads_out = c->threads;
    return;
  }
  coord_shm *s = c->shm;
  int rc = report_lock(c);
  if (rc != 0) {
    /* written over, or held past the heartbeat timeout: no one rebalances this group any more */
    if (rc == ENOTRECOVERABLE ||
        ff__now_ns() - c->stuck_since_ns > (uint64_t)c->params.heartbeat_timeout_ms * 1000000u) {
      detach(c);
      go_alone(c, rc == ENOTRECOVERABLE ? "is damaged (its lock written over)"
                                        : "stayed locked past the heartbeat timeout (a member stopped inside an "
                                          "update, or a damaged lock)",
               REMOVE_IT, NULL);
    }
    *threads_out = c->threads;
    return;
  }
  uint64_t now = ff__now_ns();
  if (s->closed) {
    /* Everyone, this member included (it was silent too long), was
     * reclaimed and the segment is gone: join the group afresh. */
    coord_unlock(s);
    detach(c);
    if (attach(c, NULL) != FF_OK || report_lock(c) != 0) {
      *threads_out = c->threads;
      return;
    }
    s = c->shm;
  }
  char why[128];
  if (table_damage(s, now, why, sizeof why)) {
    coord_unlock(s);
    detach(c);
    go_alone(c, why, REMOVE_IT, NULL);
    *threads_out = c->threads;
    return;
  }
  if (!owns_slot(c)) {
    reclaim(s, -1, c->pidns, now);
    if (take_slot(s, c, now) < 0) {
      coord_unlock(s);
      *threads_out = c->threads;
      return;
    }
  }
  reclaim(s, c->slot, c->pidns, now);
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) /* for the reserve's measure and the live cores */
    if (s->slot[i].pid) read_published(s, i);
  c->threads = ff__coord_take_report(&s->params, s->slot, FF__COORD_MAX_MEMBERS, c->slot, r, now, node_busy, &c->busy);
  c->reserve_cores = ff__coord_reserved(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  c->spares = ff__coord_member_spares(c->max_threads, c->threads);
  coord_unlock(s);
  *threads_out = c->threads;
}

ff_status ff__coord_report(ff__coord *c, const ff__coord_report_data *r, int *threads_out) {
  if (!c || !r || !threads_out || c->pid != getpid()) return FF_EINVAL;
  pthread_mutex_lock(&c->pub_mu);
  report_held(c, r, threads_out);
  pthread_mutex_unlock(&c->pub_mu);
  return FF_OK;
}

void ff__coord_publish_cpu(ff__coord *c, uint64_t worker_cpu_ns, int parked) {
  if (!c || c->pid != getpid() || pthread_mutex_trylock(&c->pub_mu) != 0) return;
  if (!c->alone && c->shm && owns_slot(c)) {
    atomic_store_explicit(&c->shm->worker_cpu_now[c->slot], worker_cpu_ns, memory_order_relaxed);
    atomic_store_explicit(&c->shm->workers_parked[c->slot], parked != 0, memory_order_relaxed);
  }
  pthread_mutex_unlock(&c->pub_mu);
}

int ff__coord_threads(const ff__coord *c) { return c ? c->threads : 0; }

const char *ff__coord_group(const ff__coord *c) { return c && !c->alone ? c->group : ""; }

int ff__coord_spares(const ff__coord *c) { return c ? c->spares : 0; }

int ff__coord_reserve_cores(const ff__coord *c) { return c ? c->reserve_cores : 0; }

ff_status ff__coord_snapshot(ff__coord *c, ff__coord_member *out, int *n_out, ff__coord_params *params_out) {
  if (!c || !c->shm || c->pid != getpid()) return FF_EINVAL;
  coord_shm *s = c->shm;
  if (coord_lock(s, c->params.lock_timeout_ms) != 0) return FF_EIO;
  int n = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    if (s->slot[i].pid) {
      if (out) out[n] = s->slot[i];
      n++;
    }
  if (params_out) *params_out = s->params;
  coord_unlock(s);
  if (n_out) *n_out = n;
  return FF_OK;
}

ff_status ff__coord_peek(const char *group, ff__coord_member *out, int *n_out, ff__coord_params *params_out,
                         ff__error *err) {
  char name[COORD_NAME_CAP];
  if (ff__coord_shm_name(group, name, sizeof name) != FF_OK)
    return ff__error_set(err, FF_EINVAL, "node coordinator: group name must have 1..%d bytes", FF__COORD_GROUP_MAX - 1);
  int fd = open_shm(name, O_RDWR, 0); /* the lock is in the segment: taking it writes */
  if (fd < 0 && errno == ENOENT)
    return ff__error_set(err, FF_EEMPTY, "node coordinator: no group %s on this node (no /dev/shm%s)", group, name);
  if (fd < 0)
    return ff__error_set(err, FF_EIO, "node coordinator: cannot open /dev/shm%s: %s", name, strerror(errno));
  struct stat st;
  char why[128] = "";
  if (fstat(fd, &st) != 0)
    snprintf(why, sizeof why, "cannot be read (%s)", strerror(errno));
  else
    foreign(&st, why, sizeof why);
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
  if (!atomic_load_explicit(&s->ready, memory_order_acquire) || header_damage(s, why, sizeof why)) {
    st_out = ff__error_set(err, FF_EIO, "node coordinator: %s is not ready or belongs to another build", name);
  } else if (coord_lock(s, s->params.lock_timeout_ms > 0 && s->params.lock_timeout_ms < 10000 ? s->params.lock_timeout_ms : 200)) {
    st_out = ff__error_set(err, FF_EIO, "node coordinator: %s stays locked", name);
  } else {
    if (table_damage(s, ff__now_ns(), why, sizeof why)) {
      st_out = ff__error_set(err, FF_EIO, "node coordinator: /dev/shm%s %s", name, why);
    } else {
      int n = 0;
      uint64_t now = ff__now_ns();
      for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
        if (s->slot[i].pid) {
          if (out) { /* parked and quiet as of now, not of the last report */
            out[n] = s->slot[i];
            out[n].parked = parked_now(s, i);
            out[n].quiet = is_quiet(&s->params, &out[n], now);
          }
          n++;
        }
      if (n_out) *n_out = n;
      if (params_out) *params_out = s->params;
    }
    coord_unlock(s);
  }
  munmap(s, sizeof *s);
  return st_out;
}

const char *ff__coord_member_state(const ff__coord_params *p, const ff__coord_member *m, uint64_t now_ns) {
  if (member_gone(p, m, pid_namespace(), now_ns)) return "gone";
  if (m->quiet) return "quiet";
  switch (member_class(p, m)) {
  case STALLED: return "stalled";
  case SLACK: return "slack";
  default: return "neutral";
  }
}

void ff__coord_test_hold_lock(ff__coord *c) {
  if (c && c->shm) coord_lock(c->shm, 1000);
}
