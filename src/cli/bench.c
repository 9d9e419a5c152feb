/* bench.c — `fusionflow bench`: runs a loader over a source the way a
 * training loop would (optionally sleeping --step-ms per batch to stand in
 * for the training step) and reports throughput and where the time went:
 * reading, decoding and ops (summed over worker threads) and the time the
 * consumer waited for batches; with --device, how much the cooperative
 * scheduler sent to the device, per batch too (--per-batch), and a timeline
 * (--trace). Human text goes to stderr, --json prints one object on stdout. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/bytes.h"
#include "exec/device.h"
#include "fusionflow/fusionflow.h"

#define DEFAULT_PIPELINE \
  "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow bench --source SRC [options]\n"
          "\n"
          "Runs the loader over SRC and reports images/s, the time split between reading,\n"
          "decoding and ops (summed over worker threads), and how long the consumer waited.\n"
          "\n"
          "  --source SRC          imagefolder:DIR (one sub-folder per class, as torchvision's\n"
          "                        ImageFolder), list:FILE (lines 'path<TAB>label') or\n"
          "                        tar:PATTERN (WebDataset shards: 'tar:/d/train-{000..099}.tar',\n"
          "                        'tar:@LIST', 'tar:http://host/s-{0..9}.tar', 'tar:pipe:CMD'); a\n"
          "                        bare folder means imagefolder:, a .tsv/.txt file list:\n"
          "  --pipeline TEXT       ops separated by '|' (default:\n"
          "                        \"" DEFAULT_PIPELINE "\")\n"
          "  --recipe NAME         a recipe preset's pipeline and repeated augmentations instead\n"
          "                        (fusionflow recipe --list)\n"
          "  --num-classes N       with --recipe: the classes of its mixup_cutmix, 1 to 16777216\n"
          "                        (default 1000)\n"
          "  --repeated-augmentations N\n"
          "                        each sample N times in a row, as timm's RepeatAugSampler\n"
          "                        (default 0: off; with --recipe, the recipe's)\n"
          "  --batch-size N        samples per batch (default 64)\n"
          "  --batches N           stop after N timed batches (default: one epoch)\n"
          "  --epochs N            run N epochs, to the end of the last (default 1; the warmup\n"
          "                        batches are the first of them; ignored with --batches)\n"
          "  --warmup N            untimed batches before timing starts (default 0)\n"
          "  --threads N           CPU worker threads (default: the cores this process may use)\n"
          "  --prefetch N          batches prepared ahead of the consumer (default 2)\n"
          "  --seed N              seed of shuffling and augmentation (default 0)\n"
          "  --no-shuffle          keep the source's order\n"
          "  --drop-last           drop the last batch of an epoch when it is short (DataLoader's)\n"
          "  --sampler-drop-last   cut each rank's share instead of padding it by repeating the\n"
          "                        start of the order (DistributedSampler's drop_last)\n"
          "  --shuffle-buffer N    streamed tar: shards (http, pipe:, compressed): shuffle buffer\n"
          "                        of each rank's stream in samples (default 1000; 0: shard order only)\n"
          "  --permutation P       how an epoch is shuffled: philox (default) or torch\n"
          "                        (torch.randperm seeded with seed + epoch: DistributedSampler's order)\n"
          "  --rank R              shard of this process (default $RANK or 0)\n"
          "  --world-size W        number of shards (default $WORLD_SIZE or 1)\n"
          "  --step-ms MS          sleep MS milliseconds (0 to 1e9) per batch, standing in for a training step\n"
          "  --on-error MODE       raise (default): stop at the first bad sample, naming it;\n"
          "                        skip: leave bad samples out, count them and list them;\n"
          "                        replace: put the next good sample in a bad one's place, count\n"
          "                        and list it (every batch keeps its size)\n"
          "  --max-image-pixels N  refuse images, decoded or made by the pipeline, with more pixels\n"
          "                        (default 89478485; 0: no limit)\n"
          "  --max-jpeg-scans N    refuse progressive JPEGs with more scans (default 500; 0: no limit)\n"
          "  --max-metadata-bytes N\n"
          "                        refuse PNGs with more metadata (text, ICC, EXIF; default 16777216)\n"
          "  --max-member-bytes SIZE\n"
          "                        refuse a tar member or image file of more bytes before reading it\n"
          "                        (e.g. 64M; default 8 bytes a pixel of --max-image-pixels + 16 MiB;\n"
          "                        0: no limit)\n"
          "                        (every limit, streaming's too: docs/limits.md)\n"
          "  --strict-decode       corrupt JPEG data libjpeg repairs is an error (default: a listed warning)\n"
          "  --allow-empty         accept class folders without images (default: refused, as ImageFolder)\n"
          "  --device DEV          where the CPU pool's deficit goes: cpu (default: no offload),\n"
          "                        auto (cuda:0 if usable, else cpu), cuda:N, or emu:N (the\n"
          "                        host-emulated device: same kernels on one host thread)\n"
          "  --device-decode MODE  auto (default: on for CUDA devices with a decoder), on (also\n"
          "                        emu:N), off: whether device-bound samples may be decoded there\n"
          "  --deterministic       bit-identical batches whatever the load (no device decode)\n"
          "  --output-device DEV   where batches are handed out: cpu (default), cuda:N or emu:N\n"
          "                        (the offload device itself: its samples are written in place)\n"
          "  --dtype T             auto (default: float32 after normalize/to_dtype, else uint8),\n"
          "                        float32, bfloat16, float16 (rounded to nearest even) or uint8\n"
          "  --memory-format F     auto (default: NCHW for floats, NHWC for uint8), contiguous\n"
          "                        (NCHW) or channels_last (NHWC memory)\n"
          "  --semantics v1|v2     torchvision.transforms (v1, default) or transforms.v2 arithmetic\n"
          "  --device-memory-limit SIZE\n"
          "                        most device memory the loader may hold, bytes or with a\n"
          "                        K, M or G suffix (default: free memory less the headroom);\n"
          "                        offload needs room for one batch's output tensor (batch size x\n"
          "                        output bytes of a sample) plus a microbatch, or nothing is offloaded\n"
          "  --trace FILE          write a Chrome trace of the timed run to FILE (open it in\n"
          "                        Perfetto or chrome://tracing): worker, device, consumer tracks\n"
          "  --trace-events N      most events the trace keeps (default 262144); later ones\n"
          "                        are dropped and counted\n"
          "  --per-batch           with --json: add each batch's placement and times\n"
          "  --json                print the summary as one JSON object on stdout\n"
          "  --verbose             after a run on the CPU alone, a line on whether a GPU could\n"
          "                        take the deficit here (the CUDA executor, the GPUs it sees)\n"
          "  -h, --help            show this help\n"
          "\n"
          "The report goes to stderr (with a progress bar on a terminal); --json prints one JSON\n"
          "object on stdout instead, for scripts.\n"
          "Opening a streamed source (http://, pipe:, compressed shards) reads every shard once;\n"
          "when that takes over 2 s, a line on stderr says which shard and attempt it waits for,\n"
          "and Ctrl-C gives the open up.\n"
          "Several trainers on one node: FF_NODE_GROUP=NAME (and FF_NODE_THREADS, the node's\n"
          "cores) makes the loaders of NAME share the node's cores through its coordinator\n"
          "(docs/node-coordinator.md); `fusionflow node status\n"
          "NAME` shows it live.\n"
          "Exit status: 0 success, 1 runtime error (the message names the file or cause), 2 usage,\n"
          "130 interrupted (Ctrl-C) while opening.\n");
}

/* The subcommand's integer options (cli/args.c). */
static int parse_long(const char *opt, const char *s, long min, long max, long *out) {
  return ff__cli_parse_long("bench", opt, s, min, max, out);
}

static void json_string(FILE *f, const char *s);

/* "512M" → bytes (core/bytes.h); 0, with a message naming the option, when malformed. */
static int parse_size(const char *opt, const char *s, size_t *out) {
  if (ff__parse_bytes(s, out)) return 1;
  fprintf(stderr, "fusionflow bench: --%s expects bytes (e.g. 512M), got '%s'\n", opt, s);
  return 0;
}

/* The message on stderr, and with --json also as {"error": ...} on stdout
 * so that a reader of stdout always gets one JSON object. */
static void report_error(int json, ff_status st, const char *msg) {
  fprintf(stderr, "fusionflow bench: %s\n", msg);
  if (!json) return;
  printf("{\"error\": ");
  json_string(stdout, msg);
  printf(", \"status\": ");
  json_string(stdout, ff_status_str(st));
  printf("}\n");
}

static void sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
  while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(long done, long total, double elapsed, uint64_t samples) {
  int width = 30, filled = total ? (int)(width * done / total) : 0;
  char bar[64];
  memset(bar, '#', (size_t)filled);
  memset(bar + filled, '.', (size_t)(width - filled));
  bar[width] = 0;
  fprintf(stderr, "\r[%s] %ld/%ld batches  %.0f images/s ", bar, done, total,
          elapsed > 0 ? samples / elapsed : 0.0);
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* After a run on the CPU alone, with --verbose (or --device auto that found
 * none): whether offload could have helped here, in one line. */
static void report_gpus(const char *device) {
  ff__error err = {0};
  int gpus = ff__device_cuda_gpus(&err);
  if (gpus < 0)
    fprintf(stderr, "device: %s; this build has no CUDA executor (nvcc was not found when it was built)\n", device);
  else if (!gpus)
    fprintf(stderr, "device: %s; the CUDA executor is built in, but %s\n", device, err.msg);
  else
    fprintf(stderr, "device: %s; %d GPU%s here: --device auto offloads the CPU's deficit\n", device, gpus,
            gpus == 1 ? "" : "s");
}

/* The bad samples (skipped or replaced) of each epoch the run went through. */
typedef struct bad_counts {
  uint64_t *per_epoch;
  size_t epochs;
  uint64_t counted; /* the sum of per_epoch */
} bad_counts;

/* Closes an epoch's count from the loader's running total. */
static void bad_counts_epoch_end(bad_counts *c, const ff_loader *loader) {
  ff_stats s;
  ff_loader_stats(loader, &s);
  uint64_t *grown = realloc(c->per_epoch, (c->epochs + 1) * sizeof *grown);
  if (!grown) return; /* the per-epoch split is left out; the totals stay right */
  c->per_epoch = grown;
  c->per_epoch[c->epochs++] = s.skipped + s.replaced - c->counted;
  c->counted = s.skipped + s.replaced;
}

/* Sets cfg's pipeline (into buf) and repeated augmentations from recipe name,
 * with its mixup_cutmix's num_classes=1000 (ImageNet's) made num_classes when
 * that is not 0. 0 (after saying why) on a bad combination. */
static int recipe_pipeline(const char *name, int pipeline_given, int num_classes, char *buf, size_t size,
                           ff_config *cfg) {
  const ff_recipe *r;
  char why[512];
  if (pipeline_given) return fprintf(stderr, "fusionflow bench: give --pipeline or --recipe, not both\n"), 0;
  if (!ff__cli_recipe_pipeline("bench", name, num_classes, buf, size, &r)) return 0;
  if (ff_recipe_check(r, why, sizeof why)) return fprintf(stderr, "fusionflow bench: %s\n", why), 0;
  cfg->pipeline = buf;
  cfg->repeated_augmentations = r->repeated_augmentations;
  return 1;
}

int ff__cli_bench(int argc, char **argv) {
  enum { O_SOURCE = 256, O_PIPELINE, O_BATCH, O_BATCHES, O_EPOCHS, O_WARMUP, O_THREADS, O_PREFETCH, O_SEED,
         O_NOSHUFFLE, O_DROPLAST, O_RANK, O_WORLD, O_STEP, O_ONERROR, O_MAXPIX, O_JSON, O_DEVICE, O_DEVMEM,
         O_TRACE, O_TRACE_EVENTS, O_PER_BATCH, O_SCANS, O_METADATA, O_STRICT, O_ALLOW_EMPTY, O_SAMPLER_DROPLAST,
         O_PERMUTATION, O_DEVDECODE, O_DETERMINISTIC, O_OUTDEV, O_DTYPE, O_MEMFMT, O_SEMANTICS, O_SHUFFLE_BUFFER, O_RECIPE,
         O_NUM_CLASSES, O_REPEATS, O_MEMBER, O_VERBOSE };
  static const struct option opts[] = {
      {"source", required_argument, 0, O_SOURCE},     {"pipeline", required_argument, 0, O_PIPELINE},
      {"batch-size", required_argument, 0, O_BATCH},  {"batches", required_argument, 0, O_BATCHES},
      {"epochs", required_argument, 0, O_EPOCHS},     {"warmup", required_argument, 0, O_WARMUP},
      {"threads", required_argument, 0, O_THREADS},   {"prefetch", required_argument, 0, O_PREFETCH},
      {"seed", required_argument, 0, O_SEED},         {"no-shuffle", no_argument, 0, O_NOSHUFFLE},
      {"drop-last", no_argument, 0, O_DROPLAST},      {"rank", required_argument, 0, O_RANK},
      {"world-size", required_argument, 0, O_WORLD},  {"step-ms", required_argument, 0, O_STEP},
      {"on-error", required_argument, 0, O_ONERROR},  {"max-image-pixels", required_argument, 0, O_MAXPIX},
      {"json", no_argument, 0, O_JSON},               {"help", no_argument, 0, 'h'},
      {"device", required_argument, 0, O_DEVICE},     {"device-memory-limit", required_argument, 0, O_DEVMEM},
      {"trace", required_argument, 0, O_TRACE},       {"trace-events", required_argument, 0, O_TRACE_EVENTS},
      {"per-batch", no_argument, 0, O_PER_BATCH},
      {"max-jpeg-scans", required_argument, 0, O_SCANS}, {"max-metadata-bytes", required_argument, 0, O_METADATA},
      {"max-member-bytes", required_argument, 0, O_MEMBER},
      {"strict-decode", no_argument, 0, O_STRICT},       {"allow-empty", no_argument, 0, O_ALLOW_EMPTY},
      {"sampler-drop-last", no_argument, 0, O_SAMPLER_DROPLAST}, {"permutation", required_argument, 0, O_PERMUTATION},
      {"device-decode", required_argument, 0, O_DEVDECODE}, {"deterministic", no_argument, 0, O_DETERMINISTIC},
      {"output-device", required_argument, 0, O_OUTDEV}, {"dtype", required_argument, 0, O_DTYPE},
      {"memory-format", required_argument, 0, O_MEMFMT},
      {"semantics", required_argument, 0, O_SEMANTICS},
      {"shuffle-buffer", required_argument, 0, O_SHUFFLE_BUFFER},
      {"recipe", required_argument, 0, O_RECIPE},     {"num-classes", required_argument, 0, O_NUM_CLASSES},
      {"repeated-augmentations", required_argument, 0, O_REPEATS},
      {"verbose", no_argument, 0, O_VERBOSE},
      {0, 0, 0, 0}};
  ff_config cfg;
  ff_config_init(&cfg);
  cfg.pipeline = DEFAULT_PIPELINE;
  long batches = 0, epochs = 1, warmup = 0, trace_events = 0, v;
  double step_ms = 0;
  int json = 0, per_batch = 0, verbose = 0, c, li = 0;
  const char *trace = NULL, *recipe = NULL;
  long num_classes = 0, repeats = -1;
  int pipeline_given = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    const char *name = opts[li].name;
    switch (c) {
    case O_SOURCE: cfg.source = optarg; break;
    case O_PIPELINE: cfg.pipeline = optarg, pipeline_given = 1; break;
    case O_RECIPE: recipe = optarg; break;
    case O_NUM_CLASSES: if (!ff__cli_parse_num_classes("bench", optarg, &num_classes)) return 2; break;
    case O_REPEATS: if (!parse_long(name, optarg, 0, 4096, &repeats)) return 2; break;
    case O_BATCH: if (!parse_long(name, optarg, 1, INT_MAX, &v)) return 2; cfg.batch_size = (int)v; break;
    case O_BATCHES: if (!parse_long(name, optarg, 1, LONG_MAX, &batches)) return 2; break;
    case O_EPOCHS: if (!parse_long(name, optarg, 1, LONG_MAX, &epochs)) return 2; break;
    case O_WARMUP: if (!parse_long(name, optarg, 0, LONG_MAX, &warmup)) return 2; break;
    case O_THREADS: if (!parse_long(name, optarg, 1, 1024, &v)) return 2; cfg.num_threads = (int)v; break;
    case O_PREFETCH: if (!parse_long(name, optarg, 1, 64, &v)) return 2; cfg.prefetch = (int)v; break;
    case O_SEED: if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2; cfg.seed = (uint64_t)v; break;
    case O_NOSHUFFLE: cfg.shuffle = 0; break;
    case O_DROPLAST: cfg.drop_last = 1; break;
    case O_SAMPLER_DROPLAST: cfg.sampler_drop_last = 1; break;
    case O_SHUFFLE_BUFFER:
      if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
      cfg.shuffle_buffer = (size_t)v;
      break;
    case O_PERMUTATION:
      if (!strcmp(optarg, "philox")) cfg.permutation = FF_PERMUTATION_PHILOX;
      else if (!strcmp(optarg, "torch")) cfg.permutation = FF_PERMUTATION_TORCH;
      else {
        fprintf(stderr, "fusionflow bench: --permutation expects philox or torch, got '%s'\n", optarg);
        return 2;
      }
      break;
    case O_RANK: if (!parse_long(name, optarg, 0, INT_MAX, &v)) return 2; cfg.rank = (int)v; break;
    case O_WORLD: if (!parse_long(name, optarg, 1, INT_MAX, &v)) return 2; cfg.world_size = (int)v; break;
    case O_MAXPIX: if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2; cfg.max_image_pixels = (uint64_t)v; break;
    case O_SCANS: if (!parse_long(name, optarg, 0, INT_MAX, &v)) return 2; cfg.max_jpeg_scans = (int)v; break;
    case O_METADATA:
      if (!parse_long(name, optarg, 0, LONG_MAX, &v)) return 2;
      cfg.max_metadata_bytes = (size_t)v;
      break;
    case O_STRICT: cfg.strict_decode = 1; break;
    case O_ALLOW_EMPTY: cfg.allow_empty = 1; break;
    case O_STEP: if (!ff__cli_parse_double("bench", name, optarg, 0, 1e9, &step_ms)) return 2; break;
    case O_ONERROR:
      if (!strcmp(optarg, "raise")) cfg.on_error = FF_ON_ERROR_RAISE;
      else if (!strcmp(optarg, "skip")) cfg.on_error = FF_ON_ERROR_SKIP;
      else if (!strcmp(optarg, "replace")) cfg.on_error = FF_ON_ERROR_REPLACE;
      else {
        fprintf(stderr, "fusionflow bench: --on-error expects raise, skip or replace, got '%s'\n", optarg);
        return 2;
      }
      break;
    case O_JSON: json = 1; break;
    case O_VERBOSE: verbose = 1; break;
    case O_DEVICE: cfg.device = optarg; break;
    case O_DEVMEM: if (!parse_size(name, optarg, &cfg.device_memory_limit_bytes)) return 2; break;
    case O_MEMBER: {
      size_t bytes;
      if (!parse_size(name, optarg, &bytes)) return 2;
      cfg.max_member_bytes = bytes;
      break;
    }
    case O_TRACE: trace = optarg; break;
    case O_TRACE_EVENTS: if (!parse_long(name, optarg, 1, 1L << 28, &trace_events)) return 2; break;
    case O_PER_BATCH: per_batch = 1; break;
    case O_DETERMINISTIC: cfg.deterministic = 1; break;
    case O_OUTDEV: cfg.output_device = optarg; break;
    case O_DTYPE: {
      static const char *names[] = {"auto", "float32", "bfloat16", "float16", "uint8"};
      cfg.output_dtype = -1;
      for (int k = 0; k < 5; k++)
        if (!strcmp(optarg, names[k])) cfg.output_dtype = k; /* ff_output_dtype */
      if (cfg.output_dtype < 0) {
        fprintf(stderr, "fusionflow bench: --dtype expects auto, float32, bfloat16, float16 or uint8, got '%s'\n",
                optarg);
        return 2;
      }
      break;
    }
    case O_MEMFMT:
      if (!strcmp(optarg, "auto")) cfg.memory_format = FF_MEMORY_FORMAT_AUTO;
      else if (!strcmp(optarg, "contiguous")) cfg.memory_format = FF_MEMORY_FORMAT_CONTIGUOUS;
      else if (!strcmp(optarg, "channels_last")) cfg.memory_format = FF_MEMORY_FORMAT_CHANNELS_LAST;
      else {
        fprintf(stderr, "fusionflow bench: --memory-format expects auto, contiguous or channels_last, got '%s'\n",
                optarg);
        return 2;
      }
      break;
    case O_SEMANTICS: {
      int v2 = 0;
      if (!ff__cli_parse_semantics("bench", optarg, &v2)) return 2;
      cfg.semantics = (ff_semantics)v2;
      break;
    }
    case O_DEVDECODE:
      if (!strcmp(optarg, "auto")) cfg.device_decode = FF_DEVICE_DECODE_AUTO;
      else if (!strcmp(optarg, "on")) cfg.device_decode = FF_DEVICE_DECODE_ON;
      else if (!strcmp(optarg, "off")) cfg.device_decode = FF_DEVICE_DECODE_OFF;
      else {
        fprintf(stderr, "fusionflow bench: --device-decode expects auto, on or off, got '%s'\n", optarg);
        return 2;
      }
      break;
    case 'h': bench_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (optind < argc) return ff__cli_usage_error("fusionflow bench", NULL, "unexpected argument '%s'", argv[optind]);
  char recipe_text[4096];
  if (recipe && !recipe_pipeline(recipe, pipeline_given, (int)num_classes, recipe_text, sizeof recipe_text, &cfg))
    return 2;
  if (!recipe && num_classes) {
    fprintf(stderr, "fusionflow bench: --num-classes goes with --recipe (a pipeline says it in mixup_cutmix)\n");
    return 2;
  }
  if (repeats >= 0) cfg.repeated_augmentations = (int)repeats;
  if (!cfg.source)
    return ff__cli_usage_error("fusionflow bench", NULL, "--source is required (imagefolder:DIR, list:FILE, "
                               "tar:PATTERN, a folder or a .tsv/.txt file)");
  if (per_batch && !json) {
    fprintf(stderr, "fusionflow bench: --per-batch goes with --json\n");
    return 2;
  }
  if (trace) { /* find out now, not after the run, that the trace cannot be written */
    FILE *f = fopen(trace, "w");
    if (!f) {
      fprintf(stderr, "fusionflow bench: --trace %s: %s\n", trace, strerror(errno));
      return 1;
    }
    fclose(f);
  }

  /* Without warm-up the clock includes opening: the workers start there. */
  double t0 = now_s();
  ff_loader *loader;
  ff__cli_opening opening;
  ff__cli_opening_start(&opening, "fusionflow bench");
  cfg.open_progress = ff__cli_opening_progress, cfg.open_progress_ctx = &opening;
  ff_status st = ff_loader_open(&cfg, &loader);
  if (ff__cli_opening_end(&opening)) {
    ff_loader_close(loader);
    return 130;
  }
  if (st) {
    char msg[1024];
    const char *why = ff_loader_errmsg(loader);
    if (recipe && repeats < 0 && strstr(why, "repeated_augmentations needs random access")) /* a streamed source */
      snprintf(msg, sizeof msg, "%s (--repeated-augmentations 0 turns the recipe's repeats off)", why), why = msg;
    report_error(json, st, why);
    ff_loader_close(loader);
    return st == FF_EINVAL || st == FF_EPIPELINE ? 2 : 1;
  }
  long per_epoch = (long)ff_loader_num_batches(loader);
  /* With --epochs, total only bounds the batches: an epoch whose batches were all skipped hands out fewer,
   * and the run ends with the last epoch, not in the next */
  long total = batches ? batches : per_epoch * epochs - warmup;
  if (total < 0) total = 0;
  int bar = isatty(2);
  ff_stats base = {0}, end;
  ff_loader_stats(loader, &end);
  /* in a node group the coordinator moves the threads: the count is the latest, not the run's */
  const char *group = *end.node_group ? end.node_group : NULL;
  if (!json || bar)
    fprintf(stderr,
            "fusionflow bench: %zu of %zu samples (rank %d), %ld batch%s of %d per epoch, %ld timed after %ld "
            "untimed warm-up, %d thread%s%s%s%s\n",
            ff_loader_num_samples(loader), ff_loader_dataset_size(loader), cfg.rank < 0 ? 0 : cfg.rank, per_epoch,
            per_epoch == 1 ? "" : "es", cfg.batch_size, total, warmup, end.num_threads,
            end.num_threads == 1 ? "" : "s", group ? " at normal priority to start, in node group " : "",
            group ? group : "", group ? " (its coordinator moves them)" : "");

  ff_batch_info *infos = per_batch && json ? calloc((size_t)total, sizeof *infos) : NULL;
  if (per_batch && json && !infos) {
    report_error(json, FF_ENOMEM, "out of memory for --per-batch");
    ff_loader_close(loader);
    return 1;
  }
  if (trace && !warmup && (st = ff_loader_trace_start(loader, (size_t)trace_events))) {
    report_error(json, st, ff_loader_errmsg(loader));
    ff_loader_close(loader);
    return 1;
  }
  long done = -warmup, device_batches = 0;
  double share_sum = 0;
  uint64_t epoch = 0;
  bad_counts bad = {0};
  int in_epoch = 0; /* a batch taken since the last epoch's end */
  while (done < total) {
    ff_batch *b;
    st = ff_loader_next(loader, &b);
    if (st == FF_END) {
      bad_counts_epoch_end(&bad, loader);
      int empty = !in_epoch; /* every sample failed (or drop_last left no batch): so would the next epochs */
      in_epoch = 0;
      if (++epoch == (uint64_t)epochs && !batches) break;
      if (empty) break;
      ff_loader_set_epoch(loader, epoch);
      continue;
    }
    if (st) break;
    in_epoch = 1;
    if (done >= 0) {
      ff_batch_info info;
      ff_batch_stats(b, &info);
      device_batches += info.device_samples > 0;
      share_sum += info.offload_share;
      if (infos) infos[done] = info;
    }
    ff_batch_release(b);
    sleep_ms(step_ms);
    if (++done == 0) {
      if (trace && (st = ff_loader_trace_start(loader, (size_t)trace_events))) break;
      ff_loader_stats(loader, &base);
      t0 = now_s();
    }
    if (bar && done > 0 && (done % 5 == 0 || done == total)) {
      ff_stats s;
      ff_loader_stats(loader, &s);
      progress(done, total, now_s() - t0, s.samples - base.samples);
    }
  }
  double elapsed = now_s() - t0;
  total = done < 0 ? 0 : done; /* the batches timed */
  if (bar) fputc('\n', stderr);
  ff_loader_stats(loader, &end);
  if (in_epoch || end.skipped + end.replaced > bad.counted) bad_counts_epoch_end(&bad, loader); /* the epoch the run ended in */
  size_t trace_kept = 0, trace_dropped = 0;
  if ((!st || st == FF_END) && trace) st = ff_loader_trace_write(loader, trace, &trace_kept, &trace_dropped);
  char none[1536];
  if ((!st || st == FF_END) && !end.samples && end.skipped + end.replaced) { /* under skip: the run read nothing */
    snprintf(none, sizeof none, "no sample could be read: all %llu tried failed; the first: %s",
             (unsigned long long)(end.skipped + end.replaced), ff_loader_skipped(loader, 0) ? ff_loader_skipped(loader, 0) : "?");
    st = FF_EEMPTY;
  } else if (st && st != FF_END) {
    snprintf(none, sizeof none, "%s", ff_loader_errmsg(loader));
  }
  if (st && st != FF_END) {
    report_error(json, st, none);
    ff_loader_close(loader);
    free(infos);
    free(bad.per_epoch);
    return 1;
  }
  uint64_t samples = end.samples - base.samples;
  double rate = elapsed > 0 ? samples / elapsed : 0;
  double read_s = (end.read_ns - base.read_ns) * 1e-9, decode_s = (end.decode_ns - base.decode_ns) * 1e-9;
  double ops_s = (end.ops_ns - base.ops_ns) * 1e-9, wait_s = (end.wait_ns - base.wait_ns) * 1e-9;
  uint64_t dev_samples = end.device_samples - base.device_samples;
  uint64_t fallbacks = end.device_fallbacks - base.device_fallbacks;
  double device_s = (end.device_ns - base.device_ns) * 1e-9, device_share = samples ? (double)dev_samples / samples : 0;
  if (json) {
    printf("{\"images_per_s\": %.1f, \"batches\": %ld, \"samples\": %llu, \"elapsed_s\": %.4f, "
           "\"read_s\": %.4f, \"decode_s\": %.4f, \"ops_s\": %.4f, \"wait_s\": %.4f, \"threads\": %d, "
           "\"node_group\": ",
           rate, total, (unsigned long long)samples, elapsed, read_s, decode_s, ops_s, wait_s, end.num_threads);
    json_string(stdout, end.node_group);
    printf(", \"batch_size\": %d, \"step_ms\": %g, \"read_bytes\": %llu, \"skipped\": %llu, \"replaced\": %llu, "
           "\"bad_per_epoch\": [",
           cfg.batch_size, step_ms, (unsigned long long)(end.read_bytes - base.read_bytes),
           (unsigned long long)end.skipped, (unsigned long long)end.replaced);
    for (size_t i = 0; i < bad.epochs; i++) printf("%s%llu", i ? ", " : "", (unsigned long long)bad.per_epoch[i]);
    printf("], \"skipped_samples\": [");
    for (size_t i = 0; ff_loader_skipped(loader, i); i++) {
      if (i) printf(", ");
      json_string(stdout, ff_loader_skipped(loader, i));
    }
    printf("], \"ignored_files\": %llu, \"ignored_members\": %llu, \"warnings\": %llu, \"warning_samples\": [",
           (unsigned long long)end.source_ignored_files, (unsigned long long)end.source_ignored_members,
           (unsigned long long)end.warnings);
    for (size_t i = 0; ff_loader_warning(loader, i); i++) {
      if (i) printf(", ");
      json_string(stdout, ff_loader_warning(loader, i));
    }
    printf("], \"op_costs\": {");
    ff_op_cost costs[64];
    size_t nc = ff_loader_op_costs(loader, costs, 64);
    for (size_t i = 0; i < nc && i < 64; i++)
      printf("%s\"%s\": {\"calls\": %llu, \"ns_per_image\": %.1f, \"ns_per_pixel\": %.4f}", i ? ", " : "",
             costs[i].op, (unsigned long long)costs[i].calls, (double)costs[i].ns / (double)costs[i].calls,
             costs[i].pixels ? (double)costs[i].ns / (double)costs[i].pixels : 0.0);
    printf("}, \"pipeline\": ");
    json_string(stdout, cfg.pipeline);
    printf(", \"device\": ");
    json_string(stdout, end.device);
    printf(", \"device_share\": %.4f, \"device_samples\": %llu, \"device_s\": %.4f, \"device_fallbacks\": %llu, "
           "\"device_batches\": %ld, \"offload_share_mean\": %.4f, \"offload_share\": %.4f, \"stall_share\": %.4f, "
           "\"device_pool_limit_bytes\": %zu, \"device_pool_peak_bytes\": %zu",
           device_share, (unsigned long long)dev_samples, device_s, (unsigned long long)fallbacks, device_batches,
           total ? share_sum / total : 0.0, end.offload_share, elapsed > 0 ? wait_s / elapsed : 0.0,
           end.device_pool_limit_bytes, end.device_pool_peak_bytes);
    printf(", \"device_decoder\": ");
    json_string(stdout, end.device_decoder);
    printf(", \"device_decoder_note\": ");
    json_string(stdout, end.device_decoder_note);
    printf(", \"device_decode_fallbacks\": %llu, \"decoders\": ",
           (unsigned long long)(end.device_decode_fallbacks - base.device_decode_fallbacks));
    json_string(stdout, end.decoders);
    printf(", \"cpu_decodes\": %llu, \"device_decodes\": %llu, \"device_decode_failures\": %llu, "
           "\"device_decode_failed_batches\": %llu, \"device_decode_small_batches\": %llu, \"placements\": {",
           (unsigned long long)(end.cpu_decodes - base.cpu_decodes),
           (unsigned long long)(end.device_decodes - base.device_decodes),
           (unsigned long long)(end.device_decode_failures - base.device_decode_failures),
           (unsigned long long)(end.device_decode_failed_batches - base.device_decode_failed_batches),
           (unsigned long long)(end.device_decode_small_batches - base.device_decode_small_batches));
    static const char *const placement_names[FF_PLACEMENTS] = {"cpu", "split", "device", "remote"};
    for (int p = 0; p < FF_PLACEMENTS; p++) {
      uint64_t n = end.placement_samples[p] - base.placement_samples[p];
      double cpu_us = (double)(end.placement_cpu_ns[p] - base.placement_cpu_ns[p]) * 1e-3;
      double read_us = (double)(end.placement_read_ns[p] - base.placement_read_ns[p]) * 1e-3;
      printf("%s\"%s\": {\"samples\": %llu, \"cpu_us_per_sample\": %.1f, \"read_us_per_sample\": %.1f}",
             p ? ", " : "", placement_names[p], (unsigned long long)n, n ? cpu_us / (double)n : 0.0,
             n ? read_us / (double)n : 0.0);
    }
    printf("}");
    uint64_t mbs = end.remote_microbatches - base.remote_microbatches;
    printf(", \"remote\": {\"workers\": %d, \"share\": %.4f, \"microbatches\": %llu, \"latency_ms_mean\": %.3f, "
           "\"rtt_ms\": %.3f, \"bytes_sent\": %llu, \"bytes_received\": %llu, \"retries\": %llu, "
           "\"fallbacks\": %llu, \"timeouts\": %llu, \"late\": %llu, \"note\": ",
           end.remote_workers, end.remote_share, (unsigned long long)mbs,
           mbs ? (double)(end.remote_latency_ns - base.remote_latency_ns) * 1e-6 / (double)mbs : 0.0,
           end.remote_rtt_s * 1e3, (unsigned long long)(end.remote_bytes_sent - base.remote_bytes_sent),
           (unsigned long long)(end.remote_bytes_received - base.remote_bytes_received),
           (unsigned long long)(end.remote_retries - base.remote_retries),
           (unsigned long long)(end.remote_fallbacks - base.remote_fallbacks),
           (unsigned long long)(end.remote_timeouts - base.remote_timeouts),
           (unsigned long long)(end.remote_late - base.remote_late));
    json_string(stdout, end.remote_note ? end.remote_note : "");
    printf("}");
    /* The same-region decode limit: what the pool would prepare if it only
     * decoded, at the regions and DCT scales the plans chose (the measured
     * CPU decodes of this run), beside the end-to-end figure. */
    uint64_t decoded = (end.placement_samples[FF_PLACEMENT_CPU] - base.placement_samples[FF_PLACEMENT_CPU]) +
                       (end.placement_samples[FF_PLACEMENT_SPLIT] - base.placement_samples[FF_PLACEMENT_SPLIT]);
    double dec_ms = decoded && decode_s > 0 ? 1e3 * decode_s / (double)decoded : 0;
    printf(", \"same_region_decode\": {\"cpu_decoded_samples\": %llu, \"decode_ms_per_sample\": %.4f, "
           "\"limit_images_per_s\": %.1f, \"end_to_end_over_decode\": %.3f",
           (unsigned long long)decoded, dec_ms, dec_ms > 0 ? end.num_threads * 1e3 / dec_ms : 0.0,
           dec_ms > 0 && samples ? (read_s + decode_s + ops_s) / decode_s : 0.0);
    /* The same split in the worker threads' own CPU time, which other
     * processes on the machine do not inflate: per image, all of a CPU
     * sample's work, its decode, and the rest (read, ops, output). */
    uint64_t cn = end.thread_cpu_samples - base.thread_cpu_samples;
    double cpu_us = cn ? (double)(end.thread_cpu_ns - base.thread_cpu_ns) * 1e-3 / (double)cn : 0.0;
    double dec_us = cn ? (double)(end.thread_decode_cpu_ns - base.thread_decode_cpu_ns) * 1e-3 / (double)cn : 0.0;
    printf(", \"thread_cpu_samples\": %llu, \"cpu_us_per_image\": %.1f, \"decode_cpu_us_per_image\": %.1f, "
           "\"non_decode_cpu_us_per_image\": %.1f, \"end_to_end_over_decode_cpu\": %.3f}",
           (unsigned long long)cn, cpu_us, dec_us, cpu_us - dec_us, dec_us > 0 ? cpu_us / dec_us : 0.0);
    if (trace)
      printf(", \"trace_events\": %zu, \"trace_dropped\": %zu", trace_kept, trace_dropped);
    if (infos) {
      printf(", \"per_batch\": [");
      for (long i = 0; i < total; i++) {
        const ff_batch_info *x = &infos[i];
        printf("%s\n  {\"cpu\": %zu, \"device\": %zu, \"fallbacks\": %zu, \"wait_ms\": %.3f, \"cpu_ms\": %.3f, "
               "\"device_ms\": %.3f, \"share\": %.4f, \"device_bytes\": %zu, \"placed\": [%zu, %zu, %zu], "
               "\"decode_fallbacks\": %zu}",
               i ? "," : "", x->cpu_samples, x->device_samples, x->device_fallbacks, x->wait_ns * 1e-6,
               x->cpu_ns * 1e-6, x->device_ns * 1e-6, x->offload_share, x->device_bytes, x->placement_samples[0],
               x->placement_samples[1], x->placement_samples[2], x->device_decode_fallbacks);
      }
      printf("]");
    }
    printf("}\n");
  } else {
    double work = read_s + decode_s + ops_s;
    fprintf(stderr,
            "%.1f images/s  (%llu images in %.2f s, %ld timed batches, %d thread%s%s)\n"
            "worker time, summed over the worker threads: read %.2f s (%.0f%%), decode %.2f s (%.0f%%), "
            "ops %.2f s (%.0f%%)\n"
            "consumer waited %.2f s (%.0f%% of the run)%s\n",
            rate, (unsigned long long)samples, elapsed, total, end.num_threads, end.num_threads == 1 ? "" : "s",
            group ? " at normal priority at the end" : "", read_s,
            work > 0 ? 100 * read_s / work : 0, decode_s, work > 0 ? 100 * decode_s / work : 0, ops_s,
            work > 0 ? 100 * ops_s / work : 0, wait_s, elapsed > 0 ? 100 * wait_s / elapsed : 0,
            step_ms > 0 ? ": the training step's stall"
                        : ": expected, the consumer only waits (--step-ms N stands in for a training step)");
    if (strcmp(end.device, "cpu"))
      fprintf(stderr, "decoders: %s (%llu images on the CPU workers, %llu on the device%s%s)\n", end.decoders,
              (unsigned long long)(end.cpu_decodes - base.cpu_decodes),
              (unsigned long long)(end.device_decodes - base.device_decodes),
              strcmp(end.device_decoder, "none") ? "" : "; device decode off: ",
              strcmp(end.device_decoder, "none") ? "" : end.device_decoder_note);
    else  /* a CPU run names no device (the JSON keeps every field) */
      fprintf(stderr, "decoders: %s (%llu images)\n", end.decoders,
              (unsigned long long)(end.cpu_decodes - base.cpu_decodes));
    if (strcmp(end.device, "cpu"))
      fprintf(stderr, "device %s: %.0f%% of the samples (%llu), %.2f s device time, %llu fell back to the CPU; "
              "pool peak %.1f of %.1f MiB\n", end.device, 100 * device_share, (unsigned long long)dev_samples,
              device_s, (unsigned long long)fallbacks, end.device_pool_peak_bytes / 1048576.0,
              end.device_pool_limit_bytes / 1048576.0);
    else if (cfg.device && !strcmp(cfg.device, "auto") && verbose)
      report_gpus("none (auto found no usable GPU), the CPU alone");
    else if (cfg.device && !strcmp(cfg.device, "auto"))
      fprintf(stderr, "device: none (auto found no usable GPU), the CPU alone\n");
    else if (verbose)
      report_gpus("cpu");
  }
  if (trace)
    fprintf(stderr, "trace: %zu events in %s%s\n", trace_kept, trace,
            trace_dropped ? " (capped: later events dropped; raise --trace-events)" : "");
  if ((end.skipped || end.replaced) && !json) {
    size_t files = 0;
    while (ff_loader_skipped(loader, files)) files++;
    fprintf(stderr, "%s %llu bad sample%s, %zu distinct failure%s", end.skipped ? "skipped" : "replaced",
            (unsigned long long)(end.skipped + end.replaced), end.skipped + end.replaced == 1 ? "" : "s", files,
            files == 1 ? "" : "s");
    for (size_t i = 0; i < bad.epochs && bad.epochs > 1; i++)
      fprintf(stderr, "%s epoch %zu: %llu", i ? "," : " (per epoch:", i, (unsigned long long)bad.per_epoch[i]);
    fprintf(stderr, "%s:\n", bad.epochs > 1 ? ")" : "");
    for (size_t i = 0; ff_loader_skipped(loader, i); i++) fprintf(stderr, "  %s\n", ff_loader_skipped(loader, i));
  }
  if (end.warnings && !json) {
    fprintf(stderr, "decoded %llu samples despite corrupt data (--strict-decode refuses them):\n",
            (unsigned long long)end.warnings);
    for (size_t i = 0; ff_loader_warning(loader, i); i++) fprintf(stderr, "  %s\n", ff_loader_warning(loader, i));
  }
  if (end.source_ignored_files && !json)
    fprintf(stderr, "ignored %llu files in the class folders without an image extension (.jpg .jpeg .png .ppm "
            ".bmp .pgm .tif .tiff .webp), as torchvision's ImageFolder ignores them\n",
            (unsigned long long)end.source_ignored_files);
  if (end.source_ignored_members && !json)
    fprintf(stderr, "ignored %llu tar member%s that belong to no sample (no suffix, .json, .txt, a second image, ...), "
            "as webdataset ignores them (fusionflow shards check lists the shards)\n",
            (unsigned long long)end.source_ignored_members, end.source_ignored_members == 1 ? "" : "s");
  ff_loader_close(loader);
  free(infos);
  free(bad.per_epoch);
  return 0;
}
