/* check.c — `fusionflow check`: the user's pipeline on a sample of their
 * images through fusionflow and through torchvision (or timm) with the same
 * draws, the largest pixel difference per op and per image, and a verdict.
 * The reference lives in Python, so this command checks its options (one
 * line per mistake, as every subcommand) and hands them to the Python
 * package's fusionflow.check module in the Python the user names; that
 * module does the work and owns the report and the exit status. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

static void check_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow check --source SRC (--pipeline TEXT | --recipe NAME) [options]\n"
          "\n"
          "Runs the pipeline on a sample of SRC's images through fusionflow and through the\n"
          "reference, torchvision or timm, with the same random draws (each sample's crop box,\n"
          "flip, augmentation ops and magnitudes, as 'fusionflow plan' prints them), and reports\n"
          "the largest pixel difference after each op and for each image, then a one-line verdict.\n"
          "The last row is the loader's own output (after normalize, in float units). Zero is\n"
          "expected: fusionflow's CPU pixels are torchvision's, bit for bit, unless the pipeline\n"
          "asks otherwise (decode(dct_scale=true)); timm resamples on Pillow, where fusionflow's\n"
          "resize follows torchvision's tensors (up to a few levels apart).\n"
          "\n"
          "  --against REF       torchvision (default; transforms v1 or v2 after --semantics) or timm\n"
          "  --source SRC        imagefolder:DIR, list:FILE, tar:PATTERN of local shards, a folder\n"
          "                      or a .tsv/.txt list (as fusionflow bench)\n"
          "  --pipeline TEXT     ops separated by '|' (fusionflow ops lists them); a final\n"
          "                      mixup_cutmix, a batch stage, is left out of the check\n"
          "  --recipe NAME       a recipe preset's pipeline instead (fusionflow recipe --list)\n"
          "  --samples N         images to check, drawn at random from SRC (default 64; every\n"
          "                      image when SRC has fewer), 1 to 1000000\n"
          "  --seed S            seed of the draws and of the sample (default 0)\n"
          "  --epoch E           epoch of the draws (default 0)\n"
          "  --semantics v1|v2   torchvision.transforms (v1, default) or transforms.v2 arithmetic\n"
          "  --json              one JSON object on stdout instead of the report\n"
          "  --python PY         the Python that runs the reference (default: $FF_PYTHON, else\n"
          "                      python3); it needs fusionflow's Python package (pip install\n"
          "                      ./python) and torch with torchvision (with --against timm: timm)\n"
          "  -h, --help          show this help\n"
          "\n"
          "The same check from Python: python -m fusionflow.check --source ... (the same options).\n"
          "Exit status: 0 every pixel equal, 1 some differ (the verdict says where), 2 usage,\n"
          "3 the check could not run (the reference or fusionflow's package missing in that\n"
          "Python, an unreadable source, a step the reference cannot replay).\n");
}

/* Imports the module in the chosen Python; a missing package is one line and status 3. */
static const char BOOTSTRAP[] =
    "import sys\n"
    "try:\n"
    "    from fusionflow.check import main\n"
    "except ImportError as e:\n"
    "    if not (e.name or '').startswith('fusionflow'):\n"
    "        raise\n"
    "    print(f'fusionflow check: {sys.executable} cannot import fusionflow ({e}): pip install ./python '\n"
    "          '(in a fusionflow checkout) or its wheel there, or name another Python with --python or '\n"
    "          'FF_PYTHON', file=sys.stderr)\n"
    "    sys.exit(3)\n"
    "sys.exit(main(sys.argv[1:]))\n";

/* The build tree keeps the package staged next to the executable (<build>/python/fusionflow):
 * that one goes first on PYTHONPATH, so that `build/fusionflow check` checks this build. */
static void use_staged_package(void) {
  char exe[PATH_MAX], path[PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return;
  *slash = 0;
  snprintf(path, sizeof path, "%s/python/fusionflow/check.py", exe);
  if (access(path, R_OK)) return;
  const char *old = getenv("PYTHONPATH");
  snprintf(path, sizeof path, "%s/python%s%s", exe, old && *old ? ":" : "", old && *old ? old : "");
  setenv("PYTHONPATH", path, 1);
}

int ff__cli_check(int argc, char **argv) {
  enum { O_AGAINST = 256, O_SOURCE, O_PIPELINE, O_RECIPE, O_SAMPLES, O_SEED, O_EPOCH, O_SEMANTICS, O_JSON,
         O_PYTHON };
  static const struct option opts[] = {{"against", required_argument, 0, O_AGAINST},
                                       {"source", required_argument, 0, O_SOURCE},
                                       {"pipeline", required_argument, 0, O_PIPELINE},
                                       {"recipe", required_argument, 0, O_RECIPE},
                                       {"samples", required_argument, 0, O_SAMPLES},
                                       {"seed", required_argument, 0, O_SEED},
                                       {"epoch", required_argument, 0, O_EPOCH},
                                       {"semantics", required_argument, 0, O_SEMANTICS},
                                       {"json", no_argument, 0, O_JSON},
                                       {"python", required_argument, 0, O_PYTHON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  const char *cmd = argv[0], *against = "torchvision", *source = NULL, *pipeline = NULL, *recipe = NULL;
  const char *semantics = "v1", *python = getenv("FF_PYTHON");
  const char *samples = "64", *seed = "0", *epoch = "0";
  long v;
  int json = 0, c, li = 0, sem = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    switch (c) {
    case O_AGAINST:
      if (strcmp(optarg, "torchvision") && strcmp(optarg, "timm"))
        return ff__cli_usage_error(cmd, NULL, "--against expects torchvision or timm, got '%s'", optarg);
      against = optarg;
      break;
    case O_SOURCE: source = optarg; break;
    case O_PIPELINE: pipeline = optarg; break;
    case O_RECIPE: recipe = optarg; break;
    case O_SAMPLES: if (!ff__cli_parse_long("check", "samples", optarg, 1, 1000000, &v)) return 2; samples = optarg; break;
    case O_SEED: if (!ff__cli_parse_long("check", "seed", optarg, 0, LONG_MAX, &v)) return 2; seed = optarg; break;
    case O_EPOCH: if (!ff__cli_parse_long("check", "epoch", optarg, 0, LONG_MAX, &v)) return 2; epoch = optarg; break;
    case O_SEMANTICS: if (!ff__cli_parse_semantics("check", optarg, &sem)) return 2; semantics = optarg; break;
    case O_JSON: json = 1; break;
    case O_PYTHON: python = optarg; break;
    case 'h': check_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (optind < argc) return ff__cli_usage_error(cmd, NULL, "unexpected argument '%s'", argv[optind]);
  if (!source) return ff__cli_usage_error(cmd, NULL, "--source is required");
  if (!pipeline == !recipe) return ff__cli_usage_error(cmd, NULL, "give --pipeline or --recipe (one of them)");
  if (recipe && !ff_recipe_find(recipe)) {
    char text[16];
    ff__cli_recipe_pipeline("check", recipe, 0, text, sizeof text, NULL); /* says which, and the nearest */
    return 2;
  }
  if (!python || !*python) python = "python3";
  char *args[32];
  int n = 0;
  args[n++] = (char *)python, args[n++] = "-c", args[n++] = (char *)BOOTSTRAP;
  args[n++] = "--against", args[n++] = (char *)against, args[n++] = "--source", args[n++] = (char *)source;
  args[n++] = recipe ? "--recipe" : "--pipeline", args[n++] = (char *)(recipe ? recipe : pipeline);
  args[n++] = "--samples", args[n++] = (char *)samples, args[n++] = "--seed", args[n++] = (char *)seed;
  args[n++] = "--epoch", args[n++] = (char *)epoch, args[n++] = "--semantics", args[n++] = (char *)semantics;
  if (json) args[n++] = "--json";
  args[n] = NULL;
  use_staged_package();
  setenv("FF_CLI_VERSION", ff_version(), 1); /* the module notes a package of another version */
  fflush(stdout);
  execvp(python, args);
  fprintf(stderr, "%s: cannot run %s (%s): install Python 3, or name one with --python or FF_PYTHON\n", cmd, python,
          strerror(errno));
  return 3;
}
