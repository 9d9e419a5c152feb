/* test_tar_index.c — ff__tar_index_build, the index that the file shards
 * (tar.c, read by offset) and the streamed ones (stream.c) both make from
 * their scans: the samples' paths, sizes, labels, shards and offsets in
 * scan order, the scans' problems gathered in order, the shard names taken
 * over, and an index without samples refused with the first problem; and
 * when a streamed open's progress line is due (ff__open_rule_due).
 * tests/python/test_tar.py and test_stream.py run both kinds end to end. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_index_lists_the_samples_of_every_scan_in_order),
      cmocka_unit_test(no_sample_is_refused_with_the_first_problem),
      cmocka_unit_test(a_progress_line_is_due_at_2_s_each_long_wait_and_every_10_s),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
