/* opening.c — what the subcommands do while an open reads a streamed tar:
 * source (ff_config.open_progress): say on stderr which shard and attempt
 * it waits for when a line is due, and let Ctrl-C give it up. bench
 * (ff_loader_open) and shards (ff__source_open_watched and ff_loader_open)
 * bracket each open with ff__cli_opening_start and ff__cli_opening_end and
 * pass ff__cli_opening_progress with the ff__cli_opening as its context.
 *
 * Before a streamed open has begun (other sources never call open_progress)
 * Ctrl-C ends the command at once, as it does without the handler; once one
 * has, it only marks the open given up, and the next progress call (about
 * every 100 ms) says so to the library. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"

static volatile sig_atomic_t open_interrupted, open_streaming;

static void on_open_interrupt(int sig) {
  if (open_streaming) {
    open_interrupted = 1;
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void ff__cli_opening_start(ff__cli_opening *o, const char *cmd) {
  *o = (ff__cli_opening){.cmd = cmd};
  open_interrupted = 0, open_streaming = 0;
  struct sigaction interrupt = {0};
  interrupt.sa_handler = on_open_interrupt; /* no SA_RESTART: a wait in progress ends */
  sigemptyset(&interrupt.sa_mask);
  sigaction(SIGINT, &interrupt, &o->before);
}

/* Bytes for a person: "812 bytes", "1.2 kB", "3.4 MB", "5.6 GB" (powers of 1000). */
static void human_bytes(uint64_t n, char *out, size_t cap) {
  static const char *const units[] = {"kB", "MB", "GB", "TB"};
  if (n < 1000) {
    snprintf(out, cap, "%llu bytes", (unsigned long long)n);
    return;
  }
  double v = (double)n / 1000;
  int u = 0;
  while (v >= 1000 && u < 3) v /= 1000, u++;
  snprintf(out, cap, "%.1f %s", v, units[u]);
}

/* A line whenever the open says one is due (ff_open_progress.due): the shard,
 * the attempt, and while it reads the bytes and samples so far (a drip shows
 * as a count that hardly moves). */
int ff__cli_opening_progress(void *ctx, const ff_open_progress *p) {
  ff__cli_opening *o = ctx;
  open_streaming = 1;
  if (open_interrupted) return 1;
  if (!p->due) return 0;
  char bytes[32], so_far[96] = "";
  human_bytes(p->shard_bytes, bytes, sizeof bytes);
  if (!p->backing_off) snprintf(so_far, sizeof so_far, ": %s, %zu samples so far", bytes, p->shard_samples);
  fprintf(stderr, "%s: opening, %.0f s: shard %zu of %zu, %s, %s attempt %d of %d%s%s%s%s\n", o->cmd, p->elapsed_s,
          p->shard_index + 1, p->num_shards, p->shard, p->backing_off ? "backing off before" : "reading,", p->attempt,
          p->max_attempts, so_far, *p->last_error ? " (the last failed: " : "", p->last_error,
          *p->last_error ? ")" : "");
  return 0;
}

int ff__cli_opening_end(ff__cli_opening *o) {
  sigaction(SIGINT, &o->before, NULL); /* from here on Ctrl-C ends the command as it always did */
  if (!open_interrupted) return 0;
  fprintf(stderr, "%s: interrupted while opening the source\n", o->cmd);
  return 1;
}
