/* recipe.c — `fusionflow recipe`: lists the training-recipe presets and
 * prints one (its source, pipeline one op per line, sampler setting, and
 * whether this build runs it). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

static void usage(FILE *f) {
  fprintf(f, "usage: fusionflow recipe --list\n"
             "       fusionflow recipe NAME\n"
             "\n"
             "Training-recipe presets: a published recipe's data pipeline (views and the\n"
             "mixup_cutmix batch stage included) and its sampler setting, ready for\n"
             "fusionflow bench --recipe NAME or Loader(recipe=NAME).\n"
             "\n"
             "  --list      one line per recipe: name, whether this build runs it, source\n"
             "  NAME        the recipe: source, pipeline (one op per line), repeated\n"
             "              augmentations, and the ops it needs that this build lacks\n"
             "  -h, --help  this text\n");
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
  static const struct option opts[] = {
      {"list", no_argument, 0, 'l'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  int list = 0, c, li;
  while ((c = ff__cli_getopt(argc, argv, opts, &li)) != -1) {
    if (c == 'h') return usage(stdout), 0;
    if (c == 'l')
      list = 1;
    else
      return 2;
  }
  char why[1024];
  if (list) {
    for (size_t i = 0; ff_recipe_at(i); i++) {
      const ff_recipe *r = ff_recipe_at(i);
      int ok = ff_recipe_check(r, NULL, 0) == FF_OK;
      printf("%-24s %-10s %s\n", r->name, ok ? "available" : "needs ops", r->source);
    }
    return 0;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "%s: give one recipe NAME or --list\n", argv[0]);
    return 2;
  }
  const ff_recipe *r = ff_recipe_find(argv[optind]);
  if (!r) {
    fprintf(stderr, "%s: unknown recipe '%s' (recipes:", argv[0], argv[optind]);
    for (size_t i = 0; ff_recipe_at(i); i++)
      fprintf(stderr, " %s", ff_recipe_at(i)->name);
    fprintf(stderr, ")\n");
    return 2;
  }
  printf("%s\n  %s\npipeline:\n", r->name, r->source);
  print_pipeline(r->pipeline);
  printf("repeated_augmentations: %d\n", r->repeated_augmentations);
  if (ff_recipe_check(r, why, sizeof why))
    printf("status: not runnable in this build: %s\n", why);
  else
    printf("status: available\n");
  return 0;
}
