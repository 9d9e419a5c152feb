/* args.c — what the subcommands share: option values, each checked and
 * reported the same way ("fusionflow CMD: --OPT expects ..."), the option
 * parsing itself with its one-line errors, and the printing of plans (plan,
 * augment --plan). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

int ff__cli_parse_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *s == ' ' || *s == '\t' || *end || errno || v < min || v > max) { /* strtol skips spaces */
    fprintf(stderr, "fusionflow %s: --%s expects an integer in [%ld, %ld], got '%s'\n", cmd, opt, min, max, s);
    return 0;
  }
  *out = v;
  return 1;
}

int ff__cli_parse_num_classes(const char *cmd, const char *s, long *out) {
  return ff__cli_parse_long(cmd, "num-classes", s, 1, FF_MAX_NUM_CLASSES, out);
}

int ff__cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || *end || errno || !isfinite(v) || !(v >= min && v <= max)) { /* "inf", "nan" never pass */
    fprintf(stderr, "fusionflow %s: --%s expects a number in [%g, %g], got '%s'\n", cmd, opt, min, max, s);
    return 0;
  }
  *out = v;
  return 1;
}

int ff__cli_parse_semantics(const char *cmd, const char *s, int *out) {
  if (strcmp(s, "v1") && strcmp(s, "v2")) {
    fprintf(stderr, "fusionflow %s: --semantics expects v1 or v2, got '%s'\n", cmd, s);
    return 0;
  }
  *out = s[1] == '2'; /* FF_SEMANTICS_V1 = 0, FF_SEMANTICS_V2 = 1 */
  return 1;
}

void ff__cli_print_plan(const char *json, int one_line) {
  for (const char *p = json; *p; p++) {
    if (one_line && *p == '\n') {
      char before = p > json ? p[-1] : '[';
      while (p[1] == ' ') p++;
      if (p[1] && p[1] != '\n' && before != '[') putchar(' ');
      continue;
    }
    putchar(*p);
  }
  if (one_line) putchar('\n');
}

/* Edits (insertions, deletions, substitutions) from a to b, at most 63 characters of each. */
static int edit_distance(const char *a, size_t na, const char *b) {
  size_t nb = strlen(b);
  if (na > 63 || nb > 63) return 64;
  int row[64];
  for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= na; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= nb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up, row[j] = best;
    }
  }
  return row[nb];
}

/* The long option nearest to name[0..n) when it is near enough to be a typo, else NULL. */
static const char *nearest_option(const char *name, size_t n, const struct option *opts) {
  const char *best = NULL;
  int limit = n <= 2 ? 1 : n / 3 > 2 ? (int)(n / 3) : 2, best_d = limit + 1; /* "gird" -> "grid": 2 edits */
  for (const struct option *o = opts; o->name; o++) {
    int d = edit_distance(name, n, o->name);
    if (d < best_d) best = o->name, best_d = d;
  }
  return best;
}

int ff__cli_getopt(int argc, char **argv, const struct option *opts, int *li) {
  opterr = 0; /* the messages are ours: one line, not getopt's and then the whole help */
  int c = getopt_long(argc, argv, "h", opts, li);
  if (c != '?') return c;
  const char *cmd = argv[0], *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  const char *name = arg + strspn(arg, "-");
  size_t n = strcspn(name, "="), shown = (size_t)(name - arg) + n;
  if (optopt && !strncmp(arg, "--", 2)) { /* a long option without its value */
    fprintf(stderr, "%s: %.*s expects a value; see '%s --help'\n", cmd, (int)shown, arg, cmd);
    return '?';
  }
  char alternatives[256] = "";
  int prefixed = 0;
  for (const struct option *o = opts; o->name; o++)
    if (n && !strncmp(o->name, name, n)) {
      size_t used = strlen(alternatives);
      snprintf(alternatives + used, sizeof alternatives - used, "%s--%s", prefixed++ ? ", " : "", o->name);
    }
  const char *near = nearest_option(name, n, opts);
  if (prefixed > 1)
    fprintf(stderr, "%s: ambiguous option '%.*s' (%s); see '%s --help'\n", cmd, (int)shown, arg, alternatives,
            cmd);
  else if (near)
    fprintf(stderr, "%s: unknown option '%.*s' (did you mean '--%s'?); see '%s --help'\n", cmd, (int)shown, arg,
            near, cmd);
  else
    fprintf(stderr, "%s: unknown option '%.*s'; see '%s --help'\n", cmd, (int)shown, arg, cmd);
  return '?';
}
