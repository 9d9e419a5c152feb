/* coord.c — a loader's membership in its node group (coord.h): joining with
 * the environment's settings, the report of each batch (the table's lock,
 * the dead reclaimed, the workers' published CPU read in, then the pure
 * policy), the workers' publication of their CPU, and leaving. The steps of
 * one report, in this order, are listed in docs/node-coordinator.md. */
#include "sched/coord_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/clock.h"
#include "sched/coord_node.h"

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
  c->pidns = ff__coord_pid_namespace();
  ff__coord_busy_source_init(&c->busy);
  c->max_threads = max_threads;
  c->slot = -1;
  ff_status st = ff__coord_attach(c, err);
  if (st != FF_OK) {
    pthread_mutex_destroy(&c->pub_mu);
    free(c);
    return st;
  }
  ff__coord_sweep_abandoned(c->name, c->pidns);
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
  if (s && own && ff__coord_lock(s, c->params.lock_timeout_ms + 1000) == 0) {
    if (ff__coord_owns_slot(c)) ff__coord_free_slot(s, c->slot);
    ff__coord_reclaim(s, -1, c->pidns, ff__now_ns());
    if (!s->members && !s->closed) {
      s->closed = 1;
      ff__coord_unlink_if_same(c->name, c->ino);
    }
    ff__coord_unlock(s);
  }
  ff__coord_detach(c);
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
  int rc = ff__coord_lock(c->shm, c->stuck ? 0 : c->params.lock_timeout_ms);
  c->stuck = rc != 0;
  return rc;
}

static int node_busy(void *src, uint64_t *out) { return ff__coord_node_busy_ns(src, out); }

/* ff__coord_report with c->pub_mu held. */
static void report_held(ff__coord *c, const ff__coord_report_data *r, int *threads_out) {
  if (c->alone || (!c->shm && ff__coord_attach(c, NULL) != FF_OK)) { /* a previous re-attach failed */
    *threads_out = c->threads;
    return;
  }
  coord_shm *s = c->shm;
  if (report_lock(c) != 0) {
    *threads_out = c->threads;
    return;
  }
  uint64_t now = ff__now_ns();
  if (s->closed) {
    /* Everyone, this member included (it was silent too long), was
     * reclaimed and the segment is gone: join the group afresh. */
    ff__coord_unlock(s);
    ff__coord_detach(c);
    if (ff__coord_attach(c, NULL) != FF_OK || report_lock(c) != 0) {
      *threads_out = c->threads;
      return;
    }
    s = c->shm;
  }
  char why[128];
  if (ff__coord_table_damage(s, now, why, sizeof why)) {
    ff__coord_unlock(s);
    ff__coord_detach(c);
    ff__coord_go_alone(c, why, COORD_REMOVE_IT, NULL);
    *threads_out = c->threads;
    return;
  }
  if (!ff__coord_owns_slot(c)) {
    ff__coord_reclaim(s, -1, c->pidns, now);
    if (ff__coord_take_slot(s, c, now) < 0) {
      ff__coord_unlock(s);
      *threads_out = c->threads;
      return;
    }
  }
  ff__coord_reclaim(s, c->slot, c->pidns, now);
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++) /* for the reserve's measure and the live cores */
    if (s->slot[i].pid) ff__coord_read_published(s, i);
  c->threads = ff__coord_take_report(&s->params, s->slot, FF__COORD_MAX_MEMBERS, c->slot, r, now, node_busy, &c->busy);
  c->reserve_cores = ff__coord_reserved(&s->params, s->slot, FF__COORD_MAX_MEMBERS);
  c->spares = ff__coord_member_spares(c->max_threads, c->threads);
  ff__coord_unlock(s);
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
  if (!c->alone && c->shm && ff__coord_owns_slot(c)) {
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
  if (ff__coord_lock(s, c->params.lock_timeout_ms) != 0) return FF_EIO;
  int n = 0;
  for (int i = 0; i < FF__COORD_MAX_MEMBERS; i++)
    if (s->slot[i].pid) {
      if (out) out[n] = s->slot[i];
      n++;
    }
  if (params_out) *params_out = s->params;
  ff__coord_unlock(s);
  if (n_out) *n_out = n;
  return FF_OK;
}

