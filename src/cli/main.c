/* main.c — the `fusionflow` executable: subcommand dispatch.
 * Exit status: 0 success, 1 runtime error, 2 usage (check: 1 also when the
 * pixels differ, 3 when the check cannot run). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/nearest.h"
#include "fusionflow/fusionflow.h"

typedef struct command {
  const char *name; /* first: ff__nearest_name reads the records by it */
  int (*run)(int argc, char **argv);
  const char *cmd; /* argv[0] for the subcommand: getopt names it in messages */
} command;

static int version(int argc, char **argv) {
  (void)argc, (void)argv;
  printf("fusionflow %s\n", ff_version());
  return 0;
}

static const command commands[] = {
    {"bench", ff__cli_bench, "fusionflow bench"},       {"augment", ff__cli_augment, "fusionflow augment"},
    {"plan", ff__cli_plan, "fusionflow plan"},          {"check", ff__cli_check, "fusionflow check"},
    {"ops", ff__cli_ops, "fusionflow ops"},             {"sim", ff__cli_sim, "fusionflow sim"},
    {"node", ff__cli_node, "fusionflow node"},          {"recipe", ff__cli_recipe, "fusionflow recipe"},
    {"shards", ff__cli_shards, "fusionflow shards"},    {"version", version, "fusionflow version"},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow COMMAND [OPTIONS]\n"
          "\n"
          "fusionflow feeds training with batches of augmented images, prepared on a pool\n"
          "of CPU threads, bit-identical for a seed whatever the thread count.\n"
          "\n"
          "commands:\n"
          "  bench      run the loader over a data set and report images/s and where the time goes\n"
          "  augment    run a pipeline on one image and write the result (or a grid of draws) as PNG\n"
          "  plan       print what the loader draws for a sample: region, DCT scale, boxes, flips,\n"
          "             each augmentation op with its magnitude and sign, AugMix weights\n"
          "  check      run a pipeline on a sample of your files through fusionflow and through\n"
          "             torchvision (or timm) with the same draws, and report the largest pixel\n"
          "             difference per op and per image\n"
          "  ops        list the pipeline ops with a line each; ops NAME: one op's arguments\n"
          "  sim        simulate a node (cores, GPUs, step time) under the offload policy: how many\n"
          "             cores per GPU a pipeline needs, and what offloading to the GPU gains; with\n"
          "             --ranks N: N trainers sharing the cores with the node coordinator or without\n"
          "             (its options: fusionflow sim --ranks N --help)\n"
          "  node       node status GROUP: the loaders sharing this node's cores (node coordinator)\n"
          "  recipe     list the training-recipe presets (--list) or print one: pipeline and sampler\n"
          "  shards     make WebDataset tar shards from a data set (make), or verify shards (check)\n"
          "  version    print the library version\n"
          "\n"
          "Run 'fusionflow COMMAND --help' for the options of a command.\n"
          "Exit status: 0 success, 1 runtime error, 2 usage (check: see its --help).\n");
}

int main(int argc, char **argv) {
  if (argc < 2)
    return ff__cli_usage_error("fusionflow", NULL,
                               "expects a COMMAND: bench, augment, plan, check, ops, sim, node, recipe, shards "
                               "or version");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) return version(0, NULL);
  for (size_t i = 0; i < NUM_COMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      argv[1] = (char *)commands[i].cmd;
      return commands[i].run(argc - 1, argv + 1);
    }
  const char *near = ff__nearest_name(argv[1], strlen(argv[1]), commands, NUM_COMMANDS, sizeof commands[0], NULL);
  if (near) return ff__cli_usage_error("fusionflow", NULL, "unknown command '%s' (did you mean '%s'?)", argv[1], near);
  return ff__cli_usage_error("fusionflow", NULL, "unknown command '%s'", argv[1]);
}
