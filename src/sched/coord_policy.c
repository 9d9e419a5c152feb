/* coord_policy.c — the node coordinator's rebalancing, pure: a report folds
 * into its member's smoothed signals, every member gets a fair share and a
 * target, the reporter's allotment moves one thread toward its target, and
 * the cores nobody uses go to stalled members as bursts. State in (the
 * member table and the settings), decisions out: no shared memory, no
 * clock, no system call (but the default budget of ff__coord_params_init),
 * so that `fusionflow sim` drives the same code as the runtime.
 * docs/node-coordinator.md explains the policy. */
#include "sched/coord_internal.h"

#include <math.h>

#define COORD_SIGNAL_NS 1e8 /* the interval a report of weight alpha stands for */

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

void ff__coord_targets(const ff__coord_params *params, ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = ff__coord_effective(params, m, n), *p = &q;
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
    cls[j] = ff__coord_member_class(p, e);
    /* one whose last reports had slack asks for no more, though its smoothed stall share says so */
    if (cls[j] == COORD_STALLED && slack_lately(e)) cls[j] = COORD_NEUTRAL;
    if (cls[j] == COORD_STALLED) {
      want[j] = member_cap(e) - e->fair;
    } else if (cls[j] == COORD_SLACK) {
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
    w_stall[j] = cls[j] == COORD_STALLED ? e->stall_share : 0;
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
  const ff__coord_params q = ff__coord_effective(params, m, n), *p = &q;
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

double ff__coord_speed(const ff__coord_params *params, const ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = ff__coord_effective(params, m, n), *p = &q;
  double demand = p->trainer_cores != FF__COORD_TRAINER_AUTO ? ff__coord_reserved(p, m, n)
                  : p->reserve.others_cores > 0              ? p->reserve.others_cores
                                                             : 0;
  for (int i = 0; i < n; i++)
    if (m[i].pid && ff__coord_burst_class(p, &m[i]) != COORD_SLACK)
      demand += m[i].running > 0 ? m[i].running : m[i].threads + m[i].burst;
  return demand > p->budget_threads ? p->budget_threads / demand : 1;
}

void ff__coord_burst(const ff__coord_params *params, ff__coord_member *m, int n) {
  if (n > FF__COORD_MAX_MEMBERS) n = FF__COORD_MAX_MEMBERS;
  const ff__coord_params q = ff__coord_effective(params, m, n), *p = &q;
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
    cls[j] = ff__coord_burst_class(p, &m[live[j]]);
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
                (cls[j] == COORD_NEUTRAL || (cls[j] == COORD_STALLED && e->fill_now >= p->ring_full));
    double share = ahead ? 1 : then > 0 ? then : 1;
    double busy = e->parked ? 0 /* its workers wait for work: none of its cores is used now */
                  : now_known ? e->live_cores / share
                  : e->reports > 0
                      ? with_burst * e->busy_share / share
                      : threads; /* (a quiet member has slack) before its first report: all of it */
    if (cls[j] != COORD_SLACK) used += busy < threads ? busy : threads;
    if ((cls[j] == COORD_NEUTRAL || ahead) && busy < threads) left_idle += threads - busy;
    /* one whose threads wait for work now needs no more of them (compared with what it runs: a
     * burst written by another's report starts at its own next one) */
    int idles = e->parked ||
                (now_known && busy < (e->running > 0 ? e->running : with_burst) * (1.0 - p->idle_threshold));
    room[j] = cls[j] == COORD_SLACK || idles ? 0 : member_cap(e) - threads;
    held[j] = cls[j] == COORD_NEUTRAL && e->burst > 0 ? (e->burst < room[j] ? e->burst : room[j]) : 0;
    held_sum += held[j];
    w_hold[j] = held[j];
    /* its trainer waits now, or it holds a burst and found no batch ready (a hungry trainer
     * whose batch was nearly done keeps its burst) */
    int waits = e->stall_now > p->stall_threshold || (e->burst > 0 && e->fill_now == 0);
    w_stall[j] = cls[j] == COORD_STALLED && waits ? e->stall_share : 0;
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
  m->slack_reports = !ff__coord_has_slack(p, stall, fill, busy) ? 0
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
  ff__coord_mark_quiet(p, m, n, self, now_ns);
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
