/* args.c — what the subcommands share: option values, each checked and
 * reported the same way ("fusionflow CMD: --OPT expects ..."), and the
 * printing of plans (plan, augment --plan). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

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
