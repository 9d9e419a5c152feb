/* args.c — what the subcommands share: option values, each checked and
 * reported the same way ("fusionflow CMD: --OPT expects ..."), the option
 * parsing itself with its one-line errors, and the printing of plans (plan,
 * augment --plan). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/nearest.h"
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

int ff__cli_getopt(int argc, char **argv, const struct option *opts, int *li, const char *help) {
  opterr = 0; /* the messages are ours: one line, not getopt's and then the whole help */
  int c = getopt_long(argc, argv, "h", opts, li);
  if (c != '?') return c;
  const char *cmd = argv[0], *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
  if (!help) help = cmd;
  const char *name = arg + strspn(arg, "-");
  size_t n = strcspn(name, "="), shown = (size_t)(name - arg) + n;
  if (optopt && !strncmp(arg, "--", 2)) { /* a long option without its value */
    fprintf(stderr, "%s: %.*s expects a value; see '%s --help'\n", cmd, (int)shown, arg, help);
    return '?';
  }
  char alternatives[256] = "";
  int prefixed = 0;
  for (const struct option *o = opts; o->name; o++)
    if (n && !strncmp(o->name, name, n)) {
      size_t used = strlen(alternatives);
      snprintf(alternatives + used, sizeof alternatives - used, "%s--%s", prefixed++ ? ", " : "", o->name);
    }
  const char *near = ff__nearest_name(name, n, opts, SIZE_MAX, sizeof *opts, NULL);
  if (prefixed > 1)
    fprintf(stderr, "%s: ambiguous option '%.*s' (%s); see '%s --help'\n", cmd, (int)shown, arg, alternatives,
            help);
  else if (near)
    fprintf(stderr, "%s: unknown option '%.*s' (did you mean '--%s'?); see '%s --help'\n", cmd, (int)shown, arg,
            near, help);
  else
    fprintf(stderr, "%s: unknown option '%.*s'; see '%s --help'\n", cmd, (int)shown, arg, help);
  return '?';
}

int ff__cli_usage_error(const char *cmd, const char *help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "; see '%s --help'\n", help ? help : cmd);
  va_end(ap);
  return 2;
}
