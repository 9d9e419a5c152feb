/* shards.c — `fusionflow shards make|check`: writing WebDataset shards from
 * any source and verifying a set of shards.
 *
 * make reads the source's index in its order (a folder's is torchvision's
 * ImageFolder order) and writes each sample as two tar members, KEY.EXT (the
 * encoded bytes as they are) and KEY.cls (the label in decimal), KEY the
 * sample's zero-padded position, with libarchive (pax-restricted ustar,
 * uncompressed, every owner and time field 0): the same source gives the
 * same bytes on every run. A shard is closed before it would pass
 * --shard-size or --shard-samples. The manifest (OUT/manifest.tsv) lists each
 * shard with its sample count and size; it is also a shard list for
 * `tar:@OUT/manifest.tsv`. OUT must be new or empty (no stale shard of an
 * earlier run beside these); the manifest is written as manifest.tsv.part
 * and renamed once every shard is closed, and a failed make removes its
 * shards, that file and the OUT it created.
 *
 * check indexes the shards as the tar: source does, reports the samples,
 * labels and ignored members of each shard and every member that makes no
 * sample, compares the counts with a manifest when one is given, then
 * decodes every image on a pool of threads through the loader (a progress
 * bar on a terminal) and lists the images that do not decode. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/bytes.h"
#include "core/nearest.h"
#include "exec/cpu.h"
#include "source/source.h"
#include "source/tar.h"

static void shards_usage(FILE *f) {
  fprintf(f,
          "usage: fusionflow shards make SRC OUT [--shard-size SIZE] [--shard-samples N] [--prefix NAME]\n"
          "       fusionflow shards check PATTERN [--threads N] [--json]\n"
          "\n"
          "make   writes the samples of source SRC (imagefolder:DIR, list:FILE, tar:PATTERN, a folder\n"
          "       or a .tsv/.txt list) into WebDataset tar shards OUT/NAME-000000.tar, ... in the\n"
          "       source's order: per sample KEY.jpg|jpeg|png|webp (the file's bytes, its extension\n"
          "       in lower case) and KEY.cls (the label in decimal), KEY the sample's position\n"
          "       zero-padded. The same source gives byte-identical shards. OUT/manifest.tsv lists\n"
          "       'NAME<TAB>SAMPLES<TAB>BYTES' per shard; 'tar:@OUT/manifest.tsv' reads them back.\n"
          "       OUT must be new or empty; a make that fails removes what it wrote (no manifest).\n"
          "  --shard-size SIZE   largest shard in bytes: 1G, 1GB, 512M, 65536 (binary multiples;\n"
          "                      default 1G); a sample larger than it gets a shard of its own\n"
          "  --shard-samples N   most samples per shard (default 100000)\n"
          "  --prefix NAME       shard name prefix (default 'shard')\n"
          "\n"
          "check  indexes the shards of PATTERN (tar:PATTERN or PATTERN: brace notation, '::'\n"
          "       between patterns, @FILE for a list such as a manifest) and reports per shard its\n"
          "       samples, the labels, the members ignored and each member that makes no sample\n"
          "       (missing, non-integer or out-of-range .cls, a member repeated in its sample, also\n"
          "       as a link, a key that comes back, truncation), which the loader refuses at open\n"
          "       (on_error=raise) or leaves out with its sample (skip, replace); with @MANIFEST it\n"
          "       compares the counts with the manifest's; then decodes every image (progress\n"
          "       bar on a terminal) and lists those that do not decode.\n"
          "  --threads N         decoding threads (default: the cores this process may use)\n"
          "  --json              one JSON object on stdout: shards, samples, classes, ignored,\n"
          "                      bad, undecodable, manifest_mismatches, ok\n"
          "\n"
          "Shard indexes are cached in $FF_CACHE_DIR/tar (default ~/.cache/fusionflow/tar).\n"
          "Opening streamed shards (http://, pipe:, compressed) reads each one; when that takes\n"
          "over 2 s, a line on stderr says which shard and attempt it waits for, and Ctrl-C\n"
          "gives the open up.\n"
          "Exit status: 0 success (check: every shard and image fine), 1 runtime error or a\n"
          "problem found, 2 usage, 130 interrupted (Ctrl-C) while opening.\n");
}

/* ------------------------------------------------------------------ make */

typedef struct shard_writer {
  const char *out, *prefix;
  struct archive *a;
  unsigned shard;          /* number of the open shard */
  uint64_t bytes, samples; /* of the open shard */
  FILE *manifest;
} shard_writer;

/* Bytes a member takes in the tar: its header block and data rounded up to 512. */
static uint64_t member_bytes(uint64_t size) { return 512 + (size + 511) / 512 * 512; }

static int writer_close_shard(shard_writer *w) {
  if (!w->a) return 0;
  int bad = archive_write_close(w->a) != ARCHIVE_OK;
  if (bad) fprintf(stderr, "fusionflow shards make: %s/%s-%06u.tar: %s\n", w->out, w->prefix, w->shard,
                   archive_error_string(w->a));
  archive_write_free(w->a);
  w->a = NULL;
  char path[FF__PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s-%06u.tar", w->out, w->prefix, w->shard);
  struct stat sb;
  fprintf(w->manifest, "%s-%06u.tar\t%" PRIu64 "\t%lld\n", w->prefix, w->shard, w->samples,
          stat(path, &sb) == 0 ? (long long)sb.st_size : -1LL);
  w->shard++;
  return bad;
}

static int writer_open_shard(shard_writer *w) {
  char path[FF__PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s-%06u.tar", w->out, w->prefix, w->shard);
  w->a = archive_write_new();
  if (!w->a || archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
      archive_write_add_filter_none(w->a) != ARCHIVE_OK || archive_write_set_bytes_in_last_block(w->a, 1) ||
      archive_write_open_filename(w->a, path) != ARCHIVE_OK) {
    fprintf(stderr, "fusionflow shards make: %s: %s\n", path, w->a ? archive_error_string(w->a) : "out of memory");
    if (w->a) archive_write_free(w->a);
    w->a = NULL;
    return 1;
  }
  w->bytes = 1024, w->samples = 0; /* the end-of-archive blocks */
  return 0;
}

static int write_member(shard_writer *w, const char *name, const void *data, size_t size) {
  struct archive_entry *e = archive_entry_new();
  if (!e) return 1;
  archive_entry_set_pathname(e, name);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, (la_int64_t)size);
  archive_entry_set_mtime(e, 0, 0); /* reproducible: no time, no owner */
  int bad = archive_write_header(w->a, e) != ARCHIVE_OK || archive_write_data(w->a, data, size) != (la_ssize_t)size;
  if (bad) fprintf(stderr, "fusionflow shards make: %s: %s\n", name, archive_error_string(w->a));
  archive_entry_free(e);
  w->bytes += member_bytes(size);
  return bad;
}

/* The WebDataset suffix of a sample: its file's (or member's) extension in
 * lower case, when the tar: source reads it as an image. */
static int image_suffix(const char *path, char *out, size_t cap) {
  const char *slash = strrchr(path, '/'), *dot = strrchr(slash ? slash : path, '.');
  if (!dot) return 0;
  snprintf(out, cap, "%s", dot + 1);
  for (char *c = out; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  return !strcmp(out, "jpg") || !strcmp(out, "jpeg") || !strcmp(out, "png") || !strcmp(out, "webp");
}

/* OUT must be new or an empty folder, so that no shard of an earlier run
 * mixes with these; *created: mkdir made it. Returns 1 if so, else 0 with the
 * reason on stderr. */
static int out_is_new(const char *out, int *created) {
  if (mkdir(out, 0777) == 0) return *created = 1;
  int e = errno;
  DIR *d = e == EEXIST ? opendir(out) : NULL;
  if (!d) {
    fprintf(stderr, "fusionflow shards make: %s: %s\n", out, strerror(e == EEXIST ? errno : e));
    return 0;
  }
  struct dirent *de;
  while ((de = readdir(d)) && (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))) {
  }
  int empty = !de;
  if (!empty) /* before closedir, which frees de */
    fprintf(stderr, "fusionflow shards make: %s is not empty (holds %s): shards of an earlier run would mix "
            "with these; remove it or name a new folder\n", out, de->d_name);
  closedir(d);
  return empty;
}

/* After a failed make: removes the shards w wrote, the manifest being
 * written and OUT if this make created it. */
static void remove_made(const shard_writer *w, const char *part_path, int created) {
  char path[FF__PATH_MAX + 64];
  for (unsigned k = 0; k <= w->shard; k++) { /* OUT was empty: each is this make's */
    snprintf(path, sizeof path, "%s/%s-%06u.tar", w->out, w->prefix, k);
    unlink(path);
  }
  unlink(part_path);
  if (created) rmdir(w->out);
}

static int shards_make(int argc, char **argv) {
  enum { O_SIZE = 1, O_SAMPLES, O_PREFIX };
  static const struct option opts[] = {{"shard-size", required_argument, 0, O_SIZE},
                                       {"shard-samples", required_argument, 0, O_SAMPLES},
                                       {"prefix", required_argument, 0, O_PREFIX},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  size_t shard_size = (size_t)1 << 30;
  long shard_samples = 100000;
  const char *prefix = "shard", *cmd = "shards make";
  int c, li = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    switch (c) {
    case O_SIZE: {
      char v[64];
      snprintf(v, sizeof v, "%s", optarg);
      size_t n = strlen(v);
      if (n > 2 && !strcasecmp(v + n - 2, "iB")) v[n - 2] = 0;
      else if (n > 1 && (v[n - 1] == 'B' || v[n - 1] == 'b') && v[n - 2] > '9') v[n - 1] = 0;
      if (!ff__parse_bytes(v, &shard_size) || shard_size < 4096) {
        fprintf(stderr, "fusionflow shards make: --shard-size expects a size of at least 4096 bytes such as 1G, "
                "512M or 65536, got '%s'\n", optarg);
        return 2;
      }
      break;
    }
    case O_SAMPLES: if (!ff__cli_parse_long(cmd, "shard-samples", optarg, 1, LONG_MAX, &shard_samples)) return 2; break;
    case O_PREFIX:
      if (!*optarg || strchr(optarg, '/')) {
        fprintf(stderr, "fusionflow shards make: --prefix expects a file name without '/', got '%s'\n", optarg);
        return 2;
      }
      prefix = optarg;
      break;
    case 'h': shards_usage(stdout); return 0;
    default: return 2;
    }
  }
  if (argc - optind != 2) {
    return ff__cli_usage_error("fusionflow shards make", NULL, "expects SRC and OUT");
  }
  const char *src = argv[optind], *out = argv[optind + 1];
  ff__index idx;
  ff__error err;
  ff__cli_opening opening;
  ff__cli_opening_start(&opening, "fusionflow shards make");
  ff_status opened = ff__source_open_watched(src, 0, ff__cli_opening_progress, &opening, &idx, &err);
  if (ff__cli_opening_end(&opening)) return 130;
  if (opened) {
    fprintf(stderr, "fusionflow shards make: %s\n", err.msg);
    return 1;
  }
  if (idx.streamed) { /* its samples come only through a loader's stream */
    fprintf(stderr, "fusionflow shards make: %s: shards make reads folders, lists and local uncompressed shards; "
            "decompress or download streamed shards first\n", src);
    ff__index_free(&idx);
    return 1;
  }
  int created = 0;
  if (!out_is_new(out, &created)) {
    ff__index_free(&idx);
    return 1;
  }
  int width = 6;
  for (size_t n = idx.count; n >= 1000000; n /= 10) width++;
  char manifest_path[FF__PATH_MAX + 32], part_path[FF__PATH_MAX + 40];
  snprintf(manifest_path, sizeof manifest_path, "%s/manifest.tsv", out);
  snprintf(part_path, sizeof part_path, "%s.part", manifest_path); /* renamed once every shard is written */
  shard_writer w = {.out = out, .prefix = prefix, .manifest = fopen(part_path, "w")};
  int bad = !w.manifest;
  if (bad) fprintf(stderr, "fusionflow shards make: %s: %s\n", part_path, strerror(errno));
  else fprintf(w.manifest, "# fusionflow shards: %zu samples, %zu classes, from %s\n", idx.count, idx.num_classes, src);
  ff__worker worker = {0};
  int bar = isatty(2);
  for (size_t i = 0; i < idx.count && !bad; i++) {
    char suffix[64], name[160];
    ff__sample_job job = {.path = idx.paths[i]};
    ff__index_locate(&idx, i, &job.shard, &job.offset, &job.length);
    if (!image_suffix(job.shard ? strrchr(idx.paths[i], ':') + 1 : idx.paths[i], suffix, sizeof suffix)) {
      fprintf(stderr, "fusionflow shards make: %s: the tar: source reads only .jpg, .jpeg, .png and .webp images\n",
              idx.paths[i]);
      bad = 1;
      break;
    }
    size_t size = 0;
    if (ff__sample_bytes(&worker, &job, &size, &err)) {
      fprintf(stderr, "fusionflow shards make: %s\n", err.msg);
      bad = 1;
      break;
    }
    char label[32];
    int nlabel = snprintf(label, sizeof label, "%" PRId64, idx.labels[i]);
    uint64_t need = member_bytes(size) + member_bytes((size_t)nlabel);
    if (w.a && (w.samples >= (uint64_t)shard_samples || w.bytes + need > shard_size)) bad = writer_close_shard(&w);
    if (!bad && !w.a) bad = writer_open_shard(&w);
    snprintf(name, sizeof name, "%0*zu.%s", width % 24, i, suffix);
    bad = bad || write_member(&w, name, worker.file.data, size);
    snprintf(name, sizeof name, "%0*zu.cls", width % 24, i);
    bad = bad || write_member(&w, name, label, (size_t)nlabel);
    w.samples++;
    if (bar && (i % 64 == 0 || i + 1 == idx.count))
      fprintf(stderr, "\rshards make: %zu/%zu samples, %u shard(s) ", i + 1, idx.count, w.shard + 1);
  }
  if (bar) fputc('\n', stderr);
  if (!bad) bad = writer_close_shard(&w);
  else if (w.a) archive_write_free(w.a);
  if (w.manifest && fclose(w.manifest) != 0) bad = 1;
  if (!bad && rename(part_path, manifest_path) != 0) {
    fprintf(stderr, "fusionflow shards make: %s: %s\n", manifest_path, strerror(errno));
    bad = 1;
  }
  if (bad) remove_made(&w, part_path, created);
  ff__worker_free(&worker);
  if (!bad)
    fprintf(stderr, "shards make: %zu samples in %u shard(s): %s/%s-{%06u..%06u}.tar; manifest %s\n", idx.count,
            w.shard, out, prefix, 0u, w.shard - 1, manifest_path);
  ff__index_free(&idx);
  return bad;
}

/* ----------------------------------------------------------------- check */

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

/* Compares the shard counts with the manifest's; returns the mismatches. */
static size_t check_manifest(const char *file, const ff__index *idx, const size_t *per_shard, int json) {
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  char *line = NULL;
  size_t cap = 0, mismatches = 0, k = 0;
  while (getline(&line, &cap, f) >= 0) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char *tab = strchr(line, '\t');
    if (!tab || k >= idx->num_shards) continue;
    size_t want = strtoull(tab + 1, NULL, 10);
    if (want != per_shard[k]) {
      mismatches++;
      if (!json)
        printf("MISMATCH %s: %zu samples, the manifest says %zu\n", idx->shards[k], per_shard[k], want);
    }
    k++;
  }
  free(line);
  fclose(f);
  return mismatches;
}

static int shards_check(int argc, char **argv) {
  enum { O_THREADS = 1, O_JSON };
  static const struct option opts[] = {{"threads", required_argument, 0, O_THREADS},
                                       {"json", no_argument, 0, O_JSON},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  long threads = 0;
  int json = 0, c, li = 0;
  optind = 1;
  while ((c = ff__cli_getopt(argc, argv, opts, &li, NULL)) != -1) {
    switch (c) {
    case O_THREADS: if (!ff__cli_parse_long("shards check", "threads", optarg, 0, 4096, &threads)) return 2; break;
    case O_JSON: json = 1; break;
    case 'h': shards_usage(stdout); return 0;
    default: return 2;
    }
  }
  if (argc - optind != 1) {
    return ff__cli_usage_error("fusionflow shards check", NULL, "expects one PATTERN");
  }
  const char *pattern = argv[optind];
  char spec[FF__PATH_MAX + 8];
  snprintf(spec, sizeof spec, "%s%s", strncmp(pattern, "tar:", 4) ? "tar:" : "", pattern);
  ff__index idx;
  ff__error err;
  ff__cli_opening opening;
  ff__cli_opening_start(&opening, "fusionflow shards check");
  ff_status opened = ff__source_open_watched(spec, 0, ff__cli_opening_progress, &opening, &idx, &err);
  if (ff__cli_opening_end(&opening)) return 130;
  if (opened) {
    fprintf(stderr, "fusionflow shards check: %s\n", err.msg);
    return 1;
  }
  size_t *per_shard = calloc(idx.num_shards, sizeof *per_shard);
  size_t *per_class = calloc(idx.num_classes ? idx.num_classes : 1, sizeof *per_class);
  if (!per_shard || !per_class) {
    fprintf(stderr, "fusionflow shards check: out of memory\n");
    free(per_shard), free(per_class), ff__index_free(&idx);
    return 1;
  }
  for (size_t i = 0; i < idx.count; i++) per_shard[idx.shard_of[i]]++, per_class[idx.labels[i]]++;
  size_t empty_classes = 0, min_class = SIZE_MAX, max_class = 0;
  for (size_t k = 0; k < idx.num_classes; k++) {
    empty_classes += !per_class[k];
    min_class = per_class[k] < min_class ? per_class[k] : min_class;
    max_class = per_class[k] > max_class ? per_class[k] : max_class;
  }
  if (!json) {
    for (size_t s = 0; s < idx.num_shards; s++) printf("%s\t%zu samples\n", idx.shards[s], per_shard[s]);
    printf("%zu shard(s), %zu samples, labels 0..%zu (%zu classes; %zu to %zu samples each%s), %zu ignored member(s)\n",
           idx.num_shards, idx.count, idx.num_classes - 1, idx.num_classes, min_class, max_class,
           empty_classes ? ", some labels without samples" : "", idx.ignored_members);
    for (size_t b = 0; b < idx.num_bad; b++) printf("BAD %s\n", idx.bad[b]);
  }
  const char *list = spec + 4; /* a single @MANIFEST: compare the counts */
  size_t mismatches = list[0] == '@' && !strstr(list, "::") ? check_manifest(list + 1, &idx, per_shard, json) : 0;

  /* decodability: every image once, through the loader, skipping failures to list them */
  ff_config cfg;
  ff_config_init(&cfg);
  cfg.source = spec, cfg.pipeline = "decode | resize(size=(8, 8))";
  cfg.shuffle = 0, cfg.batch_size = 64, cfg.num_threads = (int)threads, cfg.rank = 0, cfg.world_size = 1;
  cfg.on_error = FF_ON_ERROR_SKIP;
  ff_loader *l = NULL;
  ff__cli_opening_start(&opening, "fusionflow shards check"); /* a streamed source is read again */
  cfg.open_progress = ff__cli_opening_progress, cfg.open_progress_ctx = &opening;
  ff_status st = ff_loader_open(&cfg, &l);
  if (ff__cli_opening_end(&opening)) {
    ff_loader_close(l);
    free(per_shard), free(per_class), ff__index_free(&idx);
    return 130;
  }
  size_t undecodable = 0, index_skipped = idx.num_bad;
  int bar = isatty(2) && !json;
  if (!st) {
    size_t total = ff_loader_num_batches(l), done = 0;
    ff_batch *b;
    while ((st = ff_loader_next(l, &b)) == FF_OK) {
      ff_batch_release(b);
      done++;
      if (bar) {
        int filled = total ? (int)(30 * done / total) : 30;
        fprintf(stderr, "\r[%.*s%.*s] %zu/%zu batches ", filled, "##############################", 30 - filled,
                "..............................", done, total);
      }
    }
    if (bar) fputc('\n', stderr);
    ff_stats s;
    ff_loader_stats(l, &s);
    undecodable = (size_t)s.skipped - index_skipped;
    for (size_t k = index_skipped; !json && k < (size_t)s.skipped; k++)
      if (ff_loader_skipped(l, k)) printf("UNDECODABLE %s\n", ff_loader_skipped(l, k));
    if (st == FF_END) st = FF_OK;
  }
  if (st) fprintf(stderr, "fusionflow shards check: %s\n", l ? ff_loader_errmsg(l) : "cannot open the loader");
  int ok = !st && !idx.num_bad && !undecodable && !mismatches;
  if (json) {
    printf("{\"shards\": %zu, \"samples\": %zu, \"classes\": %zu, \"ignored\": %zu, \"bad\": [", idx.num_shards,
           idx.count, idx.num_classes, idx.ignored_members);
    for (size_t b = 0; b < idx.num_bad; b++) printf("%s", b ? ", " : ""), json_string(idx.bad[b]);
    printf("], \"per_shard\": [");
    for (size_t s = 0; s < idx.num_shards; s++) printf("%s%zu", s ? ", " : "", per_shard[s]);
    printf("], \"undecodable\": %zu, \"manifest_mismatches\": %zu, \"ok\": %s}\n", undecodable, mismatches,
           ok ? "true" : "false");
  } else {
    printf("%s: %zu undecodable image(s), %zu bad member(s)%s\n", ok ? "OK" : "PROBLEMS", undecodable, idx.num_bad,
           mismatches ? ", counts differ from the manifest" : "");
  }
  ff_loader_close(l);
  free(per_shard);
  free(per_class);
  ff__index_free(&idx);
  return st ? 1 : !ok;
}

int ff__cli_shards(int argc, char **argv) {
  if (argc < 2) return ff__cli_usage_error("fusionflow shards", NULL, "expects a subcommand: make or check");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return shards_usage(stdout), 0;
  if (!strcmp(argv[1], "make")) return argv[1] = "fusionflow shards make", shards_make(argc - 1, argv + 1);
  if (!strcmp(argv[1], "check")) return argv[1] = "fusionflow shards check", shards_check(argc - 1, argv + 1);
  static const char *const known[] = {"make", "check"};
  const char *near = ff__nearest_name(argv[1], strlen(argv[1]), known, 2, sizeof known[0], NULL);
  return ff__cli_usage_error("fusionflow shards", NULL, "unknown subcommand '%s' (%s%s%s)", argv[1],
                             near ? "did you mean '" : "make or check", near ? near : "", near ? "'?" : "");
}
