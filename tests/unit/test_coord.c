/* test_coord.c — the node coordinator (sched/coord.h and its rooms). The rebalancing is
 * checked as pure functions against traces worked out by hand (in the
 * comments); the shared-memory side with forked member processes that the
 * test drives one request at a time over pipes, so every run sees the same
 * sequence of reports and no assertion depends on timing. Each wait for a
 * child is bounded (poll with a timeout, alarm in the children), and each
 * test uses a group name of its own. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
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
#include "sched/coord_node.h"
#include "sched/coord_segment.h"

/* The three scripted demands: the trainer waits half of each interval; the
 * ring is full and the workers 80% idle; the ring half full and the workers
 * busy. */
static const ff__coord_report_data STALL = {0.5, 0.0, 1.0, 0, 0};
static const ff__coord_report_data SLACK = {0.0, 1.0, 0.2, 0, 0};
static const ff__coord_report_data NEUTRAL = {0.0, 0.5, 0.9, 0, 0};

static ff__coord_params params(int budget, int expected) {
  ff__coord_params p;
  ff__coord_params_init(&p);
  p.budget_threads = budget;
  p.expected_members = expected;
  p.trainer_cores = 0; /* the traces below share the whole budget */
  p.heartbeat_timeout_ms = 600000; /* deaths are found by pid unless a test says otherwise */
  p.quiet_ms = 600000;             /* nobody turns quiet between two scripted reports */
  p.lock_timeout_ms = 10000;
  p.alpha = 1; /* no smoothing: each report stands for itself, so traces can be worked by hand */
  return p;
}

/* ---- the pure rebalancing ---- */

static void table_add(ff__coord_member *m, int i, int cap, int threads) {
  m[i] = (ff__coord_member){.pid = 100 + i, .max_threads = cap, .threads = threads};
}

static int report(const ff__coord_params *p, ff__coord_member *m, int self, const ff__coord_report_data *d) {
  int before = m[self].threads;
  ff__coord_observe(p, &m[self], d);
  ff__coord_targets(p, m, FF__COORD_MAX_MEMBERS);
  int t = ff__coord_step(p, m, FF__COORD_MAX_MEMBERS, self);
  assert_in_range(t - before + 1, 0, 2); /* at most one thread per report */
  return t;
}

static int total(const ff__coord_member *m) {
  int sum = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    if (m[i].pid) sum += m[i].threads;
  return sum;
}

static void fair_share_splits_the_budget_with_the_remainder_to_the_first_slots(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(10, 1);
  table_add(m, 0, 10, 0);
  table_add(m, 3, 10, 0); /* slot order, not slot number */
  table_add(m, 7, 10, 0);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].fair, 4);
  assert_int_equal(m[3].fair, 3);
  assert_int_equal(m[7].fair, 3);
  assert_int_equal(m[0].target, 4); /* no signal yet: neutral, at the fair share */

  p = params(12, 4); /* torchrun's LOCAL_WORLD_SIZE=4 with 3 ranks up so far */
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].fair, 3);
  assert_int_equal(m[3].fair, 3);

  m[7].max_threads = 2; /* a member never gets more threads than it owns */
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[7].fair, 2);
}

/* Budget 12 for three members, 4 each. The slack member's workers do 0.2 of
 * its threads' worth of work; it keeps ceil(0.2 t / 0.75) of its t threads:
 * 2 of 4, then 1 of 3, so it lends 2, then 3. The stalled member wants up to
 * its ceiling (12), so it gets all 3: target 7.
 *   round 1: stall 4 (no supply yet), slack 4 -> 3, neutral 4
 *   round 2: stall 5, slack 2, neutral 4
 *   round 3: stall 6, slack 1, neutral 4
 *   round 4: stall 7, slack 1, neutral 4, and so on. */
static void lend_trace(const ff__coord_params *p, ff__coord_member *m) {
  static const int want[4][3] = {{4, 3, 4}, {5, 2, 4}, {6, 1, 4}, {7, 1, 4}};
  for (int r = 0; r < 12; r++) {
    int a = report(p, m, 0, &STALL), b = report(p, m, 1, &SLACK), c = report(p, m, 2, &NEUTRAL);
    const int *w = want[r < 4 ? r : 3];
    assert_int_equal(a, w[0]);
    assert_int_equal(b, w[1]);
    assert_int_equal(c, w[2]);
    assert_true(total(m) <= 12);
  }
}

static void three_members_table(ff__coord_member *m) {
  memset(m, 0, sizeof(ff__coord_member) * FF__COORD_MAX_MEMBERS);
  for (int i = 0; i < 3; i++)
    table_add(m, i, 12, 4);
}

static void a_member_with_slack_lends_threads_to_a_stalled_one(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params p = params(12, 3);
  three_members_table(m);
  lend_trace(&p, m);
}

/* Two members stall, 0.6 and 0.3, two idle ones can spare 3 each (they keep
 * their minimum, 1, of 4): the 6 spare threads split 4 : 2. */
static void stalled_members_share_the_supply_in_proportion_to_their_stall(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(16, 1);
  for (int i = 0; i < 4; i++)
    table_add(m, i, 16, 4);
  const ff__coord_report_data s6 = {0.6, 0, 1, 0, 0}, s3 = {0.3, 0, 1, 0, 0}, idle = {0, 1, 0, 0, 0};
  ff__coord_observe(&p, &m[0], &s6);
  ff__coord_observe(&p, &m[1], &s3);
  ff__coord_observe(&p, &m[2], &idle);
  ff__coord_observe(&p, &m[3], &idle);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].target, 8);
  assert_int_equal(m[1].target, 6);
  assert_int_equal(m[2].target, 1);
  assert_int_equal(m[3].target, 1);

  /* A ceiling caps a share; the rest goes to the other stalled member. */
  m[0].max_threads = 5;
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].target, 5);
  assert_int_equal(m[1].target, 9);
}

static void no_thread_is_lent_without_a_stall(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params p = params(12, 3);
  three_members_table(m);
  for (int r = 0; r < 5; r++) {
    assert_int_equal(report(&p, m, 0, &SLACK), 4);
    assert_int_equal(report(&p, m, 1, &NEUTRAL), 4);
    assert_int_equal(report(&p, m, 2, &SLACK), 4);
  }
}

/* After the lend trace (7, 1, 4): the borrower stops stalling but its ring
 * is not full yet, so it keeps its 7 (hysteresis); once it shows slack the
 * threads drift back, one per report: it gives one back, then the former
 * lender takes it from the pool. */
static void a_former_borrower_keeps_its_threads_until_it_shows_slack(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params p = params(12, 3);
  three_members_table(m);
  lend_trace(&p, m);
  for (int r = 0; r < 8; r++) {
    assert_int_equal(report(&p, m, 0, &NEUTRAL), 7);
    assert_int_equal(report(&p, m, 1, &SLACK), 1);
  }
  const ff__coord_report_data idle = {0, 1, 0, 0, 0};
  static const int want[4][2] = {{6, 2}, {5, 3}, {4, 4}, {4, 4}};
  for (int r = 0; r < 10; r++) {
    /* The smoothed busy share falls from 0.9 toward 0; the member shows slack at once (idle > 0.25). */
    int a = report(&p, m, 0, &idle), b = report(&p, m, 1, &SLACK);
    assert_int_equal(a, want[r < 4 ? r : 3][0]);
    assert_int_equal(b, want[r < 4 ? r : 3][1]);
    assert_int_equal(report(&p, m, 2, &NEUTRAL), 4);
    assert_true(total(m) <= 12);
  }
}

/* After the lend trace the lender's own workers get busy: it spares nothing
 * any more, the borrower's target falls back to its fair share and the
 * threads return one per report. */
static void a_lender_gets_its_threads_back_when_it_needs_them(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params p = params(12, 3);
  three_members_table(m);
  lend_trace(&p, m);
  const ff__coord_report_data busy = {0, 0.5, 1.0, 0, 0};
  /* The borrower reports first each round, so it learns of the change one
   * round after the lender has reported it. */
  static const int want[5][2] = {{7, 1}, {6, 2}, {5, 3}, {4, 4}, {4, 4}};
  for (int r = 0; r < 10; r++) {
    int a = report(&p, m, 0, &STALL), b = report(&p, m, 1, &busy);
    assert_int_equal(a, want[r < 5 ? r : 4][0]);
    assert_int_equal(b, want[r < 5 ? r : 4][1]);
    assert_true(total(m) <= 12);
  }
}

static void every_member_keeps_its_minimum_even_past_the_budget(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(2, 1); /* 3 members, 2 threads: each still gets 1 */
  for (int i = 0; i < 3; i++)
    table_add(m, i, 8, 1);
  for (int r = 0; r < 5; r++) {
    assert_int_equal(report(&p, m, 0, &STALL), 1);
    assert_int_equal(report(&p, m, 1, &SLACK), 1);
    assert_int_equal(report(&p, m, 2, &NEUTRAL), 1);
  }
  p = params(12, 1);
  p.min_threads = 3;
  m[0].threads = m[1].threads = 3;
  m[2].threads = m[2].max_threads = 2; /* a minimum above the ceiling is the ceiling */
  for (int r = 0; r < 12; r++) {
    assert_true(report(&p, m, 0, &STALL) >= 3);
    assert_true(report(&p, m, 1, &SLACK) >= 3);
    assert_int_equal(report(&p, m, 2, &SLACK), 2);
  }
}

/* Budget 8, fair 3, 3, 2; member 0 holds 10 (the table holds 12): it gives
 * back the excess 4 at once, then one per report. */
static void an_overcommitted_table_gives_back_the_excess_at_once(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(8, 1);
  table_add(m, 0, 16, 10);
  table_add(m, 1, 16, 1);
  table_add(m, 2, 16, 1);
  ff__coord_observe(&p, &m[0], &STALL);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].target, 3); /* stalled, but nobody has slack */
  assert_int_equal(ff__coord_step(&p, m, FF__COORD_MAX_MEMBERS, 0), 6);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(ff__coord_step(&p, m, FF__COORD_MAX_MEMBERS, 0), 5);
  /* The others grow only from the pool: 8 - (5 + 1 + 1) = 1 thread. */
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(ff__coord_step(&p, m, FF__COORD_MAX_MEMBERS, 1), 2);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(ff__coord_step(&p, m, FF__COORD_MAX_MEMBERS, 2), 1);
}

/* With smoothing (alpha 0.25) the first report counts as it is and later
 * ones move the signal a quarter of the way: a single short wait after a
 * calm stretch does not make a member "stalled". */
static void reports_are_smoothed_so_one_short_wait_lends_nothing(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params p = params(12, 3);
  p.alpha = 0.25;
  three_members_table(m);
  const ff__coord_report_data calm = {0, 0.5, 0.9, 0, 0}, blip = {0.16, 0.5, 0.9, 0, 0};
  ff__coord_observe(&p, &m[0], &calm);
  ff__coord_observe(&p, &m[0], &blip);
  assert_float_equal(m[0].stall_share, 0.04, 1e-12);
  assert_float_equal(m[0].ring_fill, 0.5, 1e-12);
  for (int r = 0; r < 3; r++)
    assert_int_equal(report(&p, m, 1, &SLACK), 4); /* nobody to lend to */
  assert_int_equal(m[0].target, 4);
}

/* What member self runs after a report: the step, then the bursts. */
static int running(const ff__coord_params *p, ff__coord_member *m, int self, const ff__coord_report_data *d) {
  int t = report(p, m, self, d);
  ff__coord_burst(p, m, FF__COORD_MAX_MEMBERS);
  return t + m[self].burst;
}

/* Two loaders on two cores, fair share 1 each: the slow consumer's loader
 * keeps 10% of its thread busy and has nothing it may lend (its minimum is
 * 1), so the allotments stay 1 and 1. Its core, which it uses only now and
 * then, is the stalled loader's burst: it runs 2 threads, as it would
 * without the coordinator. */
static void a_stalled_member_runs_the_cores_a_slack_one_leaves_idle(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(2, 2);
  table_add(m, 0, 2, 1);
  table_add(m, 1, 2, 1);
  const ff__coord_report_data slow = {0, 1, 0.1, 0, 0}, fast = {0.6, 0, 1, 0, 0};
  for (int r = 0; r < 5; r++) {
    assert_int_equal(running(&p, m, 1, &slow), 1);
    assert_int_equal(running(&p, m, 0, &fast), 2);
    assert_int_equal(m[0].threads, 1); /* the allotment: the burst is not in the budget */
    assert_int_equal(total(m), 2);
  }
  /* The slow loader's workers get busier (60% of its thread): it still has
   * slack, so its core stays lent (the OS shares it while it works). At 90%
   * it has none left and counts what it uses; the idle 0.1 core rounds to
   * nothing, but a stalled member that waits still runs a second thread,
   * as the OS would let it in those idle moments. When the slow loader's
   * thread is busy all the time, nothing is idle and the burst is gone at
   * the next report. */
  const ff__coord_report_data busier = {0, 1, 0.6, 0, 0}, busy = {0, 1, 0.9, 0, 0}, full = {0, 1, 1, 0, 0};
  assert_int_equal(running(&p, m, 1, &busier), 1);
  assert_int_equal(running(&p, m, 0, &fast), 2);
  assert_int_equal(running(&p, m, 1, &busy), 1);
  assert_int_equal(running(&p, m, 0, &fast), 2);
  assert_int_equal(running(&p, m, 1, &full), 1);
  assert_int_equal(running(&p, m, 0, &fast), 1);
}

/* Four members in lockstep on a budget of 8 (2 threads each), as DDP runs
 * them: members 0 and 2 have the costlier pipeline and their trainers wait
 * for data; members 1 and 3 keep up and wait for their peers at the
 * barrier, their workers busy 90% of the time. The 0.4 core they leave
 * idle rounds to no thread, and one thread for one of the stalled members
 * would leave the other setting the pace: each stalled member that waits
 * gets one thread. Beside those bursts 10 threads compete for 8 cores, yet
 * members 1 and 3 still need only what their workers use (their trainers
 * do not wait), so the bursts stay. Once every member waits for data
 * nothing is idle and no one gets a burst. Not where cores are kept for
 * the trainers. */
static void in_lockstep_every_stalled_member_runs_the_idle_moments(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(8, 4);
  for (int i = 0; i < 4; i++)
    table_add(m, i, 8, 2);
  const ff__coord_report_data costly = {0.3, 0, 1, 0, 0}, keeps_up = {0, 0.9, 0.9, 0, 0};
  for (int r = 0; r < 3; r++) {
    assert_int_equal(running(&p, m, 1, &keeps_up), 2);
    assert_int_equal(running(&p, m, 3, &keeps_up), 2);
    assert_int_equal(running(&p, m, 0, &costly), 3);
    assert_int_equal(running(&p, m, 2, &costly), 3);
    assert_int_equal(m[1].burst + m[3].burst, 0);
    assert_int_equal(total(m), 8); /* the allotments: the bursts are not in the budget */
  }
  assert_int_equal(running(&p, m, 1, &costly), 3); /* member 3 still leaves idle moments */
  assert_int_equal(running(&p, m, 3, &costly), 2);
  for (int i = 0; i < 4; i++)
    assert_int_equal(m[i].burst, 0);
  /* With a core kept for each trainer (12 cores, 8 guaranteed) the thread
   * would share a trainer's core: the stalled members run their allotment. */
  ff__coord_member q[FF__COORD_MAX_MEMBERS] = {0};
  p = params(12, 4);
  p.trainer_cores = 1;
  for (int i = 0; i < 4; i++)
    table_add(q, i, 12, 2);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(running(&p, q, 1, &keeps_up), 2);
    assert_int_equal(running(&p, q, 3, &keeps_up), 2);
    assert_int_equal(running(&p, q, 0, &costly), 2);
    assert_int_equal(running(&p, q, 2, &costly), 2);
  }
}

/* Two members of 4 threads on a budget of 8, their signals smoothed
 * (alpha 0.25), member 0's trainer waiting at its 4 reports. */
static ff__coord_params two_members_one_stalled(ff__coord_member *m) {
  ff__coord_params p = params(8, 2);
  p.alpha = 0.25;
  table_add(m, 0, 8, 4);
  table_add(m, 1, 8, 4);
  for (int i = 0; i < 4; i++)
    ff__coord_observe(&p, &m[0], &STALL);
  return p;
}

/* A member whose trainer stopped waiting (a batch was ready when it asked)
 * gets no burst from its next report on, though its smoothed stall share
 * keeps it stalled for a while (a second at 10 reports a second): the idle
 * cores are not parked with a loader whose ring fills. One whose trainer
 * waited under the stall threshold for a batch that was not ready yet is
 * still hungry and keeps its burst. */
static void a_member_that_stopped_waiting_gets_no_burst(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = two_members_one_stalled(m);
  m[1].quiet = 1; /* its 4 cores idle */
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 4);
  const ff__coord_report_data nearly = {0.02, 0.0, 1.0, 0, 0};
  ff__coord_observe(&p, &m[0], &nearly);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 4);
  const ff__coord_report_data fed = {0.0, 0.5, 1.0, 0, 0};
  ff__coord_observe(&p, &m[0], &fed);
  assert_true(m[0].stall_share > p.stall_threshold); /* still a stalled member */
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
  /* a burst it no longer holds is granted only to a trainer that waits */
  ff__coord_observe(&p, &m[0], &nearly);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
}

/* Member 1 (4 threads, busy 90% at its last report, 5 ms per sample) fills
 * its ring and parks its workers just after that report: the CPU they
 * publish stops growing, and at member 0's next report (stalled, 4
 * threads) its 4 cores are idle (8 - 4 - 0 = 4) and go to member 0 as a
 * burst, instead of a batch or two later when member 1's own reports say
 * so (4 x 0.9 = 3.6 in use: 0.4 idle rounds to nothing). Member 1 itself
 * gets no burst while its threads wait for work. A span under
 * FF__COORD_LIVE_MS measures nothing, and live cores measured over a span
 * that began before the member's last report are not used. */
static void a_member_whose_workers_parked_since_its_report_frees_its_cores_at_once(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(8, 2);
  table_add(m, 0, 8, 4);
  table_add(m, 1, 8, 4);
  ff__coord_observe(&p, &m[0], &STALL);
  const ff__coord_report_data busy = {0.2, 0.0, 0.9, 0, 0};
  ff__coord_observe(&p, &m[1], &busy);
  const uint64_t ms = 1000000, t = 1000 * ms, cpu = 5000 * ms;
  m[0].heartbeat_ns = m[1].heartbeat_ns = t;
  m[1].worker_cpu_ns = cpu, m[1].worker_samples = 1000;
  m[1].burst = 1, m[1].running = 5;
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
  assert_int_equal(m[1].burst, 0);
  /* the first publication starts the span; 49 ms later it is too short */
  m[1].cpu_now_ns = cpu;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 1 * ms);
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 50 * ms);
  assert_int_equal(m[1].live_span_ns, 0);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
  /* 60 ms with nothing published: its workers parked */
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 61 * ms);
  assert_true(m[1].live_span_ns == 60 * ms && m[1].live_cores == 0);
  m[1].burst = 1;
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 4);
  assert_int_equal(m[1].burst, 0);
  /* busy on its 4 threads over the next 100 ms: nothing idles */
  m[1].cpu_now_ns = cpu + 400 * ms;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 161 * ms);
  assert_true(fabs(m[1].live_cores - 4.0) < 1e-9);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
  /* parked again, then it reports: its report is newer than the live cores */
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 261 * ms);
  assert_true(m[1].live_cores == 0);
  m[1].heartbeat_ns = t + 262 * ms;
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 0);
  /* a re-used slot's counter that went back starts a new span */
  m[1].cpu_now_ns = 3 * ms;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 400 * ms);
  assert_int_equal(m[1].live_span_ns, 0);
  assert_int_equal(m[1].live_cpu_ns, 3 * ms);
}

/* Live cores are compared with the threads a member runs, not with the
 * burst another member's report wrote in its slot (it starts that at its
 * own next report): member 1 (2 threads, neutral) runs 2, busy on both,
 * and keeps the burst of 2 it holds (hysteresis) though 2 < (2 + 2) x
 * 0.75. Its samples take 20 ms: a span under 8 of them (160 ms) measures
 * nothing. And its own report starts a new span (ff__coord_rebalance). */
static void live_cores_are_weighed_against_what_a_member_runs(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(8, 2);
  table_add(m, 0, 8, 4);
  table_add(m, 1, 8, 2);
  ff__coord_observe(&p, &m[0], &STALL);
  ff__coord_observe(&p, &m[1], &NEUTRAL);
  const uint64_t ms = 1000000, t = 1000 * ms, cpu = 2000 * ms;
  m[1].worker_cpu_ns = cpu, m[1].worker_samples = 100, m[1].heartbeat_ns = t;
  m[1].cpu_now_ns = cpu;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t);
  m[1].cpu_now_ns = cpu + 200 * ms;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 100 * ms);
  assert_int_equal(m[1].live_span_ns, 0); /* 100 ms < 8 x 20 ms */
  m[1].cpu_now_ns = cpu + 400 * ms;
  ff__coord_live(&p, m, FF__COORD_MAX_MEMBERS, t + 200 * ms);
  assert_true(m[1].live_span_ns == 200 * ms && fabs(m[1].live_cores - 2.0) < 1e-9);
  m[1].running = 2, m[1].burst = 2;
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[1].burst, 2);
  assert_int_equal(m[0].burst, 0);
  /* its report restarts the span: the live cores of before it are not used */
  const ff__coord_report_data busy = {0.0, 0.5, 0.9, cpu + 400 * ms, 120};
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &busy, t + 210 * ms);
  assert_int_equal(m[1].live_span_ns, 0);
  assert_int_equal(m[1].live_at_ns, t + 210 * ms);
  assert_int_equal(m[1].running, m[1].threads + m[1].burst);
}

/* A member whose trainer waited has a smoothed stall share that takes a
 * second or more to fall. Once two of its reports in a row had slack its
 * cores count as idle and go to a stalled peer as a burst; after one such
 * report they do not (a trainer that waits now and then has slack between
 * its waits), and a report without slack starts the count again. */
static void two_reports_with_slack_free_a_members_cores_for_the_bursts(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = two_members_one_stalled(m);
  for (int i = 0; i < 4; i++)
    ff__coord_observe(&p, &m[1], &STALL);
  ff__coord_observe(&p, &m[1], &SLACK);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[1].slack_reports, 1);
  assert_int_equal(m[0].burst, 1); /* member 1's smoothed busy share: 4 x 0.8 of its 4 cores in use */
  ff__coord_observe(&p, &m[1], &SLACK);
  assert_true(m[1].stall_share > p.stall_threshold); /* still a stalled member by its smoothed signals */
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 4);
  assert_int_equal(m[1].burst, 0);
  ff__coord_observe(&p, &m[1], &NEUTRAL);
  assert_int_equal(m[1].slack_reports, 0);
}

/* Nor does such a member borrow more: member 1 has slack and could lend
 * 2 of its 4 threads, member 0's trainer waited but its last two reports
 * had slack, so its target stays its fair share (6 while it stalls). */
static void two_reports_with_slack_end_the_borrowing(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = two_members_one_stalled(m);
  for (int i = 0; i < 4; i++)
    ff__coord_observe(&p, &m[1], &SLACK);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].target, 6);
  ff__coord_observe(&p, &m[0], &SLACK);
  ff__coord_observe(&p, &m[0], &SLACK);
  assert_true(m[0].stall_share > p.stall_threshold);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].target, 4);
}

/* n hungry members of 16 threads: each holds `threads` but the last, which
 * holds `last`, and member 0 a burst of 1 on top; each waits and reads a
 * busy share of 16/17, as 17 threads on 16 cores do, measured at the speed
 * of the table as it stands (the budget of p over the threads that
 * compete). */
static void hungry_members(const ff__coord_params *p, ff__coord_member *m, int n, int threads, int last) {
  for (int i = 0; i < n; i++) {
    table_add(m, i, 16, i == n - 1 ? last : threads);
    m[i].reports = 5, m[i].stall_share = m[i].stall_now = 0.9, m[i].busy_share = 16.0 / 17;
  }
  m[0].burst = 1;
  double speed = ff__coord_speed(p, m, FF__COORD_MAX_MEMBERS);
  for (int i = 0; i < n; i++)
    m[i].busy_speed = speed;
}

/* The members' bursts after ff__coord_burst. */
static int bursts_of(const ff__coord_params *p, ff__coord_member *m) {
  ff__coord_burst(p, m, FF__COORD_MAX_MEMBERS);
  int bursts = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    bursts += m[i].burst;
  return bursts;
}

/* 16 threads, no reserve: 8 hungry members hold them and one of them a
 * burst, so 17 threads run on 16 cores and each reads a busy share of 16/17
 * in CPU time. Taken as it reads, that would leave 16/17 of a core "idle"
 * and keep the burst alive for good, its holder taking from the others: the
 * threads that compete are counted, and the burst goes. */
static void a_burst_does_not_keep_itself_alive_on_a_full_node(void **state) {
  (void)state;
  ff__coord_params p = params(16, 8);
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  hungry_members(&p, m, 8, 2, 2);
  assert_float_equal(m[0].busy_speed, 16.0 / 17, 1e-12);
  assert_int_equal(bursts_of(&p, m), 0);
  /* A fixed reserve of a core per member: 4 members hold the 12 cores
   * left and one of them a burst; with the trainers' 4 threads 17 compete
   * again, and the reserved cores are counted as busy. */
  p.trainer_cores = 1, p.expected_members = 4;
  memset(m, 0, sizeof m);
  hungry_members(&p, m, 4, 3, 3);
  assert_float_equal(m[0].busy_speed, 16.0 / 17, 1e-12);
  assert_int_equal(bursts_of(&p, m), 0);
}

/* Two members of 2 threads on 2 cores, a thread each, that joined at t. */
static ff__coord_params two_joined_at(ff__coord_member *m, uint64_t t) {
  for (int i = 0; i < 2; i++)
    table_add(m, i, 2, 1), m[i].heartbeat_ns = t;
  return params(2, 2);
}

/* A trainer that waits all the time for batches its workers make at full speed. */
static const ff__coord_report_data HUNGRY = {1.0, 0.0, 1.0, 0, 0};

/* Two hungry members on two cores, a thread each. Member 0 runs a burst
 * on top (a moment ago member 1's workers idled), so 3 threads share the 2
 * cores and each member reads a busy share of 2/3 in CPU time. Member 1's
 * report ends the burst (nothing is idle), and member 0 runs it until its
 * own report. Measured so, the busy shares read what the threads use at
 * 2/3 of a core each, not a third of a core idle: taken against the table
 * of after the burst (2 threads on 2 cores), they would add up to 2/3 of a
 * core idle, a thread (rounded half up), and the bursts would go back and
 * forth between the members for as long as their smoothed busy shares
 * remember the burst. */
static void a_busy_share_measured_under_a_burst_does_not_call_the_next(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  const uint64_t ms = 1000000, t = 1000 * ms;
  ff__coord_params p = two_joined_at(m, t);
  const ff__coord_report_data shared = {1.0, 0.0, 2.0 / 3, 0, 0};
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 100 * ms), 1);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &HUNGRY, t + 101 * ms), 1);
  m[0].burst = 1, m[0].running = 2;
  assert_float_equal(ff__coord_speed(&p, m, FF__COORD_MAX_MEMBERS), 2.0 / 3, 1e-12);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &shared, t + 200 * ms), 1);
  assert_int_equal(m[0].burst, 0);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &shared, t + 201 * ms), 1);
  assert_float_equal(m[0].busy_speed, 2.0 / 3, 1e-12);
  assert_float_equal(m[1].busy_speed, 2.0 / 3, 1e-12);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &HUNGRY, t + 300 * ms), 1);
  /* the same busy shares taken as measured at full speed: the burst the
   * correction prevents */
  m[0].busy_share = m[1].busy_share = 2.0 / 3;
  m[0].busy_speed = m[1].busy_speed = 1;
  assert_int_equal(bursts_of(&p, m), 1);
}

/* Before its first report, a member's live cores say whether its workers
 * make its first batches or filled its ring and parked (its trainer
 * consumes slowly): FF__COORD_LIVE_MS of them suffice, its mean sample
 * being unknown. Parked, it is quiet and its core goes to the stalled
 * peer. */
static void before_its_first_report_a_members_live_cores_say_whether_it_works(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  const uint64_t ms = 1000000, t = 1000 * ms;
  ff__coord_params p = two_joined_at(m, t);
  m[1].cpu_now_ns = 5 * ms; /* its workers published their first sample */
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 100 * ms), 1);
  m[1].cpu_now_ns += 60 * ms; /* busy on its thread */
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 160 * ms), 1);
  assert_true(m[1].live_span_ns == 60 * ms && fabs(m[1].live_cores - 1.0) < 1e-9);
  assert_false(m[1].quiet);
  /* nothing published over the next 60 ms: parked */
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 220 * ms), 2);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 280 * ms), 2);
  assert_true(m[1].quiet);
}

/* Workers that wait for work say so (ff__coord_publish_cpu's parked): a
 * member whose ring is full lends its cores at a peer's next report,
 * before a live span (50 ms at least) could measure them idle. Member 1
 * has not reported: its workers published a sample, then parked, and
 * hungry member 0 runs a burst at once; when they run again, member 0
 * gives it back at its next report. After member 1's first report (neutral:
 * its trainer does not wait, its workers busy on its thread) the same
 * holds. */
static void a_member_whose_workers_parked_lends_its_cores_before_a_live_span_says_so(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  const uint64_t ms = 1000000, t = 1000 * ms;
  ff__coord_params p = two_joined_at(m, t);
  m[1].cpu_now_ns = 5 * ms;
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 100 * ms), 1);
  m[1].parked = 1;
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 101 * ms), 2);
  assert_true(m[1].quiet);
  assert_int_equal(m[1].live_span_ns, 0); /* no span measured: the parked flag alone */
  m[1].parked = 0, m[1].cpu_now_ns += ms;
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 102 * ms), 1);
  const ff__coord_report_data working = {0.0, 0.5, 1.0, 0, 0};
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &working, t + 110 * ms), 1);
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 111 * ms), 1);
  m[1].parked = 1;
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 112 * ms), 2);
  m[1].parked = 0;
  assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 113 * ms), 1);
}

/* A member that has not reported yet is not quiet after quiet_ms (50 ms
 * here), however long it is silent: its trainer may wait for its first
 * batches, and whether its workers make them or parked its live cores say
 * (above; none are measured here), so that a peer's first reports do not
 * burst into the cores of a member whose workers run. Until its second
 * report, the time from its join to its first report stands for its batch
 * interval: silent 4 of those, it is quiet. */
static void a_member_is_not_quiet_before_its_batch_interval_is_known(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  const uint64_t ms = 1000000, t = 1000 * ms;
  ff__coord_params p = two_joined_at(m, t);
  p.quiet_ms = 50;
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 200 * ms);
  assert_false(m[1].quiet); /* silent 200 ms since it joined */
  assert_int_equal(m[0].running, 1);
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &HUNGRY, t + 300 * ms);
  assert_int_equal(m[1].interval_ns, 300 * ms);
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 1000 * ms);
  assert_false(m[1].quiet); /* silent 700 ms, under 4 x 300 */
  assert_int_equal(m[0].running, 1);
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 1600 * ms);
  assert_true(m[1].quiet); /* silent 1300 ms */
  assert_int_equal(m[0].running, 2);
  /* its second report measures its interval */
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &HUNGRY, t + 1700 * ms);
  assert_int_equal(m[1].interval_ns, 1400 * ms);
  /* a new member that has not reported in 10 s is not quiet (it is gone
   * after the heartbeat timeout, 600 s here) */
  table_add(m, 1, 2, 1), m[1].heartbeat_ns = t + 1700 * ms;
  ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + 11700 * ms);
  assert_false(m[1].quiet);
  assert_int_equal(m[0].running, 1);
}

/* Member 1's trainer was hungry and now steps every 457 ms (its demand
 * changed mid-run); member 0's trainer waits and runs a burst on member
 * 1's core. Member 1's first report after the change says its trainer took
 * the batch at once from a full ring, but its smoothed stall share (signals
 * smoothed, alpha 0.25 per 100 ms) still says it stalls. Its workers make
 * the batch that replaces the one taken, using 0.6 of a core while the
 * burst shares its core (3 threads on 2): that is all it needs, as the
 * sharing only slows a batch its trainer does not wait for. Taken as 0.6 at
 * 2/3 speed (0.9 of a core) it would leave nothing idle and end the burst
 * until a later span found its workers parked. Where its trainer waited
 * for that batch, it does need its core, and the burst goes. */
static void a_member_refilling_a_full_ring_after_its_trainer_slowed_leaves_the_burst(void **state) {
  (void)state;
  const uint64_t ms = 1000000, t = 1000 * ms, cpu = 2000 * ms; /* 2 ms per sample */
  const ff__coord_report_data took_from_full = {0.0, 1.0, 0.9, cpu, 1000}, waited = {0.3, 0.0, 1.0, cpu, 1000};
  const ff__coord_report_data *report1[2] = {&took_from_full, &waited};
  const int expected[2] = {2, 1};
  for (int c = 0; c < 2; c++) {
    ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
    ff__coord_params p = two_joined_at(m, t);
    p.alpha = 0.25;
    for (int r = 1; r <= 10; r++) {
      ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t + (uint64_t)r * 50 * ms);
      ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, &HUNGRY, t + (uint64_t)r * 50 * ms + ms);
    }
    m[0].burst = 1, m[0].running = 2; /* granted while member 1's workers parked */
    const uint64_t t1 = t + 958 * ms;
    m[1].cpu_now_ns = cpu;
    assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 1, report1[c], t1), 1);
    assert_true(m[1].stall_share > p.stall_threshold);
    m[1].cpu_now_ns = cpu + 36 * ms; /* 0.6 of a core over the next 60 ms */
    assert_int_equal(ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, 0, &HUNGRY, t1 + 60 * ms), expected[c]);
    assert_true(m[1].live_span_ns == 60 * ms && fabs(m[1].live_cores - 0.6) < 1e-9);
  }
}

/* ---- the adaptive trainer reserve ---- */

static ff__coord_params auto_params(int budget, int expected) {
  ff__coord_params p = params(budget, expected);
  p.trainer_cores = FF__COORD_TRAINER_AUTO;
  return p;
}

/* 16 cores, a core reserved, 8 hungry members: 15 threads, so one member
 * has a thread fewer than the others. Which one moves a place each window
 * of the adaptive reserve, so that over 8 windows each is short once (for
 * good to the last slot, that member ran at half its peers' rate). */
static void the_member_a_thread_short_changes_each_window(void **state) {
  (void)state;
  ff__coord_params p = auto_params(16, 8);
  p.reserve.cores = 1;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  hungry_members(&p, m, 8, 2, 2);
  int short_of[8] = {0};
  for (int w = 0; w < 8; w++) {
    p.reserve.windows = w + 1;
    ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
    int sum = 0, shorts = 0;
    for (int i = 0; i < 8; i++) {
      sum += m[i].fair;
      if (m[i].fair == 1) short_of[i]++, shorts++;
    }
    assert_int_equal(sum, 15);
    assert_int_equal(shorts, 1);
  }
  for (int i = 0; i < 8; i++)
    assert_int_equal(short_of[i], 1);
}

/* Windows' measures of the others' cores in, the reserve out: a trainer
 * getting 0.2 of a core keeps nothing, one getting 0.6 a core at once (the
 * measure smoothed by halves after the first window), which it keeps at a
 * full core of use; when it stops, the reserve drops only after
 * FF__COORD_RESERVE_HOLD windows that want less in a row, and a window that
 * wants it back resets the count. */
static void the_adaptive_reserve_rounds_the_others_cores_and_holds_before_it_drops(void **state) {
  (void)state;
  ff__coord_params p = auto_params(4, 2);
  ff__coord_reserve r = {0};
  for (int i = 0; i < 8; i++) ff__coord_reserve_decide(&p, &r, 0.2);
  assert_int_equal(r.cores, 0);
  assert_true(fabs(r.others_cores - 0.2) < 0.01);
  ff__coord_reserve_decide(&p, &r, 0.6);
  assert_int_equal(r.cores, 1); /* (0.2 + 0.6) / 2 = 0.4 > FF__COORD_RESERVE_FREE */
  for (int i = 0; i < 8; i++) ff__coord_reserve_decide(&p, &r, 1.0);
  assert_int_equal(r.cores, 1); /* ceil(1 - FF__COORD_RESERVE_FREE) */
  assert_int_equal(r.changes, 1);
  int windows = 0;
  while (r.cores == 1 && windows < 20) ff__coord_reserve_decide(&p, &r, 0.0), windows++;
  /* the smoothed measure falls to 0.5, then 0.25 wants 0, held for three more windows */
  assert_int_equal(windows, 2 + FF__COORD_RESERVE_HOLD - 1);
  assert_int_equal(r.changes, 2);
  /* a dip shorter than the hold keeps it */
  for (int i = 0; i < 8; i++) ff__coord_reserve_decide(&p, &r, 1.0);
  assert_int_equal(r.cores, 1);
  for (int i = 0; i < 3; i++) ff__coord_reserve_decide(&p, &r, 0.0);
  ff__coord_reserve_decide(&p, &r, 1.0);
  for (int i = 0; i < 3; i++) ff__coord_reserve_decide(&p, &r, 0.0);
  assert_int_equal(r.cores, 1);
  /* the first window's measure is taken whole, not halved with a 0 before
   * it: half a core of use keeps a core from the first window on */
  ff__coord_reserve f = {0};
  ff__coord_reserve_decide(&p, &f, 0.5);
  assert_int_equal(f.cores, 1);
  assert_true(fabs(f.others_cores - 0.5) < 1e-9);
  /* a measure that errs below zero averages out instead of being raised to it */
  ff__coord_reserve z = {0};
  for (int i = 0; i < 4; i++) ff__coord_reserve_decide(&p, &z, i % 2 ? 0.45 : -0.45);
  assert_int_equal(z.cores, 0);
  assert_true(z.others_last > 0.44); /* raised to 0 the smoothed measure would reach 0.28 */
  /* NaN counts as nothing */
  ff__coord_reserve_decide(&p, &z, NAN);
  assert_int_equal(z.cores, 0);
  assert_true(z.others_last == 0);
}

/* The reserve never takes the whole budget: a busy node keeps the loaders
 * a thread (budget - 1), and a budget of one thread keeps nothing. */
static void the_adaptive_reserve_never_takes_the_whole_budget(void **state) {
  (void)state;
  ff__coord_params p = auto_params(4, 2), one = auto_params(1, 1);
  ff__coord_reserve r = {0}, q = {0};
  for (int i = 0; i < 10; i++) ff__coord_reserve_decide(&p, &r, 64.0), ff__coord_reserve_decide(&one, &q, 8.0);
  assert_int_equal(r.cores, 3);
  assert_true(r.others_cores <= 4.0);
  assert_int_equal(q.cores, 0);
}

/* The allotments and bursts share the budget less the reserve; where that
 * leaves less than a thread per member, every member runs on its spares
 * (as with a fixed reserve that leaves nothing), which share the cores the
 * trainers leave. A fixed reserve ignores the measured one. */
static void the_adaptive_reserve_comes_off_the_guaranteed_budget(void **state) {
  (void)state;
  ff__coord_params p = auto_params(4, 2);
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  table_add(m, 0, 4, 2);
  table_add(m, 1, 4, 2);
  assert_int_equal(ff__coord_guaranteed_budget(&p, m, FF__COORD_MAX_MEMBERS), 4);
  p.reserve.cores = 1;
  assert_int_equal(ff__coord_reserved(&p, m, FF__COORD_MAX_MEMBERS), 1);
  assert_int_equal(ff__coord_guaranteed_budget(&p, m, FF__COORD_MAX_MEMBERS), 3);
  ff__coord_params fixed = p;
  fixed.trainer_cores = 0;
  assert_int_equal(ff__coord_guaranteed_budget(&fixed, m, FF__COORD_MAX_MEMBERS), 4);
  fixed.trainer_cores = 1;
  assert_int_equal(ff__coord_guaranteed_budget(&fixed, m, FF__COORD_MAX_MEMBERS), 2);
  /* 2 threads, a core reserved: less than one each, so both members run on spares */
  ff__coord_params two = auto_params(2, 2);
  two.reserve.cores = 1;
  ff__coord_member t[FF__COORD_MAX_MEMBERS] = {0};
  table_add(t, 0, 2, 1);
  table_add(t, 1, 2, 1);
  assert_int_equal(ff__coord_guaranteed_budget(&two, t, FF__COORD_MAX_MEMBERS), 0);
  ff__coord_targets(&two, t, FF__COORD_MAX_MEMBERS);
  assert_int_equal(t[0].target + t[1].target, 0);
  for (int i = 0; i < 4; i++) /* the table holds 2 against a budget of 0: the excess goes */
    ff__coord_step(&two, t, FF__COORD_MAX_MEMBERS, i % 2);
  assert_int_equal(total(t), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(ff__coord_member_spares(2, t[i].threads), 2);
  ff__coord_burst(&two, t, FF__COORD_MAX_MEMBERS);
  assert_int_equal(t[0].burst + t[1].burst, 0);
  /* 3 threads, a core reserved, 2 members: one each */
  two.budget_threads = 3;
  assert_int_equal(ff__coord_guaranteed_budget(&two, t, FF__COORD_MAX_MEMBERS), 2);
  /* no reserve: each keeps its minimum again */
  two.budget_threads = 2, two.reserve.cores = 0;
  ff__coord_targets(&two, t, FF__COORD_MAX_MEMBERS);
  assert_int_equal(t[0].target, 1);
  assert_int_equal(t[1].target, 1);
}

/* Bursts hand out idle cores of the guaranteed budget only. 16 threads, a
 * core reserved for the others (their thread uses a core): 8 hungry members
 * hold the 15 left and one of them a burst, so 17 threads run on 16 cores
 * and each reads a busy share of 16/17 in CPU time. Taken as it reads, that
 * would leave three quarters of a core "idle" and keep the burst on the
 * reserved core for good; the others' share of the cores is counted, and the
 * burst goes. Once the others stop (the reserve dropped), the idle cores
 * are bursts at once. */
static void bursts_leave_the_reserved_cores_to_the_others(void **state) {
  (void)state;
  ff__coord_params p = auto_params(16, 8);
  p.reserve.cores = 1;
  p.reserve.others_cores = 1.0;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  hungry_members(&p, m, 8, 2, 1);
  assert_float_equal(m[0].busy_speed, 16.0 / 17, 1e-12);
  assert_int_equal(bursts_of(&p, m), 0);
  p.reserve.cores = 0, p.reserve.others_cores = 0;
  for (int i = 0; i < 8; i++) m[i].busy_share = 1.0, m[i].busy_speed = 1; /* measured since */
  m[7].busy_share = 0; /* its one thread idles (an I/O wait): its core is free */
  assert_int_equal(bursts_of(&p, m), 2); /* the core the reserve freed and the idle thread's */
}

/* The window's measure from fixed inputs: two members each publishing a
 * quarter second of worker CPU over a quarter second, a node busy for three
 * quarters: others = 1 core. A member leaving within a window keeps its
 * share in the sum (else its CPU would count as the others'); a joiner
 * that had not reported twice when the window opened voids it. */
static void the_window_measures_the_node_less_the_members_workers(void **state) {
  (void)state;
  ff__coord_params p = auto_params(4, 2);
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  uint64_t t0 = 1000000000ull, w = FF__COORD_WINDOW_MS * 1000000ull, busy = 5000000000ull;
  for (int i = 0; i < 2; i++) {
    table_add(m, i, 4, 2);
    m[i].reports = 3, m[i].heartbeat_ns = t0, m[i].worker_cpu_ns = 7000000000ull, m[i].interval_ns = 10000000;
  }
  assert_true(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0));
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0, busy);
  assert_int_equal(p.reserve.windows, 0); /* the first opens the window */
  assert_false(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + w - 1));
  assert_true(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + w));
  for (int i = 0; i < 2; i++) m[i].heartbeat_ns = t0 + w, m[i].worker_cpu_ns += w;
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + w, busy + 3 * w);
  assert_int_equal(p.reserve.windows, 1);
  assert_true(fabs(p.reserve.others_last - 1.0) < 1e-6);
  assert_int_equal(p.reserve.cores, 1);
  /* member 1 leaves after half a window of work: still no others but the one core */
  m[1].worker_cpu_ns += w / 2;
  ff__coord_depart(&p, &m[1]);
  m[1] = (ff__coord_member){0};
  m[0].heartbeat_ns = t0 + 2 * w, m[0].worker_cpu_ns += w;
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + 2 * w, busy + 3 * w + w + w / 2 + w);
  assert_true(fabs(p.reserve.others_last - 1.0) < 1e-6);
  /* between reports a member's CPU is its rate times the time since */
  m[0].worker_cores = 2.0;
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + 3 * w, busy + 3 * w + w + w / 2 + w + 3 * w);
  assert_true(fabs(p.reserve.others_last - 1.0) < 1e-6);
  /* a joiner voids the window it joined in, which reopens at once when it
   * has reported twice, not a whole window later */
  int windows = p.reserve.windows;
  table_add(m, 2, 4, 1);
  m[2].reports = 1, m[2].heartbeat_ns = t0 + 3 * w;
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + 4 * w, busy + 20 * w);
  assert_int_equal(p.reserve.windows, windows);
  assert_false(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + 4 * w + 1));
  m[2].reports = 2;
  assert_true(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + 4 * w + 1));
  ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + 4 * w + 1, busy + 20 * w);
  assert_int_equal(p.reserve.windows, windows);
  assert_false(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + 4 * w + 2));
  /* a fixed reserve measures nothing */
  p.trainer_cores = 0;
  assert_false(ff__coord_window_due(&p, m, FF__COORD_MAX_MEMBERS, t0 + 100 * w));
}

static int fake_busy(void *ctx, uint64_t *out) {
  *out = *(const uint64_t *)ctx;
  return 0;
}

/* At start a window is void until every member has reported twice: the
 * report that brings the last member's second opens it at once, and the
 * first window closes FF__COORD_WINDOW_MS after that report, not after the
 * next one (a batch later, tens of ms at start). A stand-in trainer
 * starting beside the loaders gets its core that much sooner. */
static void the_report_that_makes_the_window_measurable_opens_it(void **state) {
  (void)state;
  ff__coord_params p = auto_params(2, 2);
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  uint64_t ms = 1000000ull, t = 1000 * ms, busy = 0, cpu[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    table_add(m, i, 2, 1), m[i].heartbeat_ns = t - 1000 * ms; /* joined a second ago */
  /* each ms: both cores busy, half a core of each member's workers (a core of others) */
  int order[] = {0, 0, 1, 1}; /* member 1's second report is the last one the window waits for */
  for (int k = 0; k < 4; k++) {
    t += ms, busy += 2 * ms, cpu[0] += ms / 2, cpu[1] += ms / 2;
    ff__coord_report_data r = HUNGRY;
    r.worker_cpu_ns = cpu[order[k]];
    ff__coord_take_report(&p, m, FF__COORD_MAX_MEMBERS, order[k], &r, t, fake_busy, &busy);
  }
  uint64_t opened = t;
  assert_int_equal(p.reserve.start_ns, opened); /* by that report */
  assert_true(m[0].in_window && m[1].in_window);
  uint64_t first = FF__COORD_WINDOW_MS * ms;
  for (int k = 0; k < 400 && p.reserve.windows == 0; k++) {
    t += ms, busy += 2 * ms, cpu[0] += ms / 2, cpu[1] += ms / 2;
    ff__coord_report_data r = HUNGRY;
    r.worker_cpu_ns = cpu[k % 2];
    ff__coord_take_report(&p, m, FF__COORD_MAX_MEMBERS, k % 2, &r, t, fake_busy, &busy);
  }
  assert_int_equal(p.reserve.windows, 1);
  if (t - opened < first || t - opened > first + ms) /* closed by the first report after it ended */
    fail_msg("the first window closed %.1f ms after it opened, not %.1f", (double)(t - opened) / 1e6,
             (double)first / 1e6);
  if (fabs(p.reserve.others_last - 1.0) > 0.05) fail_msg("others %.3f cores, not 1", p.reserve.others_last);
  assert_int_equal(p.reserve.cores, 1);
}

/* Between its reports a member's CPU is estimated from its rate, which
 * misses a member whose workers got more of the cores since (a peer's
 * parked): one that reported half a window ago at a core and ran two since
 * would read as half a core of others' CPU, a core kept for nobody. What
 * its workers published is its CPU: no others, no reserve. */
static void the_published_worker_cpu_replaces_the_estimate(void **state) {
  (void)state;
  uint64_t t0 = 1000000000ull, w = FF__COORD_WINDOW_MS * 1000000ull, busy = 5000000000ull,
           cpu = 7000000000ull;
  for (int published = 0; published < 2; published++) {
    ff__coord_params p = auto_params(4, 2);
    ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
    for (int i = 0; i < 2; i++) {
      table_add(m, i, 4, 2);
      m[i].reports = 3, m[i].heartbeat_ns = t0, m[i].worker_cpu_ns = cpu, m[i].interval_ns = 10000000;
      m[i].worker_cores = 1.0;
    }
    ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0, busy);        /* opens the window */
    m[0].heartbeat_ns = t0 + w, m[0].worker_cpu_ns = cpu + w;         /* a core, reported at the close */
    m[1].heartbeat_ns = t0 + w / 2, m[1].worker_cpu_ns = cpu + w / 2; /* a core, then two unreported */
    if (published) m[0].cpu_now_ns = cpu + w, m[1].cpu_now_ns = cpu + w / 2 + w;
    ff__coord_measure(&p, m, FF__COORD_MAX_MEMBERS, t0 + w, busy + w + w / 2 + w);
    double others = published ? 0.0 : 0.5;
    if (fabs(p.reserve.others_last - others) > 1e-6)
      fail_msg("published %d: others %.3f cores, not %.3f", published, p.reserve.others_last, others);
    assert_int_equal(p.reserve.cores, published ? 0 : 1);
  }
}

/* Twelve cores over eight hungry ranks: whole threads, 2 to the first four
 * slots and 1 to the other four, report after report — the budget exactly
 * (no core left idle, none run twice), differing by at most one, and the
 * extra always with the same members (the lowest slots). With a core kept
 * per trainer the 4 left go 1 each to the first four; the others run on
 * spares. */
static void twelve_cores_over_eight_ranks_split_two_and_one(void **state) {
  (void)state;
  for (int reserve = 0; reserve < 2; reserve++) {
    ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
    ff__coord_params p = params(12, 8);
    p.trainer_cores = reserve;
    ff__coord_params_normalise(&p);
    for (int i = 0; i < 8; i++)
      table_add(m, i, 12, 0);
    ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
    for (int i = 0; i < 8; i++)
      m[i].threads = m[i].target; /* the first allotments, as the joins take them */
    for (int r = 0; r < 10; r++) {
      int sum = 0;
      for (int i = 0; i < 8; i++) {
        uint64_t now = (uint64_t)(r * 8 + i + 1) * 10000000u;
        int t = ff__coord_rebalance(&p, m, FF__COORD_MAX_MEMBERS, i, &HUNGRY, now);
        assert_int_equal(t, (reserve ? 0 : 1) + (i < 4));
        sum += t;
      }
      assert_int_equal(sum, reserve ? 4 : 12);
      assert_int_equal(total(m), reserve ? 4 : 12);
    }
  }
}

/* Neutral members and members with slack get no burst; the idle cores of a
 * quiet member and the unallotted budget go to the stalled members in
 * proportion to their stall, within their ceilings; a neutral member that
 * held a burst keeps it first (hysteresis). */
static void bursts_go_to_the_stalled_in_proportion_to_their_stall(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(12, 4);
  for (int i = 0; i < 4; i++)
    table_add(m, i, 12, 3);
  const ff__coord_report_data s6 = {0.6, 0, 1, 0, 0}, s3 = {0.3, 0, 1, 0, 0};
  ff__coord_observe(&p, &m[0], &s6);
  ff__coord_observe(&p, &m[1], &s3);
  ff__coord_observe(&p, &m[2], &NEUTRAL);
  ff__coord_observe(&p, &m[3], &STALL);
  m[3].quiet = 1; /* its 3 threads idle: 3 to split 2 : 1 */
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 2);
  assert_int_equal(m[1].burst, 1);
  assert_int_equal(m[2].burst, 0);
  assert_int_equal(m[3].burst, 0);
  /* Member 0 stops stalling but its ring is not full: it keeps its 2 before
   * member 1 may grow. */
  ff__coord_observe(&p, &m[0], &NEUTRAL);
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[0].burst, 2);
  assert_int_equal(m[1].burst, 1);
  m[1].max_threads = 3; /* a ceiling bounds the burst */
  ff__coord_burst(&p, m, FF__COORD_MAX_MEMBERS);
  assert_int_equal(m[1].burst, 0);
}

/* One core per member stays with its trainer's own thread: 16 cores and 8
 * ranks leave 8 to the allotments (1 each, stalled or not); 2 cores and 2
 * ranks leave none (their loaders run on spares only, on the cores the
 * trainers leave idle), whatever the minimum, and also where only 1 member
 * was expected (LOCAL_WORLD_SIZE unset). The reserve counts max(members,
 * expected): the first rank of 8 does not take the other trainers' cores. */
static void the_allotments_leave_one_core_per_trainer(void **state) {
  (void)state;
  ff__coord_member m[FF__COORD_MAX_MEMBERS] = {0};
  ff__coord_params p = params(16, 8);
  p.trainer_cores = 1;
  p.min_threads = 0;
  for (int i = 0; i < 8; i++)
    table_add(m, i, 16, 1);
  assert_int_equal(ff__coord_guaranteed_budget(&p, m, FF__COORD_MAX_MEMBERS), 8);
  ff__coord_observe(&p, &m[0], &STALL);
  ff__coord_targets(&p, m, FF__COORD_MAX_MEMBERS);
  int sum = 0;
  for (int i = 0; i < 8; i++)
    sum += m[i].target;
  assert_int_equal(sum, 8);
  ff__coord_member one[FF__COORD_MAX_MEMBERS] = {0};
  table_add(one, 0, 16, 0);
  assert_int_equal(ff__coord_guaranteed_budget(&p, one, FF__COORD_MAX_MEMBERS), 8); /* 7 more expected */
  p = params(2, 2);
  p.trainer_cores = 1;
  p.min_threads = 0;
  ff__coord_member two[FF__COORD_MAX_MEMBERS] = {0};
  table_add(two, 0, 2, 0);
  table_add(two, 1, 2, 0);
  assert_int_equal(ff__coord_guaranteed_budget(&p, two, FF__COORD_MAX_MEMBERS), 0);
  ff__coord_observe(&p, &two[0], &STALL);
  ff__coord_targets(&p, two, FF__COORD_MAX_MEMBERS);
  assert_int_equal(two[0].target, 0);
  assert_int_equal(ff__coord_step(&p, two, FF__COORD_MAX_MEMBERS, 0), 0);
  ff__coord_burst(&p, two, FF__COORD_MAX_MEMBERS);
  assert_int_equal(two[0].burst, 0); /* nothing at normal priority: the trainers' cores are not idle cores */
  p.min_threads = 1;
  assert_int_equal(ff__coord_guaranteed_budget(&p, two, FF__COORD_MAX_MEMBERS), 0);
  p = params(2, 1);
  p.trainer_cores = 1;
  ff__coord_params_normalise(&p);
  assert_int_equal(ff__coord_reserved(&p, two, FF__COORD_MAX_MEMBERS), 2);
  assert_int_equal(ff__coord_guaranteed_budget(&p, two, FF__COORD_MAX_MEMBERS), 0);
  ff__coord_targets(&p, two, FF__COORD_MAX_MEMBERS);
  assert_int_equal(two[0].target + two[1].target, 0);
}

/* cgroup v2 cpu.max: "QUOTA PERIOD" in microseconds, or "max PERIOD". */
static void the_cpu_max_quota_rounds_up_to_whole_cores(void **state) {
  (void)state;
  assert_int_equal(ff__coord_cpu_max_cores("200000 100000\n"), 2);
  assert_int_equal(ff__coord_cpu_max_cores("150000 100000"), 2);
  assert_int_equal(ff__coord_cpu_max_cores("50000 100000\n"), 1);
  assert_int_equal(ff__coord_cpu_max_cores("max 100000\n"), 0);
  assert_int_equal(ff__coord_cpu_max_cores("100000"), 0);
  assert_int_equal(ff__coord_cpu_max_cores("-5 100000"), 0);
  assert_int_equal(ff__coord_cpu_max_cores(""), 0);
  int cores = ff__coord_node_cores();
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
  assert_in_range(cores, 1, CPU_COUNT(&set)); /* never above the affinity */
  ff__coord_params p;
  ff__coord_params_init(&p);
  assert_int_equal(p.budget_threads, cores);
}

/* Writes text to dir/name (ff_test_write). */
static void put(const char *dir, const char *name, const char *text) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ff_test_write(path, text, strlen(text));
}

/* A cgroup v2 tree made in a scratch folder: the job's cgroup /job/rank
 * has no quota of its own ("max"), its parent /job allows 3 cores and the
 * root 8. The tightest level wins and its folder is the busy source, whose
 * cpu.stat usage_usec (every process under the quota) is the node's busy
 * CPU; a cpu.stat without it, or none, falls back to /proc/stat. */
static void the_quota_is_the_tightest_of_the_cgroup_and_its_parents(void **state) {
  (void)state;
  char root[4096], job[4200], rank[4300], proc[4200], dir[4400];
  snprintf(root, sizeof root, "%s", ff_test_dir("coord-cgroup"));
  snprintf(job, sizeof job, "%s/job", root);
  snprintf(rank, sizeof rank, "%s/rank", job);
  snprintf(proc, sizeof proc, "%s/self-cgroup", root);
  ff_test_mkdir(rank);
  put(root, "cpu.max", "800000 100000\n");
  put(job, "cpu.max", "250000 100000\n");
  put(rank, "cpu.max", "max 100000\n");
  put(root, "self-cgroup", "1:name=systemd:/old\n0::/job/rank\n");
  assert_int_equal(ff__coord_cgroup_quota(proc, root, dir, sizeof dir), 3);
  assert_string_equal(dir, job);
  put(rank, "cpu.max", "100000 100000\n"); /* now the rank's own is the tightest */
  assert_int_equal(ff__coord_cgroup_quota(proc, root, dir, sizeof dir), 1);
  assert_string_equal(dir, rank);
  put(root, "self-cgroup", "1:name=systemd:/old\n"); /* no v2 hierarchy */
  assert_int_equal(ff__coord_cgroup_quota(proc, root, NULL, 0), 0);

  ff__coord_busy_source src, none = {{0}};
  snprintf(src.cpu_stat, sizeof src.cpu_stat, "%s/cpu.stat", job);
  put(job, "cpu.stat", "nr_periods 4\nusage_usec 1234567\nuser_usec 1000000\n");
  uint64_t busy = 0, proc_busy = 0;
  assert_int_equal(ff__coord_node_busy_ns(&src, &busy), 0);
  assert_true(busy == 1234567000ull);
  put(job, "cpu.stat", "user_usec 1000000\n"); /* no usage_usec: /proc/stat's */
  assert_int_equal(ff__coord_node_busy_ns(&src, &busy), 0);
  assert_int_equal(ff__coord_node_busy_ns(&none, &proc_busy), 0);
  assert_true(busy > 0 && busy <= proc_busy + 1000000000ull && proc_busy <= busy + 1000000000ull);
  snprintf(src.cpu_stat, sizeof src.cpu_stat, "%s/gone/cpu.stat", job); /* no cpu.stat: /proc/stat's */
  assert_int_equal(ff__coord_node_busy_ns(&src, &busy), 0);
  assert_true(busy > 0 && busy <= proc_busy + 1000000000ull && proc_busy <= busy + 1000000000ull);
}

/* /proc/stat's busy time counts user, nice, system, irq and softirq of the
 * CPUs in the affinity mask: not idle, iowait or a virtual machine's steal
 * (another guest's time), nor the total line or CPUs outside the mask. */
static void the_busy_time_of_proc_stat_leaves_out_steal(void **state) {
  (void)state;
  char dir[4096], path[4200], text[65536];
  snprintf(dir, sizeof dir, "%s", ff_test_dir("coord-stat"));
  snprintf(path, sizeof path, "%s/stat", dir);
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
  for (int steal = 0; steal <= 9000; steal += 9000) {
    size_t len = (size_t)snprintf(text, sizeof text, "cpu  900 90 180 9000 450 27 63 %d 0 0\n", steal);
    int cpus = 0, outside = -1;
    for (int c = 0; c < CPU_SETSIZE && len + 100 < sizeof text; c++) {
      if (!CPU_ISSET(c, &set)) {
        if (outside < 0) outside = c;
        continue;
      }
      len +=
          (size_t)snprintf(text + len, sizeof text - len, "cpu%d 100 10 20 1000 50 3 7 %d 0 0\n", c, steal);
      cpus++;
    }
    if (outside >= 0 && len + 100 < sizeof text)
      len += (size_t)snprintf(text + len, sizeof text - len, "cpu%d 5000 0 0 0 0 0 0 0 0 0\n", outside);
    snprintf(text + len, sizeof text - len, "intr 12345\nctxt 678\n");
    put(dir, "stat", text);
    uint64_t busy = 0;
    assert_int_equal(ff__coord_proc_stat_busy_ns(path, &busy), 0);
    assert_true(busy == 140ull * (uint64_t)cpus * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK)));
  }
  uint64_t busy = 7;
  put(dir, "stat", "cpu  1 2 3 4 5 6 7 8 0 0\nintr 1\n"); /* no per-CPU line (the total is not cpu1) */
  assert_int_equal(ff__coord_proc_stat_busy_ns(path, &busy), -1);
  snprintf(path, sizeof path, "%s/none", dir);
  assert_int_equal(ff__coord_proc_stat_busy_ns(path, &busy), -1);
  assert_true(busy == 7);
}

/* ---- names ---- */

static void group_names_are_sanitised_and_taken_from_the_environment(void **state) {
  (void)state;
  char buf[256], want[256];
  snprintf(want, sizeof want, "/fusionflow-%lu-job_7_a", (unsigned long)getuid());
  assert_int_equal(ff__coord_shm_name("job_7_a", buf, sizeof buf), FF_OK);
  assert_string_equal(buf, want); /* a plain name is kept as it is */
  /* Names that sanitise alike stay apart, readable: the sanitised name, '~', a hash. */
  static const char *const alike[] = {"job 7/a", "job/7/a", "job 7_a", "job_7/a"};
  char seen[4][256];
  for (int i = 0; i < 4; i++) {
    assert_int_equal(ff__coord_shm_name(alike[i], seen[i], sizeof seen[i]), FF_OK);
    assert_int_equal(strncmp(seen[i], want, strlen(want)), 0);
    assert_int_equal(seen[i][strlen(want)], '~');
    assert_int_equal(strlen(seen[i]), strlen(want) + 17);
    assert_string_not_equal(seen[i], want);
    for (int j = 0; j < i; j++) assert_string_not_equal(seen[i], seen[j]);
    assert_int_equal(ff__coord_shm_name(alike[i], buf, sizeof buf), FF_OK);
    assert_string_equal(buf, seen[i]); /* the same name, the same segment */
  }
  assert_int_equal(ff__coord_shm_name("", buf, sizeof buf), FF_EINVAL);
  char longname[FF__COORD_GROUP_MAX + 1];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  assert_int_equal(ff__coord_shm_name(longname, buf, sizeof buf), FF_EINVAL);

  unsetenv("FF_NODE_GROUP");
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("MASTER_PORT");
  assert_int_equal(ff__coord_default_group(buf, sizeof buf), 0);
  ff__coord *c = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join(NULL, 4, &c, &err), FF_EINVAL);
  assert_null(c);
  assert_non_null(strstr(err.msg, "FF_NODE_GROUP"));
  setenv("MASTER_PORT", "29500", 1);
  assert_int_equal(ff__coord_default_group(buf, sizeof buf), 1);
  assert_string_equal(buf, "port-29500");
  setenv("TORCHELASTIC_RUN_ID", "abc", 1);
  assert_int_equal(ff__coord_default_group(buf, sizeof buf), 1);
  assert_string_equal(buf, "torchelastic-abc");
  setenv("FF_NODE_GROUP", "auto", 1); /* the torchrun job's group */
  assert_int_equal(ff__coord_default_group(buf, sizeof buf), 1);
  assert_string_equal(buf, "torchelastic-abc");
  setenv("FF_NODE_GROUP", "mine", 1);
  assert_int_equal(ff__coord_default_group(buf, sizeof buf), 1);
  assert_string_equal(buf, "mine");
  unsetenv("FF_NODE_GROUP");
  unsetenv("TORCHELASTIC_RUN_ID");
  unsetenv("MASTER_PORT");

  assert_int_equal(ff__coord_join("g", 0, &c, &err), FF_EINVAL);
  assert_int_equal(ff__coord_join("g", 1, NULL, &err), FF_EINVAL);
  ff__coord_leave(NULL);
}

/* ---- member processes ---- */

static char group[64];
static char shm_name[256];
static char made[16][256]; /* the shm names of the current test's groups, unlinked after it */
static int num_made;

/* A fresh group (and its shm name) per test. */
static void new_group(const char *tag) {
  static int counter;
  snprintf(group, sizeof group, "ut-%s-%d-%d-%llu", tag, (int)getpid(), counter++,
           (unsigned long long)(ff__now_ns() % 1000000007ull));
  assert_int_equal(ff__coord_shm_name(group, shm_name, sizeof shm_name), FF_OK);
  assert_true(num_made < 16);
  snprintf(made[num_made++], sizeof made[0], "%s", shm_name);
}

static int shm_exists(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

static int segment_exists(void) { return shm_exists(shm_name); }

typedef struct command {
  char op; /* J join, R report, L leave, H hold the lock and die, P hold the lock and pause, X die,
               C join-report-leave 100 times */
  ff__coord_report_data d;
} command;

typedef struct answer {
  int status;
  int threads; /* what the member runs: allotment + burst */
  int allot;   /* its allotment (without the burst) */
  int members; /* live members in the table after the request */
  int total;   /* their allotments together */
} answer;

typedef struct child {
  pid_t pid;
  int to, from; /* pipe ends: commands to it, answers from it */
} child;

#define MAX_CHILDREN 4
static child kids[MAX_CHILDREN];
static int num_kids;

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    c += w;
    n -= (size_t)w;
  }
}

/* Reads n bytes within timeout_ms; returns 0 on EOF or timeout. */
static int read_all(int fd, void *p, size_t n, int timeout_ms) {
  char *c = p;
  while (n) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int rc = poll(&pfd, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return 0;
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

static void fill_table_view(ff__coord *c, answer *a) {
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  int n = 0;
  if (ff__coord_snapshot(c, m, &n, NULL) != FF_OK) return;
  a->members = n;
  a->total = 0;
  for (int i = 0; i < n; i++) {
    a->total += m[i].threads;
    if (m[i].pid == (int32_t)getpid()) a->allot = m[i].threads;
  }
}

static void child_main(int in, int out, const ff__coord_params *p, int max_threads) {
  alarm(120); /* never outlive a broken test */
  ff__coord *c = NULL;
  command cmd;
  while (read_all(in, &cmd, sizeof cmd, 120000)) {
    answer a = {0};
    ff__error err = {0};
    switch (cmd.op) {
    case 'J':
      a.status = ff__coord_join_params(group, max_threads, p, &c, &err);
      if (c) a.threads = ff__coord_threads(c);
      break;
    case 'R': a.status = ff__coord_report(c, &cmd.d, &a.threads); break;
    case 'L':
      ff__coord_leave(c);
      c = NULL;
      break;
    case 'H': ff__coord_test_hold_lock(c); _exit(0);
    case 'P':
      ff__coord_test_hold_lock(c);
      write_all(out, &a, sizeof a);
      for (;;)
        pause();
    case 'X': _exit(0);
    case 'C': /* churn: join, report and leave many times, racing the other members */
      for (int i = 0; i < 100 && a.status == FF_OK; i++) {
        ff__coord *t = NULL;
        a.status = ff__coord_join_params(group, max_threads, p, &t, &err);
        if (a.status == FF_OK) a.status = ff__coord_report(t, &cmd.d, &a.threads);
        if (a.status == FF_OK && (a.threads < 1 || a.threads > max_threads)) a.status = FF_EINTERNAL;
        ff__coord_leave(t);
      }
      break;
    }
    if (c) fill_table_view(c, &a);
    write_all(out, &a, sizeof a);
  }
  ff__coord_leave(c);
  _exit(0);
}

static child *spawn(const ff__coord_params *p, int max_threads) {
  assert_true(num_kids < MAX_CHILDREN);
  int to[2], from[2];
  assert_int_equal(pipe(to), 0);
  assert_int_equal(pipe(from), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    for (int i = 0; i < num_kids; i++) { /* siblings' pipes: their EOF must not wait for us */
      close(kids[i].to);
      close(kids[i].from);
    }
    close(to[1]);
    close(from[0]);
    child_main(to[0], from[1], p, max_threads);
  }
  close(to[0]);
  close(from[1]);
  child *k = &kids[num_kids++];
  *k = (child){pid, to[1], from[0]};
  return k;
}

static answer ask(child *k, char op, const ff__coord_report_data *d) {
  command cmd = {op, d ? *d : (ff__coord_report_data){0}};
  answer a;
  write_all(k->to, &cmd, sizeof cmd);
  if (!read_all(k->from, &a, sizeof a, 30000)) fail_msg("member %d did not answer '%c'", (int)k->pid, op);
  return a;
}

static void reap(child *k) {
  int status;
  while (waitpid(k->pid, &status, 0) < 0 && errno == EINTR) {
  }
}

static void kill_child(child *k) {
  kill(k->pid, SIGKILL);
  reap(k);
  close(k->to);
  close(k->from);
  k->to = k->from = -1;
}

/* Closes every pipe (the children leave and exit) and waits for them. */
static void finish_children(void) {
  for (int i = 0; i < num_kids; i++) {
    if (kids[i].to < 0) continue;
    close(kids[i].to);
    close(kids[i].from);
  }
  for (int i = 0; i < num_kids; i++)
    if (kids[i].to >= 0) reap(&kids[i]);
  num_kids = 0;
}

/* After every test, passed or failed midway: its members still running are
 * killed and its groups' segments unlinked, so that no run of the tests
 * leaves shared memory behind. */
static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < num_kids; i++)
    if (kids[i].to >= 0) kill_child(&kids[i]);
  num_kids = 0;
  for (int i = 0; i < num_made; i++)
    shm_unlink(made[i]);
  num_made = 0;
  return 0;
}

static void three_processes_move_threads_from_slack_to_stall_and_survive_a_kill(void **state) {
  (void)state;
  new_group("three");
  ff__coord_params p = params(12, 3);
  child *stall = spawn(&p, 12), *slack = spawn(&p, 12), *neutral = spawn(&p, 12);
  for (int i = 0; i < 3; i++) {
    answer a = ask(&kids[i], 'J', NULL);
    assert_int_equal(a.status, FF_OK);
    assert_int_equal(a.threads, 4);
    assert_int_equal(a.members, i + 1);
  }
  /* The same trace of allotments as the pure test: the processes are asked
   * in turn. On top of its allotment the stalled member runs the cores the
   * others leave idle (the lender keeps 20% of its threads busy, the
   * neutral member 90%): 12 - 5 - 3 x 0.2 - 4 x 0.9 = 2.8, so 3 more in
   * round 2; then 2.0 (2) and 1.2 (1). */
  static const int want[4][3] = {{4, 3, 4}, {5, 2, 4}, {6, 1, 4}, {7, 1, 4}};
  static const int runs[4] = {4, 8, 8, 8};
  for (int r = 0; r < 8; r++) {
    answer a = ask(stall, 'R', &STALL), b = ask(slack, 'R', &SLACK), c = ask(neutral, 'R', &NEUTRAL);
    const int *w = want[r < 4 ? r : 3];
    assert_int_equal(a.allot, w[0]);
    assert_int_equal(a.threads, runs[r < 4 ? r : 3]);
    assert_int_equal(b.threads, w[1]);
    assert_int_equal(c.threads, w[2]);
    assert_true(a.total <= 12 && b.total <= 12 && c.total <= 12);
    assert_int_equal(c.members, 3);
  }

  /* kill -9 the neutral member mid-run: its 4 threads return to the pool
   * and go to the stalled member's allotment, one per report (7 + 4 = 11;
   * the lender keeps its minimum), and into its burst at once (12). */
  kill_child(neutral);
  for (int r = 0; r < 8; r++) {
    answer a = ask(stall, 'R', &STALL), b = ask(slack, 'R', &SLACK);
    assert_int_equal(a.status, FF_OK);
    assert_int_equal(a.allot, r < 4 ? 8 + r : 11);
    assert_int_equal(a.threads, 12);
    assert_int_equal(b.threads, 1);
    assert_int_equal(a.members, 2);
    assert_true(a.total <= 12 && b.total <= 12);
  }
  finish_children();
  assert_false(segment_exists()); /* the last to leave unlinked it */
}

/* A member whose trainer stops asking for batches (here: it stops
 * reporting) is quiet once it was silent past quiet_ms (50 ms; its own
 * interval is a few ms): the stalled peer's next report runs its cores.
 * Its allotment stays its own: when it reports again it runs it at once and
 * the peer's burst is gone at the peer's next report. The only timing
 * assumption is that sleeping 300 ms outlasts 50 ms. */
static void a_member_that_stops_consuming_releases_its_cores_to_a_stalled_peer(void **state) {
  (void)state;
  new_group("quiet");
  ff__coord_params p = params(4, 2);
  p.quiet_ms = 50;
  child *a = spawn(&p, 4), *b = spawn(&p, 4);
  ask(a, 'J', NULL);
  ask(b, 'J', NULL);
  for (int r = 0; r < 3; r++) { /* both hungry: 2 each, no idle core */
    assert_int_equal(ask(a, 'R', &STALL).threads, 2);
    assert_int_equal(ask(b, 'R', &STALL).threads, 2);
  }
  struct timespec ts = {0, 300000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
  answer r = ask(a, 'R', &STALL); /* the first report after b went quiet */
  assert_int_equal(r.threads, 4);
  assert_int_equal(r.allot, 2);
  assert_int_equal(r.total, 4);
  r = ask(b, 'R', &STALL);
  assert_int_equal(r.threads, 2); /* back: its allotment at once */
  assert_int_equal(ask(a, 'R', &STALL).threads, 2);
  finish_children();
  assert_false(segment_exists());
}

/* `fusionflow node status` reads the table without joining: the member
 * count stays, the states and bursts are the members'. */
static void the_table_can_be_read_without_joining(void **state) {
  (void)state;
  new_group("peek");
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  int n = -1;
  ff__error err = {0};
  assert_int_equal(ff__coord_peek(group, m, &n, NULL, &err), FF_EEMPTY); /* no such group yet */
  assert_non_null(strstr(err.msg, group));
  ff__coord_params p = params(4, 2);
  child *a = spawn(&p, 4), *b = spawn(&p, 4);
  ask(a, 'J', NULL);
  ask(b, 'J', NULL);
  ask(b, 'R', &SLACK);
  /* b keeps its 2 (it had nobody to lend to when it reported) but runs
   * 20% of them: a runs the idle 4 - 2 - 0.4 = 1.6 cores as a burst of 2. */
  assert_int_equal(ask(a, 'R', &STALL).threads, 4);
  ff__coord_params got;
  assert_int_equal(ff__coord_peek(group, m, &n, &got, &err), FF_OK);
  assert_int_equal(n, 2);
  assert_int_equal(got.budget_threads, 4);
  assert_string_equal(ff__coord_member_state(&got, &m[0], ff__now_ns()), "stalled");
  assert_string_equal(ff__coord_member_state(&got, &m[1], ff__now_ns()), "slack");
  assert_int_equal(m[0].threads, 2);
  assert_int_equal(m[0].burst, 2);
  /* b killed: the table still holds its slot until a member reports, and says it is gone */
  kill_child(b);
  assert_int_equal(ff__coord_peek(group, m, &n, &got, &err), FF_OK);
  assert_int_equal(n, 2);
  assert_string_equal(ff__coord_member_state(&got, &m[1], ff__now_ns()), "gone");
  assert_string_equal(ff__coord_member_state(&got, &m[0], ff__now_ns()), "stalled");
  assert_int_equal(ask(a, 'R', &STALL).members, 1);
  finish_children();
  assert_false(segment_exists());
}

static void a_member_that_leaves_frees_its_slot_and_the_group_can_start_again(void **state) {
  (void)state;
  new_group("leave");
  ff__coord_params p = params(8, 2);
  child *a = spawn(&p, 8), *b = spawn(&p, 8);
  assert_int_equal(ask(a, 'J', NULL).threads, 4);
  assert_int_equal(ask(b, 'J', NULL).threads, 4);
  answer r = ask(b, 'L', NULL);
  assert_int_equal(r.status, FF_OK);
  for (int i = 0; i < 6; i++) { /* b's share is free: a, stalling, runs it at once and owns it in 4 reports */
    r = ask(a, 'R', &STALL);
    assert_int_equal(r.members, 1);
    assert_int_equal(r.allot, i < 4 ? 5 + i : 8);
    assert_int_equal(r.threads, 8);
  }
  assert_true(segment_exists());
  ask(a, 'L', NULL);
  assert_false(segment_exists());

  /* Joining again after all left creates the segment afresh. */
  r = ask(b, 'J', NULL);
  assert_int_equal(r.status, FF_OK);
  assert_int_equal(r.members, 1);
  assert_int_equal(r.threads, 4);
  assert_true(segment_exists());
  finish_children();
  assert_false(segment_exists());
}

/* A member that stops (SIGSTOP) without dying is reclaimed once its
 * heartbeat is older than the timeout; when it resumes, its next report
 * joins again and the threads flow back. The only timing assumption is that
 * sleeping 1.5 s outlasts a 1 s timeout. */
static void a_silent_member_is_reclaimed_and_rejoins_when_it_reports_again(void **state) {
  (void)state;
  new_group("silent");
  ff__coord_params p = params(8, 2);
  p.heartbeat_timeout_ms = 1000;
  child *a = spawn(&p, 8), *b = spawn(&p, 8);
  ask(a, 'J', NULL);
  ask(b, 'J', NULL);
  kill(b->pid, SIGSTOP);
  struct timespec ts = {1, 500000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
  for (int i = 0; i < 6; i++) {
    answer r = ask(a, 'R', &STALL);
    assert_int_equal(r.members, 1);
    assert_int_equal(r.allot, i < 4 ? 5 + i : 8);
    assert_int_equal(r.threads, 8);
  }
  kill(b->pid, SIGCONT);
  answer r = ask(b, 'R', &NEUTRAL);
  assert_int_equal(r.status, FF_OK);
  assert_int_equal(r.members, 2);
  assert_int_equal(r.threads, 1); /* the pool is empty: its minimum, for now */
  for (int i = 0; i < 12; i++) {
    ask(a, 'R', &STALL);
    r = ask(b, 'R', &NEUTRAL);
  }
  assert_int_equal(r.threads, 4);
  assert_int_equal(r.total, 8);
  finish_children();
  assert_false(segment_exists());
}

static void a_member_holding_the_lock_delays_reports_and_its_death_frees_it(void **state) {
  (void)state;
  new_group("lock");
  ff__coord_params p = params(4, 2);
  p.lock_timeout_ms = 50;
  ff__coord *me = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &p, &me, &err), FF_OK);
  assert_int_equal(ff__coord_threads(me), 2);

  /* A forked copy of the handle is not a member. */
  pid_t pid = fork();
  if (pid == 0) {
    int t;
    _exit(ff__coord_report(me, &STALL, &t) == FF_EINVAL ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  /* Stopped while holding the lock: reports answer the last allotment. */
  child *k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).threads, 2);
  ask(k, 'P', NULL);
  int t = -1;
  assert_int_equal(ff__coord_report(me, &STALL, &t), FF_OK);
  assert_int_equal(t, 2);

  /* Killed while holding it: the next locker gets EOWNERDEAD and recovers. */
  kill_child(k);
  assert_int_equal(ff__coord_report(me, &STALL, &t), FF_OK);
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  int n = 0;
  assert_int_equal(ff__coord_snapshot(me, m, &n, NULL), FF_OK);
  assert_int_equal(n, 1);
  assert_int_equal(t, 4); /* the dead member's cores came back (its allotment: one per report) */
  assert_int_equal(m[0].threads, 3);

  /* Died holding it without a kill: the same. */
  k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).status, FF_OK);
  command cmd = {'H', {0, 0, 0, 0, 0}};
  write_all(k->to, &cmd, sizeof cmd);
  reap(k);
  close(k->to);
  close(k->from);
  k->to = k->from = -1;
  assert_int_equal(ff__coord_report(me, &STALL, &t), FF_OK);
  assert_int_equal(ff__coord_snapshot(me, m, &n, NULL), FF_OK);
  assert_int_equal(n, 1);
  num_kids = 0;
  ff__coord_leave(me);
  assert_false(segment_exists());
}

/* The watchdog of the next test: reports that each wait out the stopped
 * holder would take 100 x lock_timeout_ms (20 s); it fires after 5 s. */
static pid_t stopped_holder;

static void watchdog_fired(int sig) {
  (void)sig;
  static const char msg[] = "watchdog: the reports kept waiting for a stopped lock holder\n";
  if (write(2, msg, sizeof msg - 1) < 0) {
  }
  if (stopped_holder > 0) kill(stopped_holder, SIGKILL);
  _exit(1);
}

/* A member stopped (SIGSTOP) inside its critical section: the first report
 * of the others waits lock_timeout_ms for it, the following ones only try
 * the lock, so the group is not slowed per batch; each answers the last
 * allotment. When the holder dies, the next report recovers the table. */
static void a_stopped_lock_holder_costs_one_wait_not_one_per_report(void **state) {
  (void)state;
  new_group("stopped");
  ff__coord_params p = params(4, 2);
  p.lock_timeout_ms = 200;
  ff__coord *me = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &p, &me, &err), FF_OK);
  child *k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).threads, 2);
  ask(k, 'P', NULL);
  assert_int_equal(kill(k->pid, SIGSTOP), 0);

  stopped_holder = k->pid;
  signal(SIGALRM, watchdog_fired);
  alarm(5);
  for (int i = 0; i < 100; i++) {
    int t = -1;
    assert_int_equal(ff__coord_report(me, &STALL, &t), FF_OK);
    assert_int_equal(t, 2);
  }
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  stopped_holder = 0;

  kill_child(k);
  int t = -1;
  assert_int_equal(ff__coord_report(me, &STALL, &t), FF_OK);
  assert_int_equal(t, 4); /* the lock is taken again: the dead member's cores came back */
  num_kids = 0;
  ff__coord_leave(me);
  assert_false(segment_exists());
}

/* The segment of the current group, mapped to be damaged. */
static ff__coord_segment *map_segment(void) {
  int fd = shm_open(shm_name, O_RDWR, 0);
  assert_true(fd >= 0);
  ff__coord_segment *g = mmap(NULL, sizeof *g, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(g != MAP_FAILED);
  return g;
}

/* A member's workers publish their CPU in its slot of the segment, where
 * the report that measures a window reads it. A handle of another process
 * publishes nothing. */
static void a_member_publishes_its_worker_cpu_in_its_slot(void **state) {
  (void)state;
  new_group("publish");
  ff__coord_params q = auto_params(4, 2);
  ff__coord *me = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &q, &me, &err), FF_OK);
  ff__coord_segment *g = map_segment();
  int slot = -1;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    if (g->slot[i].pid == (int32_t)getpid()) slot = i;
  assert_true(slot >= 0);
  assert_true(atomic_load(&g->worker_cpu_now[slot]) == 0);
  ff__coord_publish_cpu(me, 123456789ull, 1);
  assert_true(atomic_load(&g->worker_cpu_now[slot]) == 123456789ull);
  assert_true(atomic_load(&g->workers_parked[slot]) == 1);
  ff__coord_publish_cpu(NULL, 5, 1); /* no handle: nothing */
  pid_t kid = fork();
  if (kid == 0) { /* a forked child holds a copy of the handle, not the membership */
    ff__coord_publish_cpu(me, 1, 0);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(kid, &status, 0), kid);
  assert_true(atomic_load(&g->worker_cpu_now[slot]) == 123456789ull);
  assert_true(atomic_load(&g->workers_parked[slot]) == 1);
  int threads = -1, n = 0;
  ff__coord_member seen[FF__COORD_MAX_MEMBERS];
  assert_int_equal(ff__coord_report(me, &STALL, &threads), FF_OK); /* the first report opens a window */
  assert_int_equal(ff__coord_snapshot(me, seen, &n, NULL), FF_OK);
  assert_int_equal(n, 1);
  assert_true(seen[0].cpu_now_ns == 123456789ull);
  assert_int_equal(seen[0].parked, 1);
  ff__coord_leave(me);
  munmap(g, sizeof *g);
}

typedef struct damage_case {
  const char *what;
  void (*damage)(ff__coord_segment *g);
} damage_case;

static void zero_budget(ff__coord_segment *g) { g->params.budget_threads = 0; }
static void negative_min(ff__coord_segment *g) { g->params.min_threads = -7; }
static void nan_alpha(ff__coord_segment *g) { g->params.alpha = NAN; }
static void huge_members(ff__coord_segment *g) { g->members = 100000; }
static void wrong_version(ff__coord_segment *g) { g->version = 77; }
static void wrong_magic(ff__coord_segment *g) { g->magic = 0; }
static void wrong_size(ff__coord_segment *g) { g->size_bytes = 12; }
/* A slot no reclaim frees: a live pid (init), a heartbeat in the far future
 * and an allotment far beyond its ceiling. */
static void immortal_hog(ff__coord_segment *g) {
  g->slot[63] = (ff__coord_member){
      .pid = 1, .max_threads = 4, .threads = 100000, .ticket = 9, .heartbeat_ns = UINT64_MAX / 2};
}
static void nan_signal(ff__coord_segment *g) { g->slot[0].stall_share = NAN; }

typedef struct report_call {
  ff__coord *c;
  int threads;
  ff_status st;
} report_call;

static void call_report(void *arg) {
  report_call *r = arg;
  r->st = ff__coord_report(r->c, &STALL, &r->threads);
}

typedef struct join_call {
  ff__coord *c;
  ff_status st;
  ff__error err;
} join_call;

static ff__coord_params damage_params;

static void call_join(void *arg) {
  join_call *j = arg;
  j->st = ff__coord_join_params(group, 4, &damage_params, &j->c, &j->err);
}

/* A damaged segment (a field out of range, another build's header) is never
 * obeyed: a member already in it runs alone on all its threads, with one
 * line on stderr naming the segment; a joiner is refused, with a message
 * naming it. */
static void a_damaged_segment_is_left_with_a_warning_not_obeyed(void **state) {
  (void)state;
  static const damage_case cases[] = {
      {"budget_threads", zero_budget},
      {"min_threads", negative_min},
      {"alpha", nan_alpha},
      {"members", huge_members},
      {"version", wrong_version},
      {"magic", wrong_magic},
      {"size", wrong_size},
      {"slot", immortal_hog},
      {"slot", nan_signal},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    new_group("damaged");
    damage_params = params(4, 2);
    ff__coord *me = NULL;
    ff__error err = {0};
    assert_int_equal(ff__coord_join_params(group, 4, &damage_params, &me, &err), FF_OK);
    assert_int_equal(ff__coord_threads(me), 2);
    ff__coord_segment *g = map_segment();
    cases[i].damage(g);

    join_call j = {0};
    const char *out = ff_test_stderr_of(call_join, &j);
    if (j.st != FF_EIO) fail_msg("%s: a joiner was not refused (%d)", cases[i].what, j.st);
    assert_null(j.c);
    if (!strstr(j.err.msg, shm_name) || *out) /* its loader says it */
      fail_msg("%s: the joiner is not told in its message alone: '%s' / '%s'", cases[i].what, j.err.msg, out);

    report_call r = {me, -1, FF_OK};
    out = ff_test_stderr_of(call_report, &r);
    assert_int_equal(r.st, FF_OK);
    if (r.threads != 4) fail_msg("%s: the member runs %d threads, not all its 4", cases[i].what, r.threads);
    if (!strstr(out, shm_name) || strchr(out, '\n') != out + strlen(out) - 1)
      fail_msg("%s: no one-line warning for the member: '%s'", cases[i].what, out);
    out = ff_test_stderr_of(call_report, &r); /* alone from now on, and said once */
    assert_int_equal(r.threads, 4);
    assert_string_equal(out, "");

    munmap(g, sizeof *g);
    ff__coord_leave(me);
    shm_unlink(shm_name);
  }
}

/* Four processes join a new group at once: one creates the segment, the
 * others wait for it; with LOCAL_WORLD_SIZE-like expected_members each gets
 * its fair share whatever the order. Then they join and leave over and over
 * at once (creation, closing and unlinking racing each other): every call
 * succeeds and the segment is gone at the end. */
static void members_joining_and_leaving_at_once_all_get_answers(void **state) {
  (void)state;
  new_group("race");
  ff__coord_params p = params(8, 4);
  for (int i = 0; i < 4; i++)
    spawn(&p, 8);
  command cmd = {'J', {0, 0, 0, 0, 0}};
  for (int i = 0; i < 4; i++)
    write_all(kids[i].to, &cmd, sizeof cmd);
  for (int i = 0; i < 4; i++) {
    answer a;
    if (!read_all(kids[i].from, &a, sizeof a, 30000)) fail_msg("member %d did not answer", i);
    assert_int_equal(a.status, FF_OK);
    assert_int_equal(a.threads, 2);
    assert_true(a.total <= 8);
  }
  answer a = ask(&kids[0], 'R', &NEUTRAL);
  assert_int_equal(a.members, 4);
  assert_int_equal(a.total, 8);
  for (int i = 0; i < 4; i++)
    ask(&kids[i], 'L', NULL);
  assert_false(segment_exists());

  cmd = (command){'C', STALL};
  for (int i = 0; i < 4; i++)
    write_all(kids[i].to, &cmd, sizeof cmd);
  for (int i = 0; i < 4; i++) {
    if (!read_all(kids[i].from, &a, sizeof a, 60000)) fail_msg("member %d did not answer", i);
    assert_int_equal(a.status, FF_OK);
  }
  finish_children();
  assert_false(segment_exists());
}

/* Every member of an earlier run crashed: the segment is still there, and
 * the next joiner starts it afresh with its own parameters. */
static void a_segment_of_a_crashed_run_is_reinitialised(void **state) {
  (void)state;
  new_group("stale");
  ff__coord_params p = params(4, 1);
  child *k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).threads, 4);
  command cmd = {'X', {0, 0, 0, 0, 0}};
  write_all(k->to, &cmd, sizeof cmd);
  reap(k);
  close(k->to);
  close(k->from);
  num_kids = 0;
  assert_true(segment_exists());

  ff__coord_params q = params(6, 1);
  ff__coord *c = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 8, &q, &c, &err), FF_OK);
  ff__coord_member m[FF__COORD_MAX_MEMBERS];
  ff__coord_params seen;
  int n = 0;
  assert_int_equal(ff__coord_snapshot(c, m, &n, &seen), FF_OK);
  assert_int_equal(n, 1);
  assert_int_equal(seen.budget_threads, 6);
  assert_int_equal(ff__coord_threads(c), 6);
  ff__coord_leave(c);
  assert_false(segment_exists());
}

/* A creator that died between shm_open and ftruncate leaves an empty
 * object: joiners wait init_timeout_ms, then replace it. An object of
 * another size is another build's: refused, not overwritten. */
static void a_segment_left_unsized_is_replaced_and_a_foreign_one_refused(void **state) {
  (void)state;
  new_group("unsized");
  int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  close(fd);
  ff__coord_params p = params(4, 1);
  p.init_timeout_ms = 50;
  ff__coord *c = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &p, &c, &err), FF_OK);
  assert_int_equal(ff__coord_threads(c), 4);
  ff__coord_leave(c);
  assert_false(segment_exists());

  fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 100), 0);
  close(fd);
  c = NULL;
  assert_int_equal(ff__coord_join_params(group, 4, &p, &c, &err), FF_EIO);
  assert_null(c);
  assert_non_null(strstr(err.msg, "another fusionflow build"));
  shm_unlink(shm_name);
}

/* /dev/shm is writable by every user: a FIFO under a group's name (an
 * open for reading would wait for a writer for good) or another user's
 * file is refused at once, by a join and by `node status`, with the reason. */
static void a_fifo_or_another_users_file_under_the_name_is_refused_at_once(void **state) {
  (void)state;
  new_group("fifo");
  char path[300];
  snprintf(path, sizeof path, "/dev/shm%s", shm_name);
  assert_int_equal(mkfifo(path, 0600), 0);
  alarm(20); /* a join that blocks fails the test instead of hanging it */
  ff__coord_params p = params(4, 1);
  ff__coord *c = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &p, &c, &err), FF_EIO);
  assert_null(c);
  assert_non_null(strstr(err.msg, "is a FIFO, not shared memory"));
  assert_int_equal(ff__coord_peek(group, NULL, NULL, NULL, &err), FF_EIO);
  assert_non_null(strstr(err.msg, "is a FIFO, not shared memory"));
  alarm(0);
  assert_int_equal(unlink(path), 0);

  int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL, 0666);
  assert_true(fd >= 0);
  int chowned = fchown(fd, getuid() + 1, (gid_t)-1) == 0; /* only a privileged test run can */
  close(fd);
  if (chowned) {
    assert_int_equal(ff__coord_join_params(group, 4, &p, &c, &err), FF_EIO);
    assert_null(c);
    assert_non_null(strstr(err.msg, "belongs to another user"));
  }
  shm_unlink(shm_name);
}

/* A group whose members all died without leaving (kill -9, a crash) is
 * never joined again under its name (every run picks a fresh one): a join
 * of any other group removes its segment, once its members stayed silent
 * past their heartbeat timeout. A group with a live member keeps its
 * segment, even with that member stopped and as silent. */
static void a_group_whose_members_died_is_removed_by_the_next_join_of_another(void **state) {
  (void)state;
  ff__coord_params p = params(4, 1);
  p.heartbeat_timeout_ms = 200;
  new_group("dead");
  char dead[256];
  snprintf(dead, sizeof dead, "%s", shm_name);
  child *k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).status, FF_OK);
  kill_child(k); /* it never leaves */
  assert_true(shm_exists(dead));

  new_group("asleep");
  char stopped[256];
  snprintf(stopped, sizeof stopped, "%s", shm_name);
  child *s = spawn(&p, 4);
  assert_int_equal(ask(s, 'J', NULL).status, FF_OK);
  assert_int_equal(kill(s->pid, SIGSTOP), 0);
  struct timespec ts = {0, 500000000L}; /* past the 200 ms heartbeat timeout */
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }

  new_group("joiner");
  ff__coord *c = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(group, 4, &p, &c, &err), FF_OK);
  assert_false(shm_exists(dead));
  assert_true(shm_exists(stopped));
  ff__coord_leave(c);
  assert_false(segment_exists());

  assert_int_equal(kill(s->pid, SIGCONT), 0);
  finish_children(); /* the stopped member leaves, the last of its group */
  assert_false(shm_exists(stopped));
}

/* Runs `fusionflow node status auto --json` (FF_CLI) with env prefixed;
 * returns its exit status and its stdout and stderr in out. */
static int status_auto(const char *env, char *out, size_t cap) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "env -u TORCHELASTIC_RUN_ID -u MASTER_PORT %s %s node status auto --json 2>&1",
           env, getenv("FF_CLI"));
  return ff_test_run(cmd, out, cap);
}

/* `fusionflow node status GROUP --watch` ends with the group: once its last
 * member left it says so and exits 0. */
static void node_status_watch_ends_with_the_group(void **state) {
  (void)state;
  if (!getenv("FF_CLI")) skip();
  new_group("watch");
  ff__coord_params p = params(4, 1);
  child *k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).status, FF_OK);
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "%s node status %s --watch --interval 20 2>&1", getenv("FF_CLI"), group);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  char line[512];
  assert_non_null(fgets(line, sizeof line, f)); /* its first table is out */
  ask(k, 'L', NULL); /* the last member leaves (the command holds the pipes' ends: no EOF ends it) */
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  int st = pclose(f);
  finish_children();
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(out, "ended"))
    fail_msg("watch: status %d, output '%s'", st, out);

  /* a group whose members were killed ends too, and its header counts no one */
  new_group("watch-killed");
  k = spawn(&p, 4);
  assert_int_equal(ask(k, 'J', NULL).status, FF_OK);
  snprintf(cmd, sizeof cmd, "%s node status %s --watch --interval 20 2>&1", getenv("FF_CLI"), group);
  f = popen(cmd, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  assert_non_null(strstr(line, ": 1 member,"));
  kill_child(k);
  n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  st = pclose(f);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(out, "members exited"))
    fail_msg("watch after a kill: status %d, output '%s'", st, out);
  snprintf(cmd, sizeof cmd, "%s node status %s 2>&1", getenv("FF_CLI"), group);
  f = popen(cmd, "r");
  assert_non_null(f);
  n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  pclose(f);
  if (!strstr(out, ": 0 members (and 1 gone),"))
    fail_msg("status after a kill: '%s'", out);
}

/* `fusionflow node status auto` finds the group that a trainer started by
 * torchrun joins with FF_NODE_GROUP=auto, from the same environment: the
 * run id's group, else the master port's; without either it says what it
 * needs. */
static void node_status_auto_resolves_the_group_of_a_torchrun_job(void **state) {
  (void)state;
  if (!getenv("FF_CLI")) skip();
  static const char *const vars[] = {"TORCHELASTIC_RUN_ID", "MASTER_PORT"};
  static const char *const prefixes[] = {"torchelastic-", "port-"};
  ff__coord_params p = params(4, 1);
  for (int v = 0; v < 2; v++) {
    char id[64], env[160], out[4096], want[128];
    snprintf(id, sizeof id, "ut-auto-%d-%d", (int)getpid(), v);
    snprintf(group, sizeof group, "%s%s", prefixes[v], id);
    assert_int_equal(ff__coord_shm_name(group, shm_name, sizeof shm_name), FF_OK);
    snprintf(made[num_made++], sizeof made[0], "%s", shm_name);
    setenv(vars[v], id, 1); /* the member resolves its group as the loader does */
    setenv("FF_NODE_GROUP", "auto", 1);
    char resolved[FF__COORD_GROUP_MAX];
    assert_int_equal(ff__coord_default_group(resolved, sizeof resolved), 1);
    assert_string_equal(resolved, group);
    unsetenv(vars[v]);
    unsetenv("FF_NODE_GROUP");
    child *k = spawn(&p, 4);
    assert_int_equal(ask(k, 'J', NULL).status, FF_OK);
    snprintf(env, sizeof env, "%s=%s", vars[v], id);
    assert_int_equal(status_auto(env, out, sizeof out), 0);
    snprintf(want, sizeof want, "\"group\": \"%s\"", group);
    assert_non_null(strstr(out, want));
    snprintf(want, sizeof want, "\"pid\": %d,", (int)k->pid);
    assert_non_null(strstr(out, want));
    finish_children();
  }
  char out[4096];
  assert_int_equal(status_auto("", out, sizeof out), 1);
  assert_non_null(strstr(out, "TORCHELASTIC_RUN_ID"));
  assert_non_null(strstr(out, "MASTER_PORT"));
}

/* Groups whose names differ only in a character the shared memory name
 * cannot hold ("a/b", "a_b") are two groups: a member of each is alone in
 * its own, and `node status` reads each one's own table. */
static void groups_named_alike_meet_in_distinct_segments(void **state) {
  (void)state;
  char slash[80], under[80];
  new_group("alike");
  snprintf(under, sizeof under, "%s_x", group);
  snprintf(slash, sizeof slash, "%s/x", group);
  ff__coord_params p = params(4, 1);
  ff__coord *a = NULL, *b = NULL;
  ff__error err = {0};
  assert_int_equal(ff__coord_join_params(under, 4, &p, &a, &err), FF_OK);
  assert_int_equal(ff__coord_join_params(slash, 4, &p, &b, &err), FF_OK);
  const char *names[2] = {under, slash};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(ff__coord_shm_name(names[i], shm_name, sizeof shm_name), FF_OK);
    snprintf(made[num_made++], sizeof made[0], "%s", shm_name);
    ff__coord_member m[FF__COORD_MAX_MEMBERS];
    int n = -1;
    assert_int_equal(ff__coord_peek(names[i], m, &n, NULL, &err), FF_OK);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].threads, 4); /* all of the budget: nobody else is in its group */
  }
  ff__coord_leave(a);
  ff__coord_leave(b);
  assert_false(segment_exists());
  assert_int_equal(ff__coord_peek(under, NULL, NULL, NULL, &err), FF_EEMPTY);
}

/* Many members in one process (each handle is a member): the table fills
 * at 64 and the 65th join is refused. */
static void the_table_holds_64_members(void **state) {
  (void)state;
  new_group("full");
  ff__coord_params p = params(64, 1);
  ff__coord *c[FF__COORD_MAX_MEMBERS + 1] = {0};
  ff__error err = {0};
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    assert_int_equal(ff__coord_join_params(group, 4, &p, &c[i], &err), FF_OK);
  assert_int_equal(ff__coord_join_params(group, 4, &p, &c[64], &err), FF_EINVAL);
  assert_non_null(strstr(err.msg, "full"));
  int t = 0;
  assert_int_equal(ff__coord_report(c[10], &STALL, &t), FF_OK);
  assert_true(t >= 1);
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    ff__coord_leave(c[i]);
  assert_false(segment_exists());
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(fair_share_splits_the_budget_with_the_remainder_to_the_first_slots, teardown),
      cmocka_unit_test_teardown(the_adaptive_reserve_rounds_the_others_cores_and_holds_before_it_drops,
                                teardown),
      cmocka_unit_test_teardown(the_adaptive_reserve_never_takes_the_whole_budget, teardown),
      cmocka_unit_test_teardown(the_member_a_thread_short_changes_each_window, teardown),
      cmocka_unit_test_teardown(the_adaptive_reserve_comes_off_the_guaranteed_budget, teardown),
      cmocka_unit_test_teardown(bursts_leave_the_reserved_cores_to_the_others, teardown),
      cmocka_unit_test_teardown(the_window_measures_the_node_less_the_members_workers, teardown),
      cmocka_unit_test_teardown(the_report_that_makes_the_window_measurable_opens_it, teardown),
      cmocka_unit_test_teardown(the_published_worker_cpu_replaces_the_estimate, teardown),
      cmocka_unit_test_teardown(a_member_publishes_its_worker_cpu_in_its_slot, teardown),
      cmocka_unit_test_teardown(a_member_with_slack_lends_threads_to_a_stalled_one, teardown),
      cmocka_unit_test_teardown(stalled_members_share_the_supply_in_proportion_to_their_stall, teardown),
      cmocka_unit_test_teardown(no_thread_is_lent_without_a_stall, teardown),
      cmocka_unit_test_teardown(a_former_borrower_keeps_its_threads_until_it_shows_slack, teardown),
      cmocka_unit_test_teardown(a_lender_gets_its_threads_back_when_it_needs_them, teardown),
      cmocka_unit_test_teardown(every_member_keeps_its_minimum_even_past_the_budget, teardown),
      cmocka_unit_test_teardown(an_overcommitted_table_gives_back_the_excess_at_once, teardown),
      cmocka_unit_test_teardown(reports_are_smoothed_so_one_short_wait_lends_nothing, teardown),
      cmocka_unit_test_teardown(a_stalled_member_runs_the_cores_a_slack_one_leaves_idle, teardown),
      cmocka_unit_test_teardown(in_lockstep_every_stalled_member_runs_the_idle_moments, teardown),
      cmocka_unit_test_teardown(a_member_that_stopped_waiting_gets_no_burst, teardown),
      cmocka_unit_test_teardown(a_member_whose_workers_parked_since_its_report_frees_its_cores_at_once,
                                teardown),
      cmocka_unit_test_teardown(live_cores_are_weighed_against_what_a_member_runs, teardown),
      cmocka_unit_test_teardown(a_busy_share_measured_under_a_burst_does_not_call_the_next, teardown),
      cmocka_unit_test_teardown(a_member_is_not_quiet_before_its_batch_interval_is_known, teardown),
      cmocka_unit_test_teardown(before_its_first_report_a_members_live_cores_say_whether_it_works, teardown),
      cmocka_unit_test_teardown(a_member_whose_workers_parked_lends_its_cores_before_a_live_span_says_so, teardown),
      cmocka_unit_test_teardown(a_member_refilling_a_full_ring_after_its_trainer_slowed_leaves_the_burst, teardown),
      cmocka_unit_test_teardown(two_reports_with_slack_free_a_members_cores_for_the_bursts, teardown),
      cmocka_unit_test_teardown(two_reports_with_slack_end_the_borrowing, teardown),
      cmocka_unit_test_teardown(a_burst_does_not_keep_itself_alive_on_a_full_node, teardown),
      cmocka_unit_test_teardown(twelve_cores_over_eight_ranks_split_two_and_one, teardown),
      cmocka_unit_test_teardown(bursts_go_to_the_stalled_in_proportion_to_their_stall, teardown),
      cmocka_unit_test_teardown(the_allotments_leave_one_core_per_trainer, teardown),
      cmocka_unit_test_teardown(the_cpu_max_quota_rounds_up_to_whole_cores, teardown),
      cmocka_unit_test_teardown(the_quota_is_the_tightest_of_the_cgroup_and_its_parents, teardown),
      cmocka_unit_test_teardown(the_busy_time_of_proc_stat_leaves_out_steal, teardown),
      cmocka_unit_test_teardown(group_names_are_sanitised_and_taken_from_the_environment, teardown),
      cmocka_unit_test_teardown(three_processes_move_threads_from_slack_to_stall_and_survive_a_kill,
                                teardown),
      cmocka_unit_test_teardown(a_member_that_stops_consuming_releases_its_cores_to_a_stalled_peer, teardown),
      cmocka_unit_test_teardown(the_table_can_be_read_without_joining, teardown),
      cmocka_unit_test_teardown(a_member_that_leaves_frees_its_slot_and_the_group_can_start_again, teardown),
      cmocka_unit_test_teardown(a_silent_member_is_reclaimed_and_rejoins_when_it_reports_again, teardown),
      cmocka_unit_test_teardown(a_member_holding_the_lock_delays_reports_and_its_death_frees_it, teardown),
      cmocka_unit_test_teardown(a_stopped_lock_holder_costs_one_wait_not_one_per_report, teardown),
      cmocka_unit_test_teardown(a_damaged_segment_is_left_with_a_warning_not_obeyed, teardown),
      cmocka_unit_test_teardown(members_joining_and_leaving_at_once_all_get_answers, teardown),
      cmocka_unit_test_teardown(a_segment_of_a_crashed_run_is_reinitialised, teardown),
      cmocka_unit_test_teardown(a_segment_left_unsized_is_replaced_and_a_foreign_one_refused, teardown),
      cmocka_unit_test_teardown(a_fifo_or_another_users_file_under_the_name_is_refused_at_once, teardown),
      cmocka_unit_test_teardown(a_group_whose_members_died_is_removed_by_the_next_join_of_another, teardown),
      cmocka_unit_test_teardown(node_status_auto_resolves_the_group_of_a_torchrun_job, teardown),
      cmocka_unit_test_teardown(node_status_watch_ends_with_the_group, teardown),
      cmocka_unit_test_teardown(the_table_holds_64_members, teardown),
      cmocka_unit_test_teardown(groups_named_alike_meet_in_distinct_segments, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
