/* main.c — the `fusionflow` executable: subcommand dispatch.
 * Exit status: 0 success, 1 runtime error, 2 usage. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

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
          "  sim        simulate a node (cores, GPUs, step time) under the offload policy: how many\n"
          "             cores per GPU a pipeline needs, and what offloading to the GPU gains; with\n"
          "             --ranks N: N trainers sharing the cores with the node coordinator or without\n"
          "  node       node status GROUP: the loaders sharing this node's cores (node coordinator)\n"
          "  recipe     list the training-recipe presets (--list) or print one: pipeline and sampler\n"
          "  shards     make WebDataset tar shards from a data set (make), or verify shards (check)\n"
          "  version    print the library version\n"
          "\n"
          "Run 'fusionflow COMMAND --help' for the options of a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  /* getopt names the command in its messages after argv[0]. */
  if (!strcmp(argv[1], "bench")) return argv[1] = "fusionflow bench", ff__cli_bench(argc - 1, argv + 1);
  if (!strcmp(argv[1], "augment")) return argv[1] = "fusionflow augment", ff__cli_augment(argc - 1, argv + 1);
  if (!strcmp(argv[1], "plan")) return argv[1] = "fusionflow plan", ff__cli_plan(argc - 1, argv + 1);
  if (!strcmp(argv[1], "recipe")) return argv[1] = "fusionflow recipe", ff__cli_recipe(argc - 1, argv + 1);
  if (!strcmp(argv[1], "shards")) return ff__cli_shards(argc - 1, argv + 1);
  if (!strcmp(argv[1], "sim")) return argv[1] = "fusionflow sim", ff__cli_sim(argc - 1, argv + 1);
  if (!strcmp(argv[1], "node")) return argv[1] = "fusionflow node", ff__cli_node(argc - 1, argv + 1);
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("fusionflow %s\n", ff_version());
    return 0;
  }
  fprintf(stderr, "fusionflow: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
