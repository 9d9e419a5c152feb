/* source.c — building the sample index of a dataset.
 *
 * imagefolder:DIR reproduces torchvision.datasets.ImageFolder's order: class
 * folders sorted by name get labels 0..K-1; inside a class, the folders of
 * os.walk are taken sorted by path and each one's files sorted by name (so a
 * class's own files come before those of its sub-folders). list:FILE reads
 * `path<TAB>label` lines. A source given without its kind is a folder
 * (imagefolder:) or a .tsv/.txt file (list:). Each sample's encoded size
 * comes from stat(). */
#include "source/source.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct strvec {
  char **v;
  size_t n, cap;
} strvec;

static int strvec_push(strvec *s, const char *str) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    char **v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v, s->cap = cap;
  }
  if (!(s->v[s->n] = strdup(str))) return -1;
  s->n++;
  return 0;
}

static void strvec_free(strvec *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  *s = (strvec){0};
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strvec_sort(strvec *s) {
  if (s->n) qsort(s->v, s->n, sizeof *s->v, cmp_str);
}

static int is_image_name(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Lists the entries of dir: sub-folders (following links) or image files. */
static ff_status list_dir(const char *dir, int want_dirs, strvec *out, ff__error *err) {
  DIR *d = opendir(dir);
  if (!d) return ff__error_set(err, FF_EIO, "%s: cannot open folder: %s", dir, strerror(errno));
  struct dirent *e;
  char path[4096];
  ff_status st = FF_OK;
  while (!st && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int take = want_dirs ? is_dir(path) : (is_image_name(e->d_name) && !is_dir(path));
    if (take && strvec_push(out, want_dirs ? e->d_name : path))
      st = ff__error_set(err, FF_ENOMEM, "out of memory listing %s", dir);
  }
  closedir(d);
  if (!st) strvec_sort(out);
  return st;
}

/* All folders under root (root included), as full paths. */
static ff_status walk_dirs(const char *root, strvec *out, ff__error *err) {
  if (strvec_push(out, root)) return ff__error_set(err, FF_ENOMEM, "out of memory");
  for (size_t i = out->n - 1; i < out->n; i++) {
    strvec subs = {0};
    char *dir = strdup(out->v[i]);
    ff_status st = dir ? list_dir(dir, 1, &subs, err) : FF_ENOMEM;
    for (size_t k = 0; !st && k < subs.n; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, subs.v[k]);
      if (strvec_push(out, path)) st = ff__error_set(err, FF_ENOMEM, "out of memory");
    }
    free(dir);
    strvec_free(&subs);
    if (st) return st;
  }
  strvec_sort(out);
  return FF_OK;
}

typedef struct builder {
  strvec paths;
  uint64_t *sizes;
  int64_t *labels;
  size_t cap;
} builder;

static ff_status add_sample(builder *b, const char *path, int64_t label, ff__error *err) {
  struct stat st;
  if (stat(path, &st) != 0) return ff__error_set(err, FF_EIO, "%s: %s", path, strerror(errno));
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
  if (strvec_push(&b->paths, path)) return ff__error_set(err, FF_ENOMEM, "out of memory indexing");
  return FF_OK;
}

static ff_status open_imagefolder(const char *root, builder *b, strvec *classes, ff__error *err) {
  if (!is_dir(root))
    return ff__error_set(err, FF_EIO, "imagefolder:%s: %s", root, errno ? strerror(errno) : "not a folder");
  ff_status st = list_dir(root, 1, classes, err);
  if (st) return st;
  if (!classes->n)
    return ff__error_set(err, FF_EEMPTY, "imagefolder:%s: no class folders (expected DIR/<class>/<image>)", root);
  for (size_t c = 0; c < classes->n && !st; c++) {
    char class_dir[4096];
    snprintf(class_dir, sizeof class_dir, "%s/%s", root, classes->v[c]);
    strvec dirs = {0};
    st = walk_dirs(class_dir, &dirs, err);
    for (size_t d = 0; d < dirs.n && !st; d++) {
      strvec files = {0};
      st = list_dir(dirs.v[d], 0, &files, err);
      for (size_t f = 0; f < files.n && !st; f++) st = add_sample(b, files.v[f], (int64_t)c, err);
      strvec_free(&files);
    }
    strvec_free(&dirs);
  }
  if (!st && !b->paths.n)
    st = ff__error_set(err, FF_EEMPTY, "imagefolder:%s: no .jpg, .jpeg or .png files in the class folders", root);
  return st;
}

static ff_status open_list(const char *file, builder *b, ff__error *err) {
  FILE *f = fopen(file, "r");
  if (!f) return ff__error_set(err, FF_EIO, "list:%s: %s", file, strerror(errno));
  char base[4096];
  snprintf(base, sizeof base, "%s", file);
  char *slash = strrchr(base, '/');
  if (slash) slash[1] = 0;
  else base[0] = 0;
  char *line = NULL;
  size_t cap = 0;
  ff_status st = FF_OK;
  for (size_t lineno = 1; !st && getline(&line, &cap, f) >= 0; lineno++) {
    line[strcspn(line, "\r\n")] = 0;
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
    *tab = 0;
    char path[8192];
    snprintf(path, sizeof path, "%s%s", line[0] == '/' ? "" : base, line);
    st = add_sample(b, path, label, err);
  }
  free(line);
  fclose(f);
  if (!st && !b->paths.n) st = ff__error_set(err, FF_EEMPTY, "list:%s: no samples", file);
  return st;
}

#define SOURCE_KINDS "imagefolder:DIR, list:FILE, a folder, or a .tsv/.txt list file"

static int has_list_extension(const char *path) {
  size_t n = strlen(path);
  return n > 4 && (!strcasecmp(path + n - 4, ".tsv") || !strcasecmp(path + n - 4, ".txt"));
}

/* A source without a kind: a folder is imagefolder:, a .tsv/.txt file list:. */
static ff_status open_bare(const char *path, builder *b, strvec *classes, ff__error *err) {
  struct stat st;
  if (stat(path, &st)) {
    size_t kind = strspn(path, "abcdefghijklmnopqrstuvwxyz_");
    if (kind && path[kind] == ':') /* "folder:/data": a kind we do not have, not a path */
      return ff__error_set(err, FF_EINVAL, "source '%s': unknown kind '%.*s:' (a source is %s)", path,
                           (int)kind, path, SOURCE_KINDS);
    return ff__error_set(err, FF_EIO, "source '%s': %s (a source is %s)", path, strerror(errno), SOURCE_KINDS);
  }
  if (S_ISDIR(st.st_mode)) return open_imagefolder(path, b, classes, err);
  if (S_ISREG(st.st_mode) && has_list_extension(path)) return open_list(path, b, err);
  return ff__error_set(err, FF_EINVAL, "source '%s': expected %s", path, SOURCE_KINDS);
}

ff_status ff__source_open(const char *spec, ff__index *out, ff__error *err) {
  builder b = {0};
  strvec classes = {0};
  ff_status st;
  errno = 0;
  if (!spec || !*spec) st = ff__error_set(err, FF_EINVAL, "no source: expected %s", SOURCE_KINDS);
  else if (!strncmp(spec, "imagefolder:", 12)) st = open_imagefolder(spec + 12, &b, &classes, err);
  else if (!strncmp(spec, "list:", 5)) st = open_list(spec + 5, &b, err);
  else st = open_bare(spec, &b, &classes, err);
  if (st) {
    strvec_free(&b.paths);
    strvec_free(&classes);
    free(b.sizes);
    free(b.labels);
    return st;
  }
  int64_t max_label = -1;
  for (size_t i = 0; i < b.paths.n; i++) max_label = b.labels[i] > max_label ? b.labels[i] : max_label;
  *out = (ff__index){b.paths.n, b.paths.v, b.sizes, b.labels,
                     classes.n ? classes.n : (size_t)(max_label + 1), classes.v};
  return FF_OK;
}

void ff__index_free(ff__index *index) {
  if (!index) return;
  strvec paths = {index->paths, index->count, index->count};
  strvec classes = {index->class_names, index->class_names ? index->num_classes : 0, 0};
  strvec_free(&paths);
  strvec_free(&classes);
  free(index->size_bytes);
  free(index->labels);
  *index = (ff__index){0};
}
