/* augment.c — `fusionflow augment IN OUT`: runs a pipeline on one image and
 * writes the result as PNG, so a user can see what a policy does; --grid N
 * lays N draws (sample indices I .. I+N-1) out as one contact sheet, each
 * tile labelled with its sample index, and --plan prints each draw's plan. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "fusionflow/fusionflow.h"

#define GAP_PX 6
#define BACKGROUND 40
#define LABEL_SCALE 2                       /* the 3x5 digits drawn 2x: 6x10 px */
#define LABEL_H (5 * LABEL_SCALE + 4)      /* the band above each row of tiles */

/* 3x5 pixel digits, rows top to bottom, 3 bits each (MSB left). */
static const unsigned short digits[10] = {
    075557, 026227, 071747, 071717, 055711, 074717, 074757, 071111, 075757, 075717};

/* Writes the decimal `value` in light gray at (x0, y0) of an RGB sheet. */
static void draw_label(uint8_t *sheet, int sheet_w, int sheet_h, int x0, int y0, unsigned long long value) {
  char text[24];
  int n = snprintf(text, sizeof text, "%llu", value);
  for (int i = 0; i < n; i++) {
    unsigned short g = digits[text[i] - '0'];
    for (int r = 0; r < 5; r++)
      for (int c = 0; c < 3; c++) {
        if (!(g >> ((4 - r) * 3 + (2 - c)) & 1)) continue;
        for (int dy = 0; dy < LABEL_SCALE; dy++)
          for (int dx = 0; dx < LABEL_SCALE; dx++) {
            int x = x0 + (i * 4 + c) * LABEL_SCALE + dx, y = y0 + r * LABEL_SCALE + dy;
            if (x < sheet_w && y < sheet_h) memset(sheet + ((size_t)y * sheet_w + x) * 3, 220, 3);
          }
      }
  }
}

static void augment_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow augment IN OUT --pipeline TEXT [options]\n"
          "\n"
          "Runs the pipeline on the image IN (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP) as the\n"
          "loader would for one sample and writes the result to OUT as PNG (before any final\n"
          "to_dtype/normalize); OUT must end in .png (or have no extension).\n"
          "\n"
          "  --pipeline TEXT   ops separated by '|', starting with decode, e.g.\n"
          "                    \"decode | random_resized_crop(size=224) | rand_augment(num_ops=2, magnitude=9)\"\n"
          "  --seed N          seed (default 0)\n"
          "  --epoch N         epoch (default 0)\n"
          "  --index I         sample index: with the seed and epoch it fixes every random draw (default 0)\n"
          "  --grid N          a contact sheet of N draws (indices I .. I+N-1, 1 <= N <= 400)\n"
          "                    instead of one image, each tile labelled with its sample index\n"
          "  --semantics v1|v2 torchvision.transforms (v1, default) or transforms.v2 arithmetic\n"
          "  --plan            also print each draw's plan to stdout, one JSON object per line\n"
          "                    (the keys of `fusionflow plan`)\n"
          "  -h, --help        show this help\n"
          "\n"
          "Exit status: 0 success, 1 runtime error, 2 usage.\n");
}

static int write_png(const char *path, const uint8_t *rgb, int height, int width) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "fusionflow augment: %s: %s\n", path, strerror(errno));
    return 0;
  }
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  struct spng_ihdr ihdr = {(uint32_t)width, (uint32_t)height, 8, SPNG_COLOR_TYPE_TRUECOLOR, 0, 0, 0};
  int rc = ctx ? spng_set_png_file(ctx, f) : SPNG_EMEM;
  if (!rc) rc = spng_set_ihdr(ctx, &ihdr);
  if (!rc) rc = spng_encode_image(ctx, rgb, (size_t)width * height * 3, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  spng_ctx_free(ctx);
  if (fclose(f) != 0 && !rc) rc = SPNG_EIO;
  if (rc) fprintf(stderr, "fusionflow augment: %s: cannot write PNG: %s\n", path, spng_strerror(rc));
  return !rc;
}

static int parse_u64(const char *opt, const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (!*s || *end || errno || *s == '-') {
    fprintf(stderr, "fusionflow augment: %s expects a non-negative integer, got '%s'\n", opt, s);
    return 0;
  }
  *out = v;
  return 1;
}

int ff__cli_augment(int argc, char **argv) {
  static const struct option opts[] = {{"pipeline", required_argument, 0, 'p'}, {"seed", required_argument, 0, 's'},
                                       {"epoch", required_argument, 0, 'e'},    {"index", required_argument, 0, 'i'},
                                       {"grid", required_argument, 0, 'g'},     {"help", no_argument, 0, 'h'},
                                       {"plan", no_argument, 0, 'P'},           {"semantics", required_argument, 0, 'S'},
                                       {0, 0, 0, 0}};
  const char *pipeline = NULL;
  uint64_t seed = 0, epoch = 0, index = 0, grid = 0;
  int c, li = 0, print_plans = 0, semantics = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    switch (c) {
    case 'p': pipeline = optarg; break;
    case 's': if (!parse_u64("--seed", optarg, &seed)) return 2; break;
    case 'e': if (!parse_u64("--epoch", optarg, &epoch)) return 2; break;
    case 'i': if (!parse_u64("--index", optarg, &index)) return 2; break;
    case 'g':
      if (!parse_u64("--grid", optarg, &grid)) return 2;
      if (grid < 1 || grid > 400) {
        fprintf(stderr, "fusionflow augment: --grid expects 1 to 400 draws, got %s\n", optarg);
        return 2;
      }
      break;
    case 'P': print_plans = 1; break;
    case 'S': if (!ff__cli_parse_semantics("augment", optarg, &semantics)) return 2; break;
    case 'h': augment_usage(stdout); return 0;
    default: return 2; /* ff__cli_getopt said why */
    }
  }
  if (argc - optind != 2 || !pipeline)
    return ff__cli_usage_error("fusionflow augment", NULL, "%s",
                               !pipeline              ? "--pipeline is required"
                               : argc - optind < 2    ? "expects IN and OUT (the image, and the PNG to write)"
                                                      : "expects only IN and OUT");
  const char *in = argv[optind], *out = argv[optind + 1];
  const char *base = strrchr(out, '/'), *ext = strrchr(base ? base : out, '.');
  if (ext && ext != (base ? base + 1 : out) && strcasecmp(ext, ".png")) {
    fprintf(stderr, "fusionflow augment: %s: augment writes PNG, and the name says %s: name it .png\n", out, ext);
    return 2;
  }
  int n = grid ? (int)grid : 1, cols = (int)ceil(sqrt((double)n)), rows = (n + cols - 1) / cols;
  uint8_t **images = calloc((size_t)n, sizeof *images);
  int *hs = calloc((size_t)n, sizeof *hs), *ws = calloc((size_t)n, sizeof *ws);
  int cell_h = 0, cell_w = 0, ok = images && hs && ws;
  char msg[4096 + 512]; /* a path of PATH_MAX bytes and the reason */
  for (int k = 0; ok && k < n; k++) {
    ff_status st = ff_image_augment_as(in, pipeline, (ff_semantics)semantics, seed, epoch, index + (uint64_t)k,
                                       &images[k], &hs[k], &ws[k], msg, sizeof msg);
    if (st) {
      fprintf(stderr, "fusionflow augment: %s\n", msg);
      ok = 0;
      c = st == FF_EPIPELINE || st == FF_EINVAL ? 2 : 1;
      break;
    }
    if (msg[0] && !k) fprintf(stderr, "fusionflow augment: warning: %s\n", msg); /* repaired damage, as bench lists it */
    if (print_plans) {
      char *plan = NULL;
      st = ff_image_plan_as(in, pipeline, (ff_semantics)semantics, seed, epoch, index + (uint64_t)k, &plan, msg,
                            sizeof msg);
      if (st) {
        fprintf(stderr, "fusionflow augment: %s\n", msg);
        ok = 0;
        c = 1;
        break;
      }
      ff__cli_print_plan(plan, 1);
      ff_free(plan);
    }
    cell_h = hs[k] > cell_h ? hs[k] : cell_h;
    cell_w = ws[k] > cell_w ? ws[k] : cell_w;
  }
  int status = ok ? 0 : (c == 2 ? 2 : 1);
  if (ok && !grid) {
    status = write_png(out, images[0], hs[0], ws[0]) ? 0 : 1;
  } else if (ok) {
    int sheet_w = cols * cell_w + (cols + 1) * GAP_PX, sheet_h = rows * (cell_h + LABEL_H) + (rows + 1) * GAP_PX;
    uint8_t *sheet = malloc((size_t)sheet_w * sheet_h * 3);
    if (!sheet) {
      fprintf(stderr, "fusionflow augment: out of memory for a %dx%d sheet\n", sheet_w, sheet_h);
      status = 1;
    } else {
      memset(sheet, BACKGROUND, (size_t)sheet_w * sheet_h * 3);
      for (int k = 0; k < n; k++) {
        int x0 = GAP_PX + (k % cols) * (cell_w + GAP_PX);
        int y0 = GAP_PX + (k / cols) * (cell_h + LABEL_H + GAP_PX) + LABEL_H;
        draw_label(sheet, sheet_w, sheet_h, x0, y0 - LABEL_H + 1, (unsigned long long)(index + (uint64_t)k));
        for (int y = 0; y < hs[k]; y++)
          memcpy(sheet + ((size_t)(y0 + y) * sheet_w + x0) * 3, images[k] + (size_t)y * ws[k] * 3, (size_t)ws[k] * 3);
      }
      status = write_png(out, sheet, sheet_h, sheet_w) ? 0 : 1;
      free(sheet);
    }
  }
  if (!status) fprintf(stderr, "fusionflow augment: wrote %s (%d draw%s)\n", out, n, n > 1 ? "s" : "");
  for (int k = 0; images && k < n; k++) ff_free(images[k]);
  free(images), free(hs), free(ws);
  return status;
}
