/* tar.c — the tar: source: WebDataset shards indexed for random access.
 *
 * A WebDataset shard is a plain tar whose members are grouped into samples
 * by key: the member's path up to the first dot of its basename
 * ("train/n0144_10026.jpg" has key "train/n0144_10026" and suffix "jpg";
 * suffixes compared in lower case), consecutive members with the same key
 * forming one sample, as webdataset's group_by_keys does. A sample here is
 * one image member (suffix jpg, jpeg, png or webp; the first of them in that
 * order when there are several) and its label, the decimal integer of the
 * KEY.cls member. Other members (json, txt, a second image, names without a
 * suffix, "__meta__" files) are ignored and counted.
 *
 * libarchive reads the tar (ustar, pax, GNU); this module never parses tar
 * headers itself. libarchive reads sequentially only, so each uncompressed
 * shard is read once with it to learn every image member's data offset and
 * size (and each label), and the workers then read a sample with one pread
 * of its bytes: a shuffled epoch, DistributedSampler's shards, resume and
 * on_error work on shards exactly as on folders. The index of each shard is
 * cached (ff__tar_cache_dir) under the shard's real path, checked against
 * its size, modification time and inode, so a second open reads no tar.
 *
 * Problems are per member: a sample without a .cls, with a .cls that is not
 * a non-negative integer (or one over INT64_MAX - 1), with the same suffix
 * twice (webdataset raises on it; also where the second is a link, as tar
 * writes for a file given twice) or whose key comes back later in the shard, a member cut off by the
 * end of the file, a header libarchive cannot read (the rest of that shard
 * is lost), an empty or compressed shard: each becomes a message in the
 * index's bad list naming the shard and the member, and the loader fails
 * its open on the first one (on_error=raise) or leaves them out and lists
 * them (on_error=skip/replace). */
#include "source/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "source/index.h"
#include "source/strlist.h"

/* The suffixes that make a sample's image, in the order one is preferred. */
static const char *const IMAGE_SUFFIXES[] = {"jpg", "jpeg", "png", "webp"};
#define NUM_IMAGE_SUFFIXES 4
#define CLS_MAX_BYTES 64 /* a .cls holds one integer */

void ff__tar_shard_free(ff__tar_shard *sc) {
  for (size_t i = 0; i < sc->n; i++) free(sc->s[i].member);
  free(sc->s);
  ff__strlist_free(&sc->bad);
  *sc = (ff__tar_shard){0};
}

/* Out of memory is the one failure that is not a bad member. */
static ff_status oom(ff__error *err, const char *shard) {
  return ff__error_set(err, FF_ENOMEM, "%s: out of memory indexing the shard", shard);
}

static ff_status add_bad(ff__tar_shard *sc, const char *shard, ff__error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ff_status add_bad(ff__tar_shard *sc, const char *shard, ff__error *err, const char *fmt, ...) {
  char msg[FF__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ff__strlist_push(&sc->bad, msg) ? oom(err, shard) : FF_OK;
}

static ff_status add_sample(ff__tar_shard *sc, const char *shard, const ff__tar_sample *t, ff__error *err) {
  if (sc->n == sc->cap) {
    size_t cap = sc->cap ? sc->cap * 2 : 256;
    ff__tar_sample *s = realloc(sc->s, cap * sizeof *s);
    if (!s) return oom(err, shard);
    sc->s = s, sc->cap = cap;
  }
  ff__tar_sample c = *t;
  if (!(c.member = strdup(t->member))) return oom(err, shard);
  sc->s[sc->n++] = c;
  return FF_OK;
}

/* WebDataset's split of a member path into key and suffix (its
 * base_plus_ext): the key runs to the first dot of the basename. 0 when the
 * basename has no dot or starts with one (no key: the member is ignored). */
static size_t key_length(const char *path) {
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  const char *dot = strchr(base, '.');
  if (!dot || dot == base) return 0;
  return (size_t)(dot - path);
}

/* Python's int() of a .cls member's text, non-negative: digits with
 * optional surrounding white space, an optional '+' and '_' between digits.
 * Returns 1, 0 (not such an integer) or -1 (an integer over INT64_MAX - 1:
 * the class count, label + 1, must fit). */
static int parse_label(const char *text, int64_t *out) {
  const char *p = text;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
  if (*p == '+') p++;
  int64_t v = 0;
  int digits = 0, big = 0;
  for (; (*p >= '0' && *p <= '9') || (*p == '_' && digits && p[1] >= '0' && p[1] <= '9'); p++) {
    if (*p == '_') continue;
    digits++;
    if (big || v > (INT64_MAX - 1 - (*p - '0')) / 10) big = 1;
    else v = v * 10 + (*p - '0');
  }
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
  if (!digits || *p) return 0;
  if (big) return -1;
  *out = v;
  return 1;
}

/* The members of the sample being grouped. */
typedef struct group {
  char key[FF__PATH_MAX];
  size_t key_len;
  int open;
  ff__tar_sample image;
  int image_rank; /* index in IMAGE_SUFFIXES of the image taken; NUM_IMAGE_SUFFIXES: none */
  int has_label;
  int broken;     /* a problem already listed: no sample */
  char image_member[FF__PATH_MAX];
  ff__strlist suffixes;
  ff__tar_sample_fn fn; /* not NULL: samples go to fn with their image bytes, not into the shard's list */
  void *ctx;
  uint8_t *data;        /* fn's mode: the image's bytes (image.size of them) */
  size_t data_cap;
} group;

/* Ends the group: a sample, a listed problem, or nothing (only ignored members). */
static ff_status group_end(group *g, ff__tar_shard *sc, const char *shard, ff__error *err) {
  ff_status st = FF_OK;
  if (!g->open) return st;
  int has_image = g->image_rank < NUM_IMAGE_SUFFIXES;
  if (g->broken) {
  } else if (has_image && g->has_label) {
    g->image.member = g->image_member;
    g->image.key_len = g->key_len;
    st = g->fn ? g->fn(g->ctx, &g->image, g->data, err) : add_sample(sc, shard, &g->image, err);
  } else if (has_image) {
    st = add_bad(sc, shard, err, "%s:%s: no %.*s.cls member (the sample's label)", shard, g->image_member,
                 (int)g->key_len, g->key);
  } else if (g->has_label) {
    st = add_bad(sc, shard, err, "%s:%.*s.cls: sample '%.*s' has no image member (.jpg, .jpeg, .png or .webp)",
                 shard, (int)g->key_len, g->key, (int)g->key_len, g->key);
  } else {
    sc->ignored += g->suffixes.n;
  }
  ff__strlist_free(&g->suffixes);
  g->open = 0;
  return st;
}

static void group_start(group *g, const char *path, size_t key_len) {
  memcpy(g->key, path, key_len);
  g->key[key_len] = 0;
  g->key_len = key_len;
  g->open = 1, g->has_label = 0, g->broken = 0, g->image_rank = NUM_IMAGE_SUFFIXES;
}

/* Reads a .cls member's text through libarchive and parses it. */
static ff_status read_label(struct archive *a, group *g, const char *shard, const char *path, int64_t size,
                            ff__tar_shard *sc, ff__error *err) {
  char text[CLS_MAX_BYTES + 1];
  if (size > CLS_MAX_BYTES) {
    g->broken = 1;
    return add_bad(sc, shard, err, "%s:%s: a .cls of %" PRId64 " bytes (expected one integer label)", shard, path,
                   size);
  }
  la_ssize_t got = archive_read_data(a, text, (size_t)size);
  if (got != size) {
    g->broken = 1;
    return add_bad(sc, shard, err, "%s:%s: cannot read the label: %s", shard, path,
                   got < 0 ? archive_error_string(a) : "the shard ends inside it");
  }
  text[got] = 0;
  int64_t label;
  int parsed = memchr(text, 0, (size_t)got) ? 0 : parse_label(text, &label);
  if (parsed != 1) {
    g->broken = 1;
    return add_bad(sc, shard, err, "%s:%s: the label '%.*s' is %s", shard, path, (int)strcspn(text, "\r\n"), text,
                   parsed ? "out of range (0..9223372036854775806)" : "not a non-negative integer");
  }
  g->image.label = label, g->has_label = 1;
  return FF_OK;
}

/* fn's mode: reads the image member's bytes (a stream has no offsets to come back to). */
static ff_status read_image(struct archive *a, group *g, const char *shard, const char *path, int64_t size,
                            ff__tar_shard *sc, ff__error *err) {
  if ((uint64_t)size > g->data_cap) {
    uint8_t *d = realloc(g->data, (size_t)size);
    if (!d) return oom(err, shard);
    g->data = d, g->data_cap = (size_t)size;
  }
  int64_t got = 0;
  while (got < size) {
    la_ssize_t r = archive_read_data(a, g->data + got, (size_t)(size - got));
    if (r <= 0) {
      g->broken = 1;
      return add_bad(sc, shard, err, "%s:%s: truncated member: %s after %" PRId64 " of its %" PRId64 " bytes", shard,
                     path, r < 0 ? archive_error_string(a) : "the shard ends", got, size);
    }
    got += r;
  }
  return FF_OK;
}

/* The member's suffix in lower case (path has a key of key_len bytes). */
static void member_suffix(const char *path, size_t key_len, char *suffix, size_t cap) {
  snprintf(suffix, cap, "%s", path + key_len + 1);
  for (char *c = suffix; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
}

/* Whether path names a member the open sample already has. */
static int repeats_member(const group *g, const char *path) {
  size_t key_len = key_length(path);
  if (!g->open || !key_len || g->key_len != key_len || memcmp(g->key, path, key_len)) return 0;
  char suffix[FF__PATH_MAX];
  member_suffix(path, key_len, suffix, sizeof suffix);
  for (size_t i = 0; i < g->suffixes.n; i++)
    if (!strcmp(g->suffixes.v[i], suffix)) return 1;
  return 0;
}

/* One regular member of the shard, in tar order. */
static ff_status take_member(struct archive *a, group *g, const char *shard, const char *path, uint64_t offset,
                             int64_t size, ff__tar_shard *sc, ff__error *err) {
  size_t key_len = key_length(path);
  int meta = !strchr(path, '/') && !strncmp(path, "__", 2) && strlen(path) >= 4 &&
             !strcmp(path + strlen(path) - 2, "__");
  if (!key_len || meta || key_len >= FF__PATH_MAX) {
    sc->ignored++;
    return FF_OK;
  }
  ff_status st = FF_OK;
  if (!g->open || g->key_len != key_len || memcmp(g->key, path, key_len)) {
    st = group_end(g, sc, shard, err);
    group_start(g, path, key_len);
  }
  char suffix[FF__PATH_MAX];
  member_suffix(path, key_len, suffix, sizeof suffix);
  if (!st && repeats_member(g, path)) {
    g->broken = 1;
    return add_bad(sc, shard, err, "%s:%s: duplicate member: sample '%s' already has a .%s (webdataset refuses "
                   "it too)", shard, path, g->key, suffix);
  }
  if (!st && ff__strlist_push(&g->suffixes, suffix)) st = oom(err, shard);
  if (st) return st;
  if (!strcmp(suffix, "cls")) return read_label(a, g, shard, path, size, sc, err);
  int rank = 0;
  while (rank < NUM_IMAGE_SUFFIXES && strcmp(suffix, IMAGE_SUFFIXES[rank])) rank++;
  if (rank == NUM_IMAGE_SUFFIXES || rank >= g->image_rank) {
    sc->ignored++;
    return FF_OK;
  }
  if (g->fn && (st = read_image(a, g, shard, path, size, sc, err))) return st;
  if (g->broken) return FF_OK;
  if (g->image_rank < NUM_IMAGE_SUFFIXES) sc->ignored++; /* the image it replaces */
  g->image_rank = rank;
  g->image.offset = offset, g->image.size = (uint64_t)size;
  snprintf(g->image_member, sizeof g->image_member, "%s", path);
  return FF_OK;
}

static int cmp_key(const void *a, const void *b) {
  const ff__tar_sample *x = *(ff__tar_sample *const *)a, *y = *(ff__tar_sample *const *)b;
  size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
  int c = memcmp(x->member, y->member, n);
  if (c) return c;
  if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* A key that comes back after other samples: the later samples are left out. */
static ff_status drop_repeated_keys(ff__tar_shard *sc, const char *shard, ff__error *err) {
  if (sc->n < 2) return FF_OK;
  ff__tar_sample **by_key = malloc(sc->n * sizeof *by_key);
  if (!by_key) return oom(err, shard);
  for (size_t i = 0; i < sc->n; i++) by_key[i] = &sc->s[i];
  qsort(by_key, sc->n, sizeof *by_key, cmp_key);
  ff_status st = FF_OK;
  for (size_t i = 1; i < sc->n && !st; i++) {
    ff__tar_sample *first = by_key[i - 1], *t = by_key[i];
    if (t->key_len != first->key_len || memcmp(t->member, first->member, t->key_len)) continue;
    by_key[i] = first; /* compare what follows with the first of them */
    st = add_bad(sc, shard, err, "%s:%s: duplicate key '%.*s' (a sample with that key is at byte %" PRIu64
                 " of the shard)", shard, t->member, (int)t->key_len, t->member, first->offset);
    free(t->member);
    t->member = NULL;
  }
  free(by_key);
  size_t k = 0;
  for (size_t i = 0; i < sc->n; i++)
    if (sc->s[i].member) sc->s[k++] = sc->s[i];
  sc->n = k;
  return st;
}

ff_status ff__tar_scan_archive(struct archive *a, const char *shard, uint64_t file_bytes, ff__tar_sample_fn fn,
                               void *ctx, ff__tar_shard *sc, ff__error *err) {
  group g = {.fn = fn, .ctx = ctx};
  char last[FF__PATH_MAX] = "";
  int damaged = 0;
  ff_status st = FF_OK;
  struct archive_entry *e;
  for (;;) {
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      st = add_bad(sc, shard, err, "%s:%s: corrupt or truncated tar header %s%s%s (byte %" PRId64 "): %s; the rest of "
                   "the shard is lost", shard, last[0] ? last : "(start)", last[0] ? "after member '" : "at its start",
                   last, last[0] ? "'" : "", archive_read_header_position(a), archive_error_string(a));
      break;
    }
    if (r == ARCHIVE_RETRY || r == ARCHIVE_WARN) {
      /* a damaged header (RETRY: libarchive goes on at the next block that is a header), or a
       * header it read with a complaint: members may be lost there; one message per damaged run */
      if (!damaged)
        st = add_bad(sc, shard, err, "%s:%s: damaged tar data %s%s%s (byte %" PRId64 "): %s", shard,
                     last[0] ? last : "(start)", last[0] ? "after member '" : "at its start", last,
                     last[0] ? "'" : "", archive_read_header_position(a), archive_error_string(a));
      damaged = 1;
      if (st) break;
      if (r == ARCHIVE_RETRY) continue;
    }
    damaged = 0;
    if (file_bytes && archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE) {
      st = add_bad(sc, shard, err, "%s: a %s-compressed shard: only uncompressed tar shards are read by offset "
                   "(decompress it, or stream it)", shard, archive_filter_name(a, 0));
      break;
    }
    const char *path = archive_entry_pathname(e);
    if (!path) path = "";
    snprintf(last, sizeof last, "%s", path);
    if (archive_entry_filetype(e) != AE_IFREG) {
      if (archive_entry_filetype(e) == AE_IFDIR) continue;
      if (!repeats_member(&g, path)) {
        sc->ignored++;
        continue;
      }
      g.broken = 1;
      st = add_bad(sc, shard, err, "%s:%s: duplicate member: a link to a member of sample '%s' under the same name "
                   "(tar writes one for a file given twice)", shard, path, g.key);
      if (st) break;
      continue;
    }
    int64_t size = archive_entry_size(e);
    uint64_t offset = (uint64_t)archive_filter_bytes(a, 0); /* the data follows the header libarchive consumed */
    if (size < 0 || (file_bytes && offset + (uint64_t)size > file_bytes)) {
      if (!st && g.open && g.key_len <= strlen(path) && !memcmp(g.key, path, g.key_len)) g.broken = 1;
      st = add_bad(sc, shard, err, "%s:%s: truncated member: its %" PRId64 " bytes from byte %" PRIu64 " run past the "
                   "end of the shard (%" PRIu64 " bytes); the rest of the shard is lost", shard, path, size, offset,
                   file_bytes);
      break;
    }
    if (archive_entry_sparse_count(e) > 0) {
      sc->ignored++;
      st = add_bad(sc, shard, err, "%s:%s: a sparse member (its data is not stored in one piece)", shard, path);
      if (st) break;
      continue;
    }
    st = take_member(a, &g, shard, path, offset, size, sc, err);
    if (st) break;
  }
  if (!st) st = group_end(&g, sc, shard, err);
  ff__strlist_free(&g.suffixes);
  free(g.data);
  return st;
}

ff_status ff__tar_shard_finish(ff__tar_shard *sc, const char *shard, ff__error *err) {
  ff_status st = drop_repeated_keys(sc, shard, err);
  if (!st && !sc->n && !sc->bad.n)
    st = add_bad(sc, shard, err, "%s: an empty shard (no sample: no image member with a .cls)", shard);
  return st;
}

struct archive *ff__tar_archive_new(void) {
  struct archive *a = archive_read_new();
  if (a) {
    archive_read_support_format_tar(a);
    archive_read_support_format_empty(a);
    archive_read_support_filter_all(a);
  }
  return a;
}

/* Reads the shard once with libarchive: every sample's data offset, size
 * and label; problems go to sc->bad. */
static ff_status scan_shard(const char *shard, const struct stat *sb, ff__tar_shard *sc, ff__error *err) {
  struct archive *a = ff__tar_archive_new();
  if (!a) return oom(err, shard);
  ff_status st = FF_OK;
  if (archive_read_open_filename(a, shard, 1 << 16) != ARCHIVE_OK)
    st = add_bad(sc, shard, err, "%s: not a readable tar shard: %s", shard, archive_error_string(a));
  else
    st = ff__tar_scan_archive(a, shard, sb->st_size ? (uint64_t)sb->st_size : 1, NULL, NULL, sc, err);
  archive_read_free(a);
  return st ? st : ff__tar_shard_finish(sc, shard, err);
}

void ff__tar_cache_dir(char *out, size_t cap) {
  const char *env = getenv("FF_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (env && env[0]) snprintf(out, cap, "%s/tar", env);
  else if (env && cap) out[0] = 0; /* FF_CACHE_DIR="": no cache */
  else if (xdg && xdg[0]) snprintf(out, cap, "%s/fusionflow/tar", xdg);
  else if (home && home[0]) snprintf(out, cap, "%s/.cache/fusionflow/tar", home);
  else if (cap) out[0] = 0;
}

#define CACHE_MAGIC "fusionflow-tar-index 2"

/* The cache file of the shard whose real path is `real`, in `dir`. */
static void cache_path(const char *dir, const char *real, char *out, size_t cap) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
  for (const unsigned char *p = (const unsigned char *)real; *p; p++) h = (h ^ *p) * 1099511628211ull;
  snprintf(out, cap, "%s/%016" PRIx64 ".idx", dir, h);
}

static void stat_line(const struct stat *sb, char *out, size_t cap) {
  snprintf(out, cap, "stat %lld %lld %ld %llu\n", (long long)sb->st_size, (long long)sb->st_mtim.tv_sec,
           (long)sb->st_mtim.tv_nsec, (unsigned long long)sb->st_ino);
}

/* Loads the cached scan of the shard; 0 when there is none or it is stale. */
static int cache_load(const char *file, const char *real, const struct stat *sb, ff__tar_shard *sc) {
  FILE *f = fopen(file, "r");
  if (!f) return 0;
  char *line = NULL, want[128];
  size_t cap = 0;
  stat_line(sb, want, sizeof want);
  int ok = getline(&line, &cap, f) > 0 && !strcmp(line, CACHE_MAGIC "\n");
  ok = ok && getline(&line, &cap, f) > 0 && !strncmp(line, "path ", 5) && !strncmp(line + 5, real, strlen(real)) &&
       !strcmp(line + 5 + strlen(real), "\n");
  ok = ok && getline(&line, &cap, f) > 0 && !strcmp(line, want);
  unsigned long long ignored = 0;
  ok = ok && getline(&line, &cap, f) > 0 && sscanf(line, "ignored %llu", &ignored) == 1;
  sc->ignored = (size_t)ignored;
  int ended = 0;
  while (ok && !ended && getline(&line, &cap, f) > 0) {
    line[strcspn(line, "\n")] = 0;
    if (!strcmp(line, "end")) {
      ended = 1;
    } else if (!strncmp(line, "b\t", 2)) {
      ok = !ff__strlist_push(&sc->bad, line + 2);
    } else if (!strncmp(line, "s\t", 2)) {
      unsigned long long off, size;
      long long label;
      int used = 0;
      ok = sscanf(line + 2, "%llu\t%llu\t%lld\t%n", &off, &size, &label, &used) == 3 && used && label >= 0;
      ff__tar_sample t = {line + 2 + used, key_length(line + 2 + used), off, size, label};
      ok = ok && t.key_len && t.offset + t.size <= (uint64_t)sb->st_size && !add_sample(sc, real, &t, NULL);
    } else {
      ok = 0;
    }
  }
  free(line);
  fclose(f);
  if (!ok || !ended) ff__tar_shard_free(sc);
  return ok && ended;
}

/* Writes the scan (atomically: a temporary file renamed); quietly does
 * nothing when the folder is not writable or a name holds a newline. */
static void cache_store(const char *dir, const char *file, const char *real, const struct stat *sb,
                        const ff__tar_shard *sc) {
  for (size_t i = 0; i < sc->n; i++)
    if (strchr(sc->s[i].member, '\n')) return;
  for (size_t i = 0; i < sc->bad.n; i++)
    if (strchr(sc->bad.v[i], '\n')) return;
  char tmp[FF__PATH_MAX + 64], parent[FF__PATH_MAX];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash && slash != parent) *slash = 0, mkdir(parent, 0777);
  mkdir(dir, 0777);
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  char line[128];
  stat_line(sb, line, sizeof line);
  fprintf(f, CACHE_MAGIC "\npath %s\n%signored %zu\n", real, line, sc->ignored);
  for (size_t i = 0; i < sc->n; i++)
    fprintf(f, "s\t%" PRIu64 "\t%" PRIu64 "\t%" PRId64 "\t%s\n", sc->s[i].offset, sc->s[i].size, sc->s[i].label,
            sc->s[i].member);
  for (size_t i = 0; i < sc->bad.n; i++) fprintf(f, "b\t%s\n", sc->bad.v[i]);
  fputs("end\n", f);
  if (fclose(f) == 0 && rename(tmp, file) == 0) return;
  unlink(tmp);
}

/* The scan of one shard: from the cache when it is fresh, else libarchive. */
static ff_status index_shard(const char *shard, ff__tar_shard *sc, ff__error *err) {
  struct stat sb;
  if (stat(shard, &sb) != 0)
    return add_bad(sc, shard, err, "%s: cannot open the shard: %s", shard, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return add_bad(sc, shard, err, "%s: not a regular file", shard);
  char dir[FF__PATH_MAX], file[FF__PATH_MAX + 32], real[FF__PATH_MAX];
  ff__tar_cache_dir(dir, sizeof dir);
  int cached = dir[0] && realpath(shard, real);
  if (cached) {
    cache_path(dir, real, file, sizeof file);
    if (cache_load(file, real, &sb, sc)) return FF_OK;
  }
  ff_status st = scan_shard(shard, &sb, sc, err);
  if (!st && cached) cache_store(dir, file, real, &sb, sc);
  return st;
}

ff_status ff__tar_index_build(const char *pattern, ff__strlist *shards, const ff__tar_shard *scans,
                              int with_offsets, ff__index *out, ff__error *err) {
  ff__strlist bad = {0};
  size_t total = 0, ignored = 0;
  ff_status st = FF_OK;
  for (size_t i = 0; i < shards->n && !st; i++) {
    total += scans[i].n, ignored += scans[i].ignored;
    for (size_t k = 0; k < scans[i].bad.n && !st; k++)
      if (ff__strlist_push(&bad, scans[i].bad.v[k]))
        st = ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
  }
  if (!st && !total)
    st = ff__error_set(err, FF_EEMPTY, "tar:%s: no sample in %zu shard(s)%s%s", pattern, shards->n,
                       bad.n ? "; the first problem: " : "", bad.n ? bad.v[0] : "");
  if (!st && shards->n > UINT32_MAX) st = ff__error_set(err, FF_EINVAL, "tar:%s: over 2^32 shards", pattern);
  ff__index idx = {0};
  if (!st) {
    idx.paths = calloc(total, sizeof *idx.paths);
    idx.size_bytes = malloc(total * sizeof *idx.size_bytes);
    idx.labels = malloc(total * sizeof *idx.labels);
    idx.offsets = with_offsets ? malloc(total * sizeof *idx.offsets) : NULL;
    idx.shard_of = malloc(total * sizeof *idx.shard_of);
    if (!idx.paths || !idx.size_bytes || !idx.labels || (with_offsets && !idx.offsets) || !idx.shard_of)
      st = ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory for %zu samples", pattern, total);
  }
  int64_t max_label = -1;
  for (size_t i = 0; i < shards->n && !st; i++)
    for (size_t k = 0; k < scans[i].n && !st; k++) {
      const ff__tar_sample *t = &scans[i].s[k];
      size_t n = strlen(shards->v[i]) + strlen(t->member) + 2;
      char *p = malloc(n);
      if (!p) {
        st = ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
        break;
      }
      snprintf(p, n, "%s:%s", shards->v[i], t->member);
      size_t j = idx.count++;
      idx.paths[j] = p, idx.size_bytes[j] = t->size, idx.labels[j] = t->label, idx.shard_of[j] = (uint32_t)i;
      if (with_offsets) idx.offsets[j] = t->offset;
      max_label = t->label > max_label ? t->label : max_label;
    }
  if (st) {
    ff__strlist_free(&bad);
    ff__index_free(&idx);
    return st;
  }
  idx.num_classes = (size_t)(max_label + 1);
  idx.shards = shards->v, idx.num_shards = shards->n;
  *shards = (ff__strlist){0};
  idx.bad = bad.v, idx.num_bad = bad.n;
  idx.ignored_members = ignored;
  *out = idx;
  return FF_OK;
}

ff_status ff__tar_index_files(const char *pattern, ff__strlist *shards, ff__index *out, ff__error *err) {
  size_t found = 0;
  for (size_t i = 0; i < shards->n; i++) {
    struct stat sb;
    found += stat(shards->v[i], &sb) == 0;
  }
  if (!found)
    return ff__error_set(err, FF_EIO, "tar:%s: none of the %zu shard name(s) it expands to exists (the first: '%s')",
                         pattern, shards->n, shards->v[0]);
  ff__tar_shard *scans = calloc(shards->n, sizeof *scans);
  if (!scans) return ff__error_set(err, FF_ENOMEM, "tar:%s: out of memory", pattern);
  size_t n = shards->n;
  ff_status st = FF_OK;
  for (size_t i = 0; i < n && !st; i++) st = index_shard(shards->v[i], &scans[i], err);
  if (!st) st = ff__tar_index_build(pattern, shards, scans, 1, out, err);
  for (size_t i = 0; i < n; i++) ff__tar_shard_free(&scans[i]);
  free(scans);
  return st;
}
