/* test_tar_index.c — ff__tar_index_build, the index that the file shards
 * (tar.c, read by offset) and the streamed ones (stream.c) both make from
 * their scans: the samples' paths, sizes, labels, shards and offsets in
 * scan order, the scans' problems gathered in order, the shard names taken
 * over, and an index without samples refused with the first problem; the
 * index cache's text taken only whole, for the shard as it is, and holding
 * together (ff__tar_cache_parse); and when a streamed open's progress line
 * is due (ff__open_rule_due).
 * tests/python/test_tar.py and test_stream.py run both kinds end to end. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "source/stream.h"
#include "source/tar.h"

static char x_jpg[] = "x.jpg", y_png[] = "y.png";
static char no_cls[] = "a.tar: z.jpg: no z.cls", empty[] = "b.tar: an empty shard";

/* Two shards: a.tar with two samples and a problem, b.tar with none and a problem. */
static void two_scans(ff__tar_shard scans[2], ff__tar_sample samples[2], char *problems[2]) {
  samples[0] = (ff__tar_sample){x_jpg, 1, 512, 10, 3};
  samples[1] = (ff__tar_sample){y_png, 1, 2048, 20, 1};
  problems[0] = no_cls, problems[1] = empty;
  scans[0] = (ff__tar_shard){samples, 2, 2, {&problems[0], 1, 1}, 2};
  scans[1] = (ff__tar_shard){NULL, 0, 0, {&problems[1], 1, 1}, 1};
}

static ff__strlist names(void) {
  ff__strlist l = {0};
  assert_int_equal(ff__strlist_push(&l, "a.tar"), 0);
  assert_int_equal(ff__strlist_push(&l, "b.tar"), 0);
  return l;
}

static void the_index_lists_the_samples_of_every_scan_in_order(void **state) {
  (void)state;
  for (int with_offsets = 0; with_offsets < 2; with_offsets++) {
    ff__tar_shard scans[2];
    ff__tar_sample samples[2];
    char *problems[2];
    two_scans(scans, samples, problems);
    ff__strlist shards = names();
    ff__index idx;
    ff__error err = {0};
    assert_int_equal(ff__tar_index_build("pat", &shards, scans, with_offsets, &idx, &err), FF_OK);
    assert_int_equal(idx.count, 2);
    assert_string_equal(idx.paths[0], "a.tar:x.jpg");
    assert_string_equal(idx.paths[1], "a.tar:y.png");
    assert_int_equal(idx.size_bytes[0], 10);
    assert_int_equal(idx.size_bytes[1], 20);
    assert_int_equal(idx.labels[0], 3);
    assert_int_equal(idx.labels[1], 1);
    assert_int_equal(idx.shard_of[0], 0);
    assert_int_equal(idx.shard_of[1], 0);
    assert_int_equal(idx.num_classes, 4); /* the largest label + 1 */
    if (with_offsets) {
      assert_non_null(idx.offsets);
      assert_int_equal(idx.offsets[0], 512);
      assert_int_equal(idx.offsets[1], 2048);
    } else {
      assert_null(idx.offsets);
    }
    assert_int_equal(idx.num_shards, 2);
    assert_string_equal(idx.shards[1], "b.tar");
    assert_int_equal(shards.n, 0); /* the index took the names */
    assert_null(shards.v);
    assert_int_equal(idx.num_bad, 2);
    assert_string_equal(idx.bad[0], no_cls);
    assert_string_equal(idx.bad[1], empty);
    assert_int_equal(idx.ignored_members, 3);
    ff__index_free(&idx);
  }
}

static void no_sample_is_refused_with_the_first_problem(void **state) {
  (void)state;
  ff__tar_shard scans[2];
  ff__tar_sample samples[2];
  char *problems[2];
  two_scans(scans, samples, problems);
  scans[0].n = 0;
  ff__strlist shards = names();
  ff__index idx = {0};
  ff__error err = {0};
  assert_int_equal(ff__tar_index_build("pat", &shards, scans, 1, &idx, &err), FF_EEMPTY);
  assert_string_equal(err.msg, "tar:pat: no sample in 2 shard(s); the first problem: a.tar: z.jpg: no z.cls");
  assert_int_equal(shards.n, 2); /* still the caller's */
  assert_int_equal(idx.count, 0);
  ff__strlist_free(&shards);
}

/* When an open's progress line is due, from calls every 1/8 s: the first
 * once the open has taken 2 s, then every 10 s within a long wait, one for
 * each wait (an attempt, a backoff) once it has lasted half a second, and
 * none for a wait shorter than that. */
static void a_progress_line_is_due_at_2_s_each_long_wait_and_every_10_s(void **state) {
  (void)state;
  static const struct {
    double start;
    int calls;
    size_t shard;
    int attempt, backing_off;
  } waits[] = {
      {0, 8 * 25, 0, 1, 0}, /* shard 0, first read: 0 to 25 s */
      {25, 3, 0, 2, 1},     /* a backoff of 3/8 s: unsaid */
      {25.375, 8, 0, 2, 0}, /* the retry, 1 s */
      {26.375, 3, 1, 1, 0}, /* a quick shard: unsaid */
      {26.75, 8, 2, 1, 0},
  };
  ff__open_rule r = {0};
  double due[8];
  int n = 0;
  for (size_t w = 0; w < sizeof waits / sizeof *waits; w++)
    for (int k = 0; k < waits[w].calls; k++) {
      ff_open_progress p = {.shard = "s.tar",
                            .shard_index = waits[w].shard,
                            .num_shards = 3,
                            .attempt = waits[w].attempt,
                            .max_attempts = 4,
                            .backing_off = waits[w].backing_off,
                            .last_error = "",
                            .elapsed_s = waits[w].start + k / 8.0};
      if (ff__open_rule_due(&r, &p) && n < 8) due[n++] = p.elapsed_s;
    }
  const double want[] = {2.0, 12.0, 22.0, 25.875, 27.25};
  assert_int_equal(n, 5);
  for (int i = 0; i < n; i++)
    assert_true(due[i] == want[i]);
}

/* A cache text for the shard /d/s.tar of stat *sb with the given sample lines, signed as the writer signs it. */
static char *cache_text(const struct stat *sb, const char *samples, int sign) {
  char body[4096];
  snprintf(body, sizeof body, "fusionflow-tar-index 3\npath /d/s.tar\nstat %lld %lld %ld %lld %ld %llu %llu\n"
           "ignored 1\n%s", (long long)sb->st_size, (long long)sb->st_mtim.tv_sec, (long)sb->st_mtim.tv_nsec,
           (long long)sb->st_ctim.tv_sec, (long)sb->st_ctim.tv_nsec, (unsigned long long)sb->st_ino,
           (unsigned long long)sb->st_dev, samples);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = body; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  char *text = malloc(strlen(body) + 32);
  sprintf(text, "%s", body);
  if (sign) sprintf(text + strlen(body), "end %016llx\n", (unsigned long long)h);
  return text;
}

static int parses(const struct stat *sb, const char *samples, int sign) {
  char *text = cache_text(sb, samples, sign);
  ff__tar_shard sc;
  int ok = ff__tar_cache_parse(text, strlen(text), "/d/s.tar", sb, &sc);
  if (ok) {
    assert_int_equal(sc.n, 2);
    assert_int_equal(sc.s[1].offset, 3072);
    assert_int_equal(sc.s[1].label, 9223372036854775806);
    assert_int_equal(sc.ignored, 1);
    ff__tar_shard_free(&sc);
  } else {
    assert_int_equal(sc.n, 0);
  }
  free(text);
  return ok;
}

static void a_cache_is_taken_only_whole_for_the_shard_as_it_is_and_holding_together(void **state) {
  (void)state;
  struct stat sb;
  memset(&sb, 0, sizeof sb);
  sb.st_size = 8192, sb.st_ino = 77, sb.st_dev = 9;
  sb.st_mtim.tv_sec = 100, sb.st_ctim.tv_sec = 200, sb.st_ctim.tv_nsec = 3;
  const char *good = "s\t512\t1000\t3\ta/x.jpg\ns\t3072\t20\t9223372036854775806\tb.png\nb\tone problem\n";
  assert_true(parses(&sb, good, 1));
  assert_false(parses(&sb, good, 0)); /* no checksum line: cut short, or another writer's */
  struct stat moved = sb;
  moved.st_ctim.tv_nsec = 4; /* rewritten, modification time put back */
  char *text = cache_text(&sb, good, 1);
  ff__tar_shard sc;
  assert_false(ff__tar_cache_parse(text, strlen(text), "/d/s.tar", &moved, &sc));
  assert_false(ff__tar_cache_parse(text, strlen(text), "/d/t.tar", &sb, &sc));
  text[strlen(text) - 3] ^= 1; /* a changed checksum */
  assert_false(ff__tar_cache_parse(text, strlen(text), "/d/s.tar", &sb, &sc));
  free(text);
  static const char *const bad[] = {
      "s\t512\t1000\t3\ta/x.jpg\ns\t3072\t20\t9223372036854775807\tb.png\n", /* label: no class count fits */
      "s\t512\t1000\t3\ta/x.jpg\ns\t18446744073709551104\t1024\t1\tb.png\n", /* wraps around 2^64 */
      "s\t512\t1000\t3\ta/x.jpg\ns\t3072\t9223372036854775808\t1\tb.png\n", /* past the file */
      "s\t512\t1000\t3\ta/x.jpg\ns\t8192\t1\t1\tb.png\n",                  /* past the file */
      "s\t512\t1000\t3\ta/x.jpg\ns\t1536\t20\t1\tb.png\n",   /* inside the previous sample's blocks */
      "s\t512\t1000\t3\ta/x.jpg\ns\t3073\t20\t1\tb.png\n",   /* off a block */
      "s\t0\t10\t3\ta/x.jpg\ns\t3072\t20\t1\tb.png\n",       /* no header before it */
      "s\t512\t1000\t3\ta/x\ns\t3072\t20\t1\tb.png\n",       /* a member without a key */
      "s\t512\t1000\t-3\ta/x.jpg\ns\t3072\t20\t1\tb.png\n",  /* a negative label */
      "s\t512\t1000\t3\ta/x.jpg\nq\tsomething else\n",        /* a line of no kind */
      "s\t512\t1000\t3 \ta/x.jpg\n",                           /* not a number */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (parses(&sb, bad[i], 1)) fail_msg("cache line set %zu was taken", i);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_index_lists_the_samples_of_every_scan_in_order),
      cmocka_unit_test(no_sample_is_refused_with_the_first_problem),
      cmocka_unit_test(a_cache_is_taken_only_whole_for_the_shard_as_it_is_and_holding_together),
      cmocka_unit_test(a_progress_line_is_due_at_2_s_each_long_wait_and_every_10_s),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
