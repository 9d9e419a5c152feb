/* plan.c — `fusionflow plan`: prints what the planner drew for samples of a
 * data set (ff_loader_plan): the decoded region and DCT scale, the crop
 * boxes, flips, every augmentation op with its argument, magnitude and sign,
 * AugMix's weights. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

static void plan_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow plan --source SRC --pipeline TEXT --index N [options]\n"
          "\n"
          "Prints what the loader draws for sample N of the data set (its place in the source,\n"
          "whatever the shuffle): the region decoded and its DCT scale, then every step with its\n"
          "parameters -- crop boxes, flips, each augmentation op with the argument it is called\n"
          "with, its magnitude and sign, AugMix's weights. Nothing is decoded.\n"
          "\n"
          "  --source SRC      imagefolder:DIR or list:FILE\n"
          "  --pipeline TEXT   ops separated by '|', starting with decode\n"
          "  --index N         sample index, 0 .. dataset size - 1\n"
          "  --count K         print samples N .. N+K-1 (default 1)\n"
          "  --epoch E         epoch (default 0)\n"
          "  --seed S          seed (default 0)\n"
          "  --batch-size B    the training run's batch size (default 1; a sample's plan does not\n"
          "                    depend on it, but mixup_cutmix checks it: timm's Mixup needs an\n"
          "                    even one)\n"
          "  --drop-last       the training run's drop_last (the size of the last batch, which\n"
          "                    mixup_cutmix checks too)\n"
          "  --semantics v1|v2 torchvision.transforms (v1, default) or transforms.v2 arithmetic\n"
          "                    (v2's solarize thresholds; shown as \"semantics\")\n"
          "  --json            one JSON object per line (JSON Lines) instead of one per block\n"
          "  -h, --help        show this help\n"
          "\n"
          "The keys are those of ff_loader_plan (include/fusionflow/fusionflow.h).\n"
          "Exit status: 0 success, 1 runtime error, 2 usage.\n");
}

int ff__cli_plan(int argc, char **argv) {
  enum { O_SOURCE = 1, O_PIPELINE, O_INDEX, O_COUNT, O_EPOCH, O_SEED, O_JSON, O_SEMANTICS, O_BATCH, O_DROP };
  static const struct option opts[] = {{"source", required_argument, 0, O_SOURCE},
                                       {"pipeline", required_argument, 0, O_PIPELINE},
                                       {"index", required_argument, 0, O_INDEX},
                                       {"count", required_argument, 0, O_COUNT},
                                       {"epoch", required_argument, 0, O_EPOCH},
                                       {"seed", required_argument, 0, O_SEED},
                                       {"json", no_argument, 0, O_JSON},
                                       {"semantics", required_argument, 0, O_SEMANTICS},
                                       {"batch-size", required_argument, 0, O_BATCH},
                                       {"drop-last", no_argument, 0, O_DROP},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  ff_config cfg;
  ff_config_init(&cfg);
  long index = -1, count = 1, epoch = 0, seed = 0, batch = 1, v;
  int json = 0, c, li = 0, semantics = 0;
  const char *cmd = "fusionflow plan";
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    const char *name = c > 0 && c <= O_DROP ? opts[c - 1].name : "";
    switch (c) {
    case O_SOURCE: cfg.source = optarg; break;
    case O_PIPELINE: cfg.pipeline = optarg; break;
    case O_INDEX: if (!ff__cli_parse_long(cmd, name, optarg, 0, LONG_MAX, &index)) return 2; break;
    case O_COUNT: if (!ff__cli_parse_long(cmd, name, optarg, 1, 1000000, &count)) return 2; break;
    case O_EPOCH: if (!ff__cli_parse_long(cmd, name, optarg, 0, LONG_MAX, &epoch)) return 2; break;
    case O_SEED: if (!ff__cli_parse_long(cmd, name, optarg, 0, LONG_MAX, &v)) return 2; seed = v; break;
    case O_JSON: json = 1; break;
    case O_SEMANTICS: if (!ff__cli_parse_semantics("plan", optarg, &semantics)) return 2; break;
    case O_BATCH: if (!ff__cli_parse_long(cmd, name, optarg, 1, 1 << 20, &batch)) return 2; break;
    case O_DROP: cfg.drop_last = 1; break;
    case 'h': plan_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (optind != argc)
    return ff__cli_usage_error(cmd, NULL, "unexpected argument '%s'", argv[optind]);
  if (!cfg.source || !cfg.pipeline || index < 0)
    return ff__cli_usage_error(cmd, NULL, "%s is required",
                               !cfg.source ? "--source" : !cfg.pipeline ? "--pipeline" : "--index");
  cfg.seed = (uint64_t)seed;
  cfg.semantics = (ff_semantics)semantics;
  cfg.batch_size = (int)batch, cfg.num_threads = 1, cfg.prefetch = 1, cfg.shuffle = 0;
  cfg.rank = 0, cfg.world_size = 1;
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&cfg, &l);
  if (st) {
    fprintf(stderr, "%s: %s\n", cmd, l ? ff_loader_errmsg(l) : ff_status_str(st));
    ff_loader_close(l);
    return st == FF_EPIPELINE || st == FF_EINVAL ? 2 : 1;
  }
  int status = 0;
  for (long k = 0; k < count && !status; k++) {
    char *text = NULL;
    st = ff_loader_plan(l, (uint64_t)(index + k), (uint64_t)epoch, &text);
    if (st) {
      fprintf(stderr, "%s: %s\n", cmd, ff_loader_errmsg(l));
      status = st == FF_EINVAL ? 2 : 1;
    } else {
      ff__cli_print_plan(text, json);
    }
    ff_free(text);
  }
  ff_loader_close(l);
  return status;
}
