/* recipe.c — `fusionflow recipe`: lists the training-recipe presets and
 * prints one (its source, pipeline one op per line, for --num-classes
 * classes as `fusionflow bench --recipe` runs it, sampler setting, and
 * whether this build runs it); the recipe lookup and pipeline text both
 * commands share (ff__cli_recipe_pipeline). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/nearest.h"
#include "fusionflow/fusionflow.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fusionflow recipe --list\n"
             "       fusionflow recipe NAME [--num-classes N]\n"
             "\n"
             "Training-recipe presets: a published recipe's data pipeline (views and the\n"
             "mixup_cutmix batch stage included) and its sampler setting, ready for\n"
             "fusionflow bench --recipe NAME or Loader(recipe=NAME).\n"
             "\n"
             "  --list      one line per recipe: name, whether this build runs it, source\n"
             "  NAME        the recipe: source, pipeline (one op per line), repeated\n"
             "              augmentations, and the ops it needs that this build lacks\n"
             "  --num-classes N\n"
             "              the classes of its mixup_cutmix, 1 to 16777216 (default 1000,\n"
             "              ImageNet's): the pipeline printed is the one\n"
             "              fusionflow bench --recipe NAME --num-classes N runs\n"
             "  -h, --help  this text\n");
}

int ff__cli_recipe_pipeline(const char *cmd, const char *name, int num_classes, char *buf, size_t size,
                            const ff_recipe **recipe_out) {
  const ff_recipe *r = ff_recipe_find(name);
  size_t len = 0;
  if (!r) {
    const char *names[64];
    char list[512] = "";
    size_t n = 0;
    for (; n < 64 && ff_recipe_at(n); n++) {
      names[n] = ff_recipe_at(n)->name;
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", n ? ", " : "", names[n]);
    }
    const char *near = ff__nearest_name(name, strlen(name), names, n, sizeof names[0], NULL);
    fprintf(stderr, "fusionflow %s: unknown recipe '%s' (%s%s%s); see 'fusionflow recipe --list'\n", cmd, name,
            near ? "did you mean '" : "recipes: ", near ? near : list, near ? "'?" : "");
    return 0;
  }
  if (ff_recipe_pipeline(r, num_classes, buf, size, &len)) /* FF_EPIPELINE: the arguments are valid */
    return fprintf(stderr, "fusionflow %s: recipe '%s' has no batch stage: --num-classes does not apply\n", cmd,
                   name),
           0;
  if (len >= size) return fprintf(stderr, "fusionflow %s: recipe '%s' is too long\n", cmd, name), 0;
  if (recipe_out) *recipe_out = r;
  return 1;
}

/* The pipeline with a line break before each top-level '|' and '||'. */
static void print_pipeline(const char *text) {
  int depth = 0;
  printf("  ");
  for (const char *c = text; *c; c++) {
    if (*c == '(') depth++;
    if (*c == ')') depth--;
    if (!depth && *c == ' ' && c[1] == '|')
      printf("\n  ");
    else
      putchar(*c);
  }
  putchar('\n');
}

int ff__cli_recipe(int argc, char **argv) {
  enum { O_NUM_CLASSES = 256 };
  static const struct option opts[] = {{"list", no_argument, 0, 'l'},
                                       {"num-classes", required_argument, 0, O_NUM_CLASSES},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  int list = 0, c, li;
  long num_classes = 0;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    if (c == 'h') return usage(stdout), 0;
    if (c == 'l')
      list = 1;
    else if (c != O_NUM_CLASSES || !ff__cli_parse_num_classes("recipe", optarg, &num_classes))
      return 2;
  }
  char why[1024];
  if (list && num_classes) {
    fprintf(stderr, "%s: --num-classes goes with a recipe NAME, not --list\n", argv[0]);
    return 2;
  }
  if (list) {
    for (size_t i = 0; ff_recipe_at(i); i++) {
      const ff_recipe *r = ff_recipe_at(i);
      int ok = ff_recipe_check(r, NULL, 0) == FF_OK;
      printf("%-24s %-10s %s\n", r->name, ok ? "available" : "needs ops", r->source);
    }
    return 0;
  }
  if (optind != argc - 1) return ff__cli_usage_error(argv[0], NULL, "give one recipe NAME or --list");
  const ff_recipe *r;
  char pipeline[4096];
  if (!ff__cli_recipe_pipeline("recipe", argv[optind], (int)num_classes, pipeline, sizeof pipeline, &r)) return 2;
  printf("%s\n  %s\npipeline:\n", r->name, r->source);
  print_pipeline(pipeline);
  printf("repeated_augmentations: %d\n", r->repeated_augmentations);
  if (ff_recipe_check(r, why, sizeof why))
    printf("status: not runnable in this build: %s\n", why);
  else
    printf("status: available\n");
  return 0;
}
