/* ops.c — `fusionflow ops`: the pipeline ops the parser knows, a line each
 * (pipeline/op_table.c), the internal pil_* ops last; `fusionflow ops NAME`:
 * one op's arguments and the values each takes. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/nearest.h"
#include "pipeline/op_table.h"

static void ops_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow ops [NAME]\n"
          "\n"
          "Lists the ops a pipeline may use ('decode | random_resized_crop(size=224) | ...'), each\n"
          "with what it does and the torchvision (or timm) transform it follows. The pil_* ops come\n"
          "last, marked internal: the Pillow op functions the timm_* policies apply, usable in a\n"
          "pipeline but not torchvision transforms. With NAME: that op's arguments, whether each\n"
          "is required, and the values it takes (defaults are torchvision's).\n"
          "\n"
          "  -h, --help   show this help\n"
          "\n"
          "Exit status: 0 success, 2 usage (an unknown NAME).\n");
}

static void list_ops(void) {
  for (int internal = 0; internal < 2; internal++)
    for (size_t i = 0; i < ff__num_op_specs; i++)
      if (ff__op_spec_internal(&ff__op_specs[i]) == internal)
        printf("%-24s %s\n", ff__op_specs[i].name, ff__op_specs[i].summary);
}

static void describe_op(const ff__op_spec *op) {
  printf("%s: %s\n", op->name, op->summary);
  if (!op->args[0].name) {
    printf("arguments: none\n");
    return;
  }
  printf("arguments:\n");
  for (int k = 0; k < FF__OP_MAX_ARGS && op->args[k].name; k++) {
    char what[160];
    ff__arg_spec_describe(&op->args[k], what, sizeof what);
    printf("  %-20s %-9s %s\n", op->args[k].name, op->args[k].required ? "required" : "optional", what);
  }
}

int ff__cli_ops(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int c, li = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    if (c == 'h') return ops_usage(stdout), 0;
    return 2; /* ff__cli_getopt said why */
  }
  if (argc - optind > 1) return ff__cli_usage_error(argv[0], NULL, "expects at most one op NAME");
  if (argc == optind) {
    list_ops();
    return 0;
  }
  const char *name = argv[optind];
  const ff__op_spec *op = ff__op_spec_find(name);
  if (op) {
    describe_op(op);
    return 0;
  }
  const char *near = ff__nearest_name(name, strlen(name), ff__op_specs, ff__num_op_specs, sizeof *op, "pil_");
  if (near) return ff__cli_usage_error(argv[0], NULL, "unknown op '%s' (did you mean '%s'?)", name, near);
  return ff__cli_usage_error(argv[0], NULL, "unknown op '%s'", name);
}
