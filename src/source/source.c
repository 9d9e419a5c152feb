/* source.c — building the sample index of a dataset.
 *
 * imagefolder:DIR reproduces torchvision.datasets.ImageFolder's order: class
 * folders sorted by name get labels 0..K-1; inside a class, the folders of
 * os.walk(followlinks=True) are taken sorted by path and each one's files
 * sorted by name (so a class's own files come before those of its
 * sub-folders). Links to folders are followed as os.walk follows them,
 * except a link back to a folder on its own path (a cycle, which os.walk
 * follows until the kernel's ELOOP, indexing every image dozens of times):
 * cycles are recognised by (device, inode) and not entered. Only regular
 * files are indexed (a FIFO named like an image would block its reader); a
 * name whose target cannot be stat'ed (a dangling link, a file deleted
 * meanwhile) is indexed with size 0 and fails when read, under the loader's
 * on_error policy, as torchvision fails at load time. Images are the names
 * with torchvision's extensions (IMG_EXTENSIONS, any case); other files in
 * the class folders are left out as torchvision leaves them, and counted.
 * A class folder without images is refused, as ImageFolder refuses it,
 * unless allowed.
 * list:FILE reads `path<TAB>label` lines (a UTF-8 byte-order mark before
 * the first is skipped); a listed path is indexed whatever its state and
 * checked when read. A source given without its kind is a folder
 * (imagefolder:) or a .tsv/.txt file (list:). Each sample's encoded size
 * comes from stat().
 * tar:PATTERN goes to tar.c (file shards, read by offset) or, when a shard
 * is streamed, to stream.c; the index itself is source/index.h's. */
#include "source/source.h"
#include "source/shardlist.h"
#include "source/stream.h"
#include "source/strlist.h"
#include "source/tar.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* torchvision.datasets.folder.IMG_EXTENSIONS, compared ignoring case as
 * has_file_allowed_extension does (the decoder then goes by the content). */
#define IMAGE_EXTENSIONS ".jpg, .jpeg, .png, .ppm, .bmp, .pgm, .tif, .tiff or .webp"

static int is_image_name(const char *name) {
  static const char *const ext[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
  const char *dot = strrchr(name, '.');
  for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
    if (!strcasecmp(dot, ext[i])) return 1;
  return 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A name that may be an image: a regular file, or nothing stat can see (a
 * dangling link: indexed, it fails when read as it does in torchvision). */
static int may_be_image(const char *path) {
  struct stat st;
  return stat(path, &st) != 0 || S_ISREG(st.st_mode);
}

/* Lists the entries of dir: sub-folders (following links) or image files;
 * with ignored, the other names that are not folders are counted there. */
static ff_status list_dir(const char *dir, int want_dirs, ff__strlist *out, size_t *ignored, ff__error *err) {
  DIR *d = opendir(dir);
  if (!d) return ff__error_set(err, ff__errno_status(errno), "%s: cannot open folder: %s", dir, strerror(errno));
  struct dirent *e;
  char path[FF__PATH_MAX];
  ff_status st = FF_OK;
  while (!st && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int take = want_dirs ? is_dir(path) : (is_image_name(e->d_name) && may_be_image(path));
    if (!take && ignored && !is_image_name(e->d_name) && !is_dir(path)) ++*ignored;
    if (take && ff__strlist_push(out, want_dirs ? e->d_name : path))
      st = ff__error_set(err, FF_ENOMEM, "out of memory listing %s", dir);
  }
  closedir(d);
  if (!st) ff__strlist_sort(out);
  return st;
}

/* A folder found by the walk: its identity and the folder it was found in. */
typedef struct walk_node {
  dev_t dev;
  ino_t ino;
  size_t parent; /* index in the walk; the root is its own parent */
} walk_node;

/* Whether the folder (dev, ino) is `at` or one of its ancestors in nodes. */
static int on_path(const walk_node *nodes, size_t at, dev_t dev, ino_t ino) {
  for (;;) {
    if (nodes[at].dev == dev && nodes[at].ino == ino) return 1;
    if (nodes[at].parent == at) return 0;
    at = nodes[at].parent;
  }
}

/* All folders under root (root included), as full paths, sorted: os.walk
 * with followlinks=True, without entering a folder on its own path. */
static ff_status walk_dirs(const char *root, ff__strlist *out, ff__error *err) {
  struct stat sb;
  if (stat(root, &sb) != 0) return ff__error_set(err, FF_EIO, "%s: %s", root, strerror(errno));
  walk_node *nodes = malloc(sizeof *nodes);
  size_t cap = 1;
  if (!nodes || ff__strlist_push(out, root)) {
    free(nodes);
    return ff__error_set(err, FF_ENOMEM, "out of memory");
  }
  nodes[0] = (walk_node){sb.st_dev, sb.st_ino, 0};
  ff_status st = FF_OK;
  for (size_t i = 0; !st && i < out->n; i++) {
    ff__strlist subs = {0};
    char *dir = strdup(out->v[i]);
    st = dir ? list_dir(dir, 1, &subs, NULL, err) : ff__error_set(err, FF_ENOMEM, "out of memory");
    for (size_t k = 0; !st && k < subs.n; k++) {
      char path[FF__PATH_MAX];
      snprintf(path, sizeof path, "%s/%s", dir, subs.v[k]);
      if (stat(path, &sb) != 0 || on_path(nodes, i, sb.st_dev, sb.st_ino)) continue; /* a cycle */
      if (out->n == cap) {
        walk_node *grown = realloc(nodes, 2 * cap * sizeof *nodes);
        if (!grown) {
          st = ff__error_set(err, FF_ENOMEM, "out of memory");
          break;
        }
        nodes = grown, cap *= 2;
      }
      nodes[out->n] = (walk_node){sb.st_dev, sb.st_ino, i};
      if (ff__strlist_push(out, path)) st = ff__error_set(err, FF_ENOMEM, "out of memory");
    }
    free(dir);
    ff__strlist_free(&subs);
  }
  free(nodes);
  if (!st) ff__strlist_sort(out);
  return st;
}

typedef struct builder {
  ff__strlist paths;
  uint64_t *sizes;
  int64_t *labels;
  size_t cap;
  size_t ignored; /* files of other extensions in the class folders */
} builder;

/* Adds a sample; one that stat cannot see gets size 0 and fails when read. */
static ff_status add_sample(builder *b, const char *path, int64_t label, ff__error *err) {
  struct stat st;
  if (stat(path, &st) != 0) st.st_size = 0;
  if (b->paths.n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    uint64_t *s = realloc(b->sizes, cap * sizeof *s);
    if (s) b->sizes = s;
    int64_t *l = realloc(b->labels, cap * sizeof *l);
    if (l) b->labels = l;
    if (!s || !l) return ff__error_set(err, FF_ENOMEM, "out of memory indexing");
    b->cap = cap;
  }
  b->sizes[b->paths.n] = (uint64_t)st.st_size;
  b->labels[b->paths.n] = label;
  if (ff__strlist_push(&b->paths, path)) return ff__error_set(err, FF_ENOMEM, "out of memory indexing");
  return FF_OK;
}

static ff_status open_imagefolder(const char *root, int allow_empty, builder *b, ff__strlist *classes, ff__error *err) {
  if (!is_dir(root))
    return ff__error_set(err, FF_EIO, "imagefolder:%s: %s", root, errno ? strerror(errno) : "not a folder");
  ff_status st = list_dir(root, 1, classes, NULL, err);
  if (st) return st;
  if (!classes->n)
    return ff__error_set(err, FF_EEMPTY, "imagefolder:%s: no class folders (expected DIR/<class>/<image>)", root);
  char empty[1024] = ""; /* the classes without images, for the message */
  size_t num_empty = 0;
  for (size_t c = 0; c < classes->n && !st; c++) {
    char class_dir[FF__PATH_MAX];
    snprintf(class_dir, sizeof class_dir, "%s/%s", root, classes->v[c]);
    ff__strlist dirs = {0};
    size_t before = b->paths.n;
    st = walk_dirs(class_dir, &dirs, err);
    for (size_t d = 0; d < dirs.n && !st; d++) {
      ff__strlist files = {0};
      st = list_dir(dirs.v[d], 0, &files, &b->ignored, err);
      for (size_t f = 0; f < files.n && !st; f++) st = add_sample(b, files.v[f], (int64_t)c, err);
      ff__strlist_free(&files);
    }
    ff__strlist_free(&dirs);
    if (!st && b->paths.n == before && num_empty++ < 8) {
      size_t used = strlen(empty);
      snprintf(empty + used, sizeof empty - used, "%s'%s'", used ? ", " : "", classes->v[c]);
    }
  }
  if (!st && num_empty == classes->n)
    return ff__error_set(err, FF_EEMPTY, "imagefolder:%s: no " IMAGE_EXTENSIONS " files in the class folders", root);
  if (!st && num_empty && !allow_empty)
    st = ff__error_set(err, FF_EEMPTY,
                       "imagefolder:%s: %zu class folder(s) without a " IMAGE_EXTENSIONS " file: %s%s (torchvision's "
                       "ImageFolder refuses them too; allow_empty keeps their labels)",
                       root, num_empty, empty, num_empty > 8 ? ", ..." : "");
  return st;
}

static ff_status open_list(const char *file, builder *b, ff__error *err) {
  FILE *f = fopen(file, "r");
  if (!f) return ff__error_set(err, ff__errno_status(errno), "list:%s: %s", file, strerror(errno));
  char base[FF__PATH_MAX];
  snprintf(base, sizeof base, "%s", file);
  char *slash = strrchr(base, '/');
  if (slash) slash[1] = 0;
  else base[0] = 0;
  char *line = NULL;
  size_t cap = 0;
  ff_status st = FF_OK;
  size_t lineno = 1;
  for (; !st && getline(&line, &cap, f) >= 0; lineno++) {
    line[strcspn(line, "\r\n")] = 0;
    if (lineno == 1 && !strncmp(line, "\xEF\xBB\xBF", 3)) memmove(line, line + 3, strlen(line + 3) + 1); /* UTF-8 BOM */
    if (!line[0] || line[0] == '#') continue;
    /* exactly two fields; the label plain decimal digits */
    char *tab = strchr(line, '\t');
    int ok = tab && tab != line && tab[1];
    for (char *d = tab ? tab + 1 : NULL; ok && *d; d++) ok = *d >= '0' && *d <= '9';
    errno = 0;
    long long label = ok ? strtoll(tab + 1, NULL, 10) : -1;
    if (!ok || errno) {
      st = ff__error_set(err, FF_EDATA, "list:%s:%zu: expected 'path<TAB>label' with a label of digits >= 0", file,
                         lineno);
      break;
    }
    if (label == INT64_MAX) { /* the class count, label + 1, must fit */
      st = ff__error_set(err, FF_EDATA, "list:%s:%zu: label %lld is too large (at most %lld)", file, lineno, label,
                         (long long)INT64_MAX - 1);
      break;
    }
    *tab = 0;
    char path[2 * FF__PATH_MAX];
    snprintf(path, sizeof path, "%s%s", line[0] == '/' ? "" : base, line);
    st = add_sample(b, path, label, err);
  }
  int failed = !st && !feof(f), why = errno; /* getline failed before the end: memory, or a read error */
  free(line);
  fclose(f);
  if (failed) return ff__error_set(err, ff__errno_status(why), "list:%s:%zu: %s", file, lineno, strerror(why));
  if (!st && !b->paths.n) st = ff__error_set(err, FF_EEMPTY, "list:%s: no samples", file);
  return st;
}

#define SOURCE_KINDS "imagefolder:DIR, list:FILE, tar:PATTERN, a folder, or a .tsv/.txt list file"

static int has_list_extension(const char *path) {
  size_t n = strlen(path);
  return n > 4 && (!strcasecmp(path + n - 4, ".tsv") || !strcasecmp(path + n - 4, ".txt"));
}

/* A source without a kind: a folder is imagefolder:, a .tsv/.txt file list:. */
static ff_status open_bare(const char *path, int allow_empty, builder *b, ff__strlist *classes, ff__error *err) {
  struct stat st;
  if (stat(path, &st)) {
    size_t kind = strspn(path, "abcdefghijklmnopqrstuvwxyz_");
    if (kind && path[kind] == ':') /* "folder:/data": a kind we do not have, not a path */
      return ff__error_set(err, FF_EINVAL, "source '%s': unknown kind '%.*s:' (a source is %s)", path,
                           (int)kind, path, SOURCE_KINDS);
    return ff__error_set(err, FF_EIO, "source '%s': %s (a source is %s)", path, strerror(errno), SOURCE_KINDS);
  }
  if (S_ISDIR(st.st_mode)) return open_imagefolder(path, allow_empty, b, classes, err);
  if (S_ISREG(st.st_mode) && has_list_extension(path)) return open_list(path, b, err);
  return ff__error_set(err, FF_EINVAL, "source '%s': expected %s", path, SOURCE_KINDS);
}

ff_status ff__source_open(const char *spec, int allow_empty, ff__index *out, ff__error *err) {
  return ff__source_open_watched(spec, allow_empty, NULL, NULL, out, err);
}

/* "tar:PATTERN": the shards it expands to, indexed for random access
 * (tar.c), or, when one of them is streamed, read as a stream (stream.c). */
static ff_status open_tar(const char *pattern, ff_open_progress_fn progress, void *ctx, ff__index *out,
                          ff__error *err) {
  ff__strlist shards = {0};
  ff_status st = ff__shards_expand(pattern, &shards, err);
  if (st == FF_EEMPTY) st = ff__error_set(err, FF_EEMPTY, "tar:%s: the pattern names no shard", pattern);
  int streamed = 0;
  for (size_t i = 0; !st && i < shards.n; i++) streamed |= ff__stream_name(shards.v[i]);
  if (!st) /* one stream makes the whole source a stream */
    st = streamed ? ff__stream_index(pattern, &shards, progress, ctx, out, err)
                  : ff__tar_index_files(pattern, &shards, out, err);
  ff__strlist_free(&shards); /* empty when the index took the names */
  return st;
}

ff_status ff__source_open_watched(const char *spec, int allow_empty, ff_open_progress_fn progress, void *ctx,
                                  ff__index *out, ff__error *err) {
  builder b = {0};
  ff__strlist classes = {0};
  ff_status st;
  errno = 0;
  if (!spec || !*spec) st = ff__error_set(err, FF_EINVAL, "no source: expected %s", SOURCE_KINDS);
  else if (!strncmp(spec, "imagefolder:", 12)) st = open_imagefolder(spec + 12, allow_empty, &b, &classes, err);
  else if (!strncmp(spec, "list:", 5)) st = open_list(spec + 5, &b, err);
  else if (!strncmp(spec, "tar:", 4)) return open_tar(spec + 4, progress, ctx, out, err);
  else st = open_bare(spec, allow_empty, &b, &classes, err);
  if (st) {
    ff__strlist_free(&b.paths);
    ff__strlist_free(&classes);
    free(b.sizes);
    free(b.labels);
    return st;
  }
  int64_t max_label = -1;
  for (size_t i = 0; i < b.paths.n; i++) max_label = b.labels[i] > max_label ? b.labels[i] : max_label;
  *out = (ff__index){.count = b.paths.n, .paths = b.paths.v, .size_bytes = b.sizes, .labels = b.labels,
                     .num_classes = classes.n ? classes.n : (size_t)(max_label + 1), .class_names = classes.v,
                     .ignored_files = b.ignored};
  return FF_OK;
}
