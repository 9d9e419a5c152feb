/* test_source.c — the sample index: ImageFolder order, labels, extensions
 * and sizes; list files with comments, blank lines, relative and absolute
 * paths; and the errors of both. Source files need not be images here. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "source/source.h"

static void assert_contains(const char *text, const char *part) {
  if (!strstr(text, part)) fail_msg("\"%s\" does not contain \"%s\"", text, part);
}

/* Writes `size` bytes to root/rel (folders made as needed). */
static void put(const char *root, const char *rel, size_t size) {
  char path[2048], dir[2048];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  ff_test_mkdir(dir);
  static const char bytes[256] = {0};
  ff_test_write(path, bytes, size);
}

static void imagefolder_orders_classes_files_and_subfolders(void **state) {
  (void)state;
  char root[1024];
  snprintf(root, sizeof root, "%s", ff_test_dir("source-tree"));
  put(root, "stray.jpg", 1); /* not in a class folder: ignored */
  put(root, "b_class/z.jpg", 10);
  put(root, "b_class/m.Jpeg", 11);
  put(root, "b_class/A.JPG", 12);
  put(root, "b_class/readme.txt", 13);
  put(root, "b_class/anim.gif", 14);
  put(root, "b_class/jpg", 15); /* no extension */
  put(root, "b_class/sub/a.jpg", 16);
  put(root, "b_class/sub/deep/b.png", 17);
  put(root, "b_class/aaa/c.jpg", 18);
  put(root, "b_class/dir.jpg/inner.jpg", 19); /* a folder named like an image is a folder */
  put(root, "a_class/2.jpg", 20);
  put(root, "a_class/10.jpg", 21);
  put(root, "a_class/1.PNG", 22);

  char spec[1100];
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  ff__index idx;
  ff__error err = {0};
  ff_status st = ff__source_open(spec, 0, &idx, &err);
  if (st) fail_msg("%s", err.msg);

  /* Classes sorted; in a class its own files sorted by name (bytewise:
   * '.' < '0', upper case first), then each sub-folder sorted by path. */
  static const char *want[] = {
      "a_class/1.PNG",     "a_class/10.jpg",         "a_class/2.jpg",     "b_class/A.JPG",
      "b_class/m.Jpeg",    "b_class/z.jpg",          "b_class/aaa/c.jpg", "b_class/dir.jpg/inner.jpg",
      "b_class/sub/a.jpg", "b_class/sub/deep/b.png",
  };
  static const uint64_t sizes[] = {22, 21, 20, 12, 11, 10, 18, 19, 16, 17};
  const size_t n = sizeof want / sizeof want[0];
  assert_int_equal(idx.count, n);
  for (size_t i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root, want[i]);
    assert_string_equal(idx.paths[i], path);
    assert_int_equal(idx.labels[i], i < 3 ? 0 : 1);
    assert_int_equal(idx.size_bytes[i], sizes[i]);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(idx.size_bytes[i], (uint64_t)sb.st_size);
  }
  assert_int_equal(idx.num_classes, 2);
  assert_non_null(idx.class_names);
  assert_string_equal(idx.class_names[0], "a_class");
  assert_string_equal(idx.class_names[1], "b_class");
  ff__index_free(&idx);
  ff__index_free(NULL);
}

static void imagefolder_labels_classes_in_sorted_order(void **state) {
  (void)state;
  char root[1024];
  snprintf(root, sizeof root, "%s", ff_test_dir("source-classes"));
  const char *classes[] = {"dog", "Cat", "ant", "bee"}; /* sorted: Cat ant bee dog */
  for (int k = 0; k < 4; k++) {
    char rel[64];
    snprintf(rel, sizeof rel, "%s/x.jpg", classes[k]);
    put(root, rel, (size_t)k + 1);
  }
  char spec[1100];
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  ff__index idx;
  ff__error err = {0};
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_OK);
  assert_int_equal(idx.count, 4);
  const uint64_t sizes[4] = {2, 3, 4, 1}; /* Cat, ant, bee, dog */
  for (int i = 0; i < 4; i++) {
    assert_int_equal(idx.labels[i], i);
    assert_int_equal(idx.size_bytes[i], sizes[i]);
  }
  assert_string_equal(idx.class_names[0], "Cat");
  assert_string_equal(idx.class_names[3], "dog");
  ff__index_free(&idx);
}

static void imagefolder_errors(void **state) {
  (void)state;
  char root[1024], spec[1200];
  ff__index idx;
  ff__error err = {0};
  snprintf(root, sizeof root, "%s", ff_test_dir("source-errors"));
  snprintf(spec, sizeof spec, "imagefolder:%s/missing", root);
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EIO);
  assert_contains(err.msg, "missing");

  snprintf(spec, sizeof spec, "imagefolder:%s", root); /* empty folder */
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EEMPTY);

  put(root, "cls/notes.txt", 3); /* a class without images */
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EEMPTY);

  /* one class without images among others: refused as ImageFolder refuses
   * it, naming it; allow_empty keeps its label */
  put(root, "dog/d.jpg", 3);
  put(root, "ant/a.png", 3);
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EEMPTY);
  assert_contains(err.msg, "'cls'");
  assert_contains(err.msg, "allow_empty");
  assert_int_equal(ff__source_open(spec, 1, &idx, &err), FF_OK);
  assert_int_equal(idx.count, 2);
  assert_int_equal(idx.num_classes, 3); /* ant cls dog */
  assert_int_equal(idx.labels[0], 0);
  assert_int_equal(idx.labels[1], 2);
  ff__index_free(&idx);

  put(root, "file.jpg", 3);
  snprintf(spec, sizeof spec, "imagefolder:%s/file.jpg", root); /* not a folder */
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EIO);

  assert_int_equal(ff__source_open("folder:/tmp", 0, &idx, &err), FF_EINVAL);
  assert_contains(err.msg, "unknown kind 'folder:'");
  assert_contains(err.msg, "imagefolder:");
  assert_int_equal(ff__source_open(NULL, 0, &idx, &err), FF_EINVAL);
}

static void list_reads_comments_blank_lines_and_both_kinds_of_path(void **state) {
  (void)state;
  char root[1024], other[1024], list[2048], spec[2100], text[4096];
  snprintf(other, sizeof other, "%s", ff_test_dir("source-list-other"));
  put(other, "abs.png", 7);
  snprintf(root, sizeof root, "%s", ff_test_dir("source-list"));
  put(root, "imgs/one.jpg", 5);
  put(root, "three.jpeg", 9);
  snprintf(text, sizeof text,
           "# path<TAB>label\n"
           "\n"
           "imgs/one.jpg\t4\n"
           "# a comment\n"
           "%s/abs.png\t0\n"
           "\n"
           "three.jpeg\t2", /* no final newline */
           other);
  snprintf(list, sizeof list, "%s/list.txt", root);
  ff_test_write(list, text, strlen(text));
  snprintf(spec, sizeof spec, "list:%s", list);

  ff__index idx;
  ff__error err = {0};
  ff_status st = ff__source_open(spec, 0, &idx, &err);
  if (st) fail_msg("%s", err.msg);
  assert_int_equal(idx.count, 3);
  char path[2048];
  snprintf(path, sizeof path, "%s/imgs/one.jpg", root);
  assert_string_equal(idx.paths[0], path);
  snprintf(path, sizeof path, "%s/abs.png", other);
  assert_string_equal(idx.paths[1], path);
  snprintf(path, sizeof path, "%s/three.jpeg", root);
  assert_string_equal(idx.paths[2], path);
  const int64_t labels[3] = {4, 0, 2};
  const uint64_t sizes[3] = {5, 7, 9};
  assert_memory_equal(idx.labels, labels, sizeof labels);
  assert_memory_equal(idx.size_bytes, sizes, sizeof sizes);
  assert_int_equal(idx.num_classes, 5); /* largest label + 1 */
  assert_null(idx.class_names);
  ff__index_free(&idx);
}

static void list_errors_name_the_file_and_line(void **state) {
  (void)state;
  char root[1024], list[2048], spec[2100], want[2200];
  snprintf(root, sizeof root, "%s", ff_test_dir("source-list-errors"));
  put(root, "a.jpg", 3);
  snprintf(list, sizeof list, "%s/list.txt", root);
  snprintf(spec, sizeof spec, "list:%s", list);
  ff__index idx;
  ff__error err = {0};

  static const struct {
    const char *text;
    int line;
  } bad[] = {
      {"a.jpg\t0\n\na.jpg 1\n", 3}, /* no tab */
      {"a.jpg\t-1\n", 1},           /* negative label */
      {"# c\na.jpg\tcat\n", 2},     /* not a number */
      {"a.jpg\t1x\n", 1},           /* trailing junk */
      {"a.jpg\t\n", 1},             /* no label */
      {"\t3\n", 1},                 /* no path */
      {"a.jpg\t5\t7\n", 1},          /* a third field */
      {"a.jpg\t 1\n", 1},             /* a space before the label */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ff_test_write(list, bad[i].text, strlen(bad[i].text));
    assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EDATA);
    snprintf(want, sizeof want, "%s:%d", list, bad[i].line);
    assert_contains(err.msg, want);
  }

  /* a listed file that is not there is a sample that fails when read (the
   * loader's on_error decides), not a failed open */
  const char *missing = "a.jpg\t0\nnope.jpg\t1\n";
  ff_test_write(list, missing, strlen(missing));
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_OK);
  assert_int_equal(idx.count, 2);
  assert_int_equal(idx.size_bytes[1], 0);
  ff__index_free(&idx);

  /* the reproducer: a label of INT64_MAX (its class count overflows) */
  char repro[1200];
  snprintf(repro, sizeof repro, "list:%s/hostile/ubsan-list-label-int64-max.tsv", FF_TEST_DATA);
  assert_int_equal(ff__source_open(repro, 0, &idx, &err), FF_EDATA);
  assert_contains(err.msg, "ubsan-list-label-int64-max.tsv:1");
  assert_contains(err.msg, "too large");
  const char *big = "a.jpg\t9223372036854775806\n"; /* the largest label accepted */
  ff_test_write(list, big, strlen(big));
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_OK);
  assert_int_equal(idx.num_classes, (size_t)INT64_MAX);
  ff__index_free(&idx);

  /* a UTF-8 byte-order mark before the first line is not part of its path */
  const char *bom = "\xEF\xBB\xBF" "a.jpg\t3\n";
  ff_test_write(list, bom, strlen(bom));
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_OK);
  assert_int_equal(idx.count, 1);
  assert_int_equal(idx.size_bytes[0], 3);
  char want_path[2048];
  snprintf(want_path, sizeof want_path, "%s/a.jpg", root);
  assert_string_equal(idx.paths[0], want_path);
  ff__index_free(&idx);

  const char *empty = "# nothing\n\n";
  ff_test_write(list, empty, strlen(empty));
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EEMPTY);

  snprintf(spec, sizeof spec, "list:%s/no-list.txt", root);
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EIO);
  assert_contains(err.msg, "no-list.txt");
}

/* The paths of the index, relative to root, joined by spaces. */
static void relative_paths(const ff__index *idx, const char *root, char *out, size_t cap) {
  out[0] = 0;
  size_t skip = strlen(root) + 1;
  for (size_t i = 0; i < idx->count; i++) {
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", i ? " " : "", idx->paths[i] + skip);
  }
}

/* Links back to a folder on their own path are not entered (os.walk follows
 * them until ELOOP, indexing the images dozens of times); every other link
 * is followed, as os.walk(followlinks=True) follows it. Several layouts. */
static void imagefolder_symlink_cycles_are_not_followed(void **state) {
  (void)state;
  static const struct {
    const char *name;
    const char *links[3][2]; /* link path (relative to root), target */
    const char *want;
  } layouts[] = {
      {"self", {{"c/loop", "."}}, "c/a.jpg c/s/b.jpg"},
      {"two-self", {{"c/loop1", "."}, {"c/loop2", "."}}, "c/a.jpg c/s/b.jpg"},
      {"parent", {{"c/s/up", ".."}}, "c/a.jpg c/s/b.jpg"},
      {"grandparent-and-sibling", {{"c/s/t/up", "../.."}, {"c/s/side", "../u"}},
       "c/a.jpg c/s/b.jpg c/s/side/d.jpg c/u/d.jpg"},
      {"class-to-class", {{"c/other", "../e"}}, "c/a.jpg c/other/e.jpg c/s/b.jpg e/e.jpg"},
  };
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    char name[64], root[1024];
    snprintf(name, sizeof name, "source-links-%s", layouts[k].name);
    snprintf(root, sizeof root, "%s", ff_test_dir(name));
    put(root, "c/a.jpg", 1);
    put(root, "c/s/b.jpg", 1);
    if (strstr(layouts[k].want, "c/u/")) put(root, "c/u/d.jpg", 1), put(root, "c/s/t/x.txt", 1);
    if (strstr(layouts[k].want, "e/e.jpg")) put(root, "e/e.jpg", 1);
    for (int i = 0; i < 3 && layouts[k].links[i][0]; i++) {
      char link[2048];
      snprintf(link, sizeof link, "%s/%s", root, layouts[k].links[i][0]);
      assert_int_equal(symlink(layouts[k].links[i][1], link), 0);
    }
    char spec[1100], got[4096];
    snprintf(spec, sizeof spec, "imagefolder:%s", root);
    ff__index idx;
    ff__error err = {0};
    ff_status st = ff__source_open(spec, 0, &idx, &err);
    if (st) fail_msg("%s: %s", layouts[k].name, err.msg);
    relative_paths(&idx, root, got, sizeof got);
    if (strcmp(got, layouts[k].want)) fail_msg("%s: got \"%s\", want \"%s\"", layouts[k].name, got, layouts[k].want);
    ff__index_free(&idx);
  }
}

/* A FIFO named like an image is not indexed (reading it would block); a
 * dangling link named like one is (it fails when read, as in torchvision). */
static void imagefolder_indexes_only_regular_files(void **state) {
  (void)state;
  char root[1024], path[2048];
  snprintf(root, sizeof root, "%s", ff_test_dir("source-special"));
  put(root, "c/a.jpg", 4);
  snprintf(path, sizeof path, "%s/c/fifo.jpg", root);
  assert_int_equal(mkfifo(path, 0600), 0);
  snprintf(path, sizeof path, "%s/c/gone.jpg", root);
  assert_int_equal(symlink("nowhere.jpg", path), 0);
  char spec[1100], got[4096];
  snprintf(spec, sizeof spec, "imagefolder:%s", root);
  ff__index idx;
  ff__error err = {0};
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_OK);
  relative_paths(&idx, root, got, sizeof got);
  assert_string_equal(got, "c/a.jpg c/gone.jpg");
  assert_int_equal(idx.size_bytes[1], 0);
  ff__index_free(&idx);
}

/* A path without a kind: a folder is an imagefolder, a .tsv/.txt file a list. */
static void bare_paths_take_their_kind_from_what_they_are(void **state) {
  (void)state;
  char root[1024], path[1100], spec[1200];
  ff__index idx;
  ff__error err = {0};
  snprintf(root, sizeof root, "%s", ff_test_dir("source-bare"));
  put(root, "tree/b/x.jpg", 4);
  put(root, "tree/a/y.png", 6);
  snprintf(path, sizeof path, "%s/tree", root);
  assert_int_equal(ff__source_open(path, 0, &idx, &err), FF_OK);
  assert_int_equal(idx.count, 2);
  assert_int_equal(idx.num_classes, 2);
  assert_int_equal(idx.size_bytes[0], 6); /* class a first, as imagefolder: */
  ff__index_free(&idx);

  const char *text = "tree/b/x.jpg\t3\n";
  const char *names[] = {"train.tsv", "TRAIN.TXT"};
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/%s", root, names[k]);
    ff_test_write(path, text, strlen(text));
    ff_status st = ff__source_open(path, 0, &idx, &err);
    if (st) fail_msg("%s: %s", names[k], err.msg);
    assert_int_equal(idx.count, 1);
    assert_int_equal(idx.labels[0], 3);
    ff__index_free(&idx);
  }

  snprintf(path, sizeof path, "%s/train.csv", root); /* a file of another kind */
  ff_test_write(path, text, strlen(text));
  assert_int_equal(ff__source_open(path, 0, &idx, &err), FF_EINVAL);
  assert_contains(err.msg, "train.csv");
  assert_contains(err.msg, ".tsv/.txt");

  snprintf(path, sizeof path, "%s/missing", root);
  assert_int_equal(ff__source_open(path, 0, &idx, &err), FF_EIO);
  assert_contains(err.msg, "No such file");
  snprintf(spec, sizeof spec, "imagefolder:%s", path); /* the kind given: the same error as before */
  assert_int_equal(ff__source_open(spec, 0, &idx, &err), FF_EIO);
  assert_int_equal(ff__source_open("", 0, &idx, &err), FF_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(imagefolder_symlink_cycles_are_not_followed),
      cmocka_unit_test(imagefolder_indexes_only_regular_files),
      cmocka_unit_test(imagefolder_orders_classes_files_and_subfolders),
      cmocka_unit_test(imagefolder_labels_classes_in_sorted_order),
      cmocka_unit_test(imagefolder_errors),
      cmocka_unit_test(list_reads_comments_blank_lines_and_both_kinds_of_path),
      cmocka_unit_test(list_errors_name_the_file_and_line),
      cmocka_unit_test(bare_paths_take_their_kind_from_what_they_are),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
