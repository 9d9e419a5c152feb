/* test_sampler.c — the epoch order against hand-worked
 * torch.utils.data.DistributedSampler cases: num_samples, padding by
 * repeating the start, truncation with drop_last, the strided split across
 * ranks, and the seeded permutation. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "fusionflow/fusionflow.h"
#include "loader/sampler.h"

/* Indices of `rank` (num_samples values) into out. */
static void indices(size_t n, int shuffle, uint64_t seed, uint64_t epoch, int rank, int world, int drop_last,
                    int64_t *out) {
  int64_t *perm = malloc((n ? n : 1) * sizeof *perm);
  assert_non_null(perm);
  ff__sampler_indices(n, shuffle, FF_PERMUTATION_PHILOX, seed, epoch, rank, world, drop_last, perm, out);
  free(perm);
}

static void num_samples_matches_distributed_sampler(void **state) {
  (void)state;
  /* ceil(n / world) without drop_last; ceil((n - world) / world) with it
   * when n is not a multiple of world. */
  assert_int_equal(ff__sampler_num_samples(10, 3, 0), 4);
  assert_int_equal(ff__sampler_num_samples(10, 3, 1), 3);
  assert_int_equal(ff__sampler_num_samples(9, 3, 0), 3);
  assert_int_equal(ff__sampler_num_samples(9, 3, 1), 3);
  assert_int_equal(ff__sampler_num_samples(11, 4, 0), 3);
  assert_int_equal(ff__sampler_num_samples(11, 4, 1), 2);
  assert_int_equal(ff__sampler_num_samples(50, 1, 0), 50);
  assert_int_equal(ff__sampler_num_samples(50, 1, 1), 50);
  assert_int_equal(ff__sampler_num_samples(1, 4, 0), 1);
}

static void num_samples_is_zero_when_drop_last_leaves_nothing(void **state) {
  (void)state;
  /* torch: math.ceil((2 - 3) / 3) = ceil(-0.33) = 0 */
  assert_int_equal(ff__sampler_num_samples(2, 3, 1), 0);
  assert_int_equal(ff__sampler_num_samples(1, 8, 1), 0);
}

static void unshuffled_ten_over_three_ranks_pads_with_the_start(void **state) {
  (void)state;
  const int64_t want[3][4] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (int r = 0; r < 3; r++) {
    int64_t got[4];
    indices(10, 0, 0, 0, r, 3, 0, got);
    assert_memory_equal(got, want[r], sizeof got);
  }
}

static void unshuffled_ten_over_three_ranks_drops_the_tail(void **state) {
  (void)state;
  const int64_t want[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (int r = 0; r < 3; r++) {
    int64_t got[3];
    indices(10, 0, 0, 0, r, 3, 1, got);
    assert_memory_equal(got, want[r], sizeof got);
  }
}

static void padding_longer_than_the_dataset_repeats_it(void **state) {
  (void)state;
  /* n = 2, world = 5: padded list [0, 1, 0, 1, 0], one index per rank */
  const int64_t want[5] = {0, 1, 0, 1, 0};
  for (int r = 0; r < 5; r++) {
    int64_t got[1];
    indices(2, 0, 0, 0, r, 5, 0, got);
    assert_int_equal(got[0], want[r]);
  }
}

static void shuffled_epoch_is_a_permutation(void **state) {
  (void)state;
  enum { n = 1000 };
  int64_t got[n];
  int seen[n] = {0};
  indices(n, 1, 42, 0, 0, 1, 0, got);
  int fixed = 0;
  for (int i = 0; i < n; i++) {
    assert_in_range(got[i], 0, n - 1);
    seen[got[i]]++;
    fixed += got[i] == i;
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(seen[i], 1);
  assert_true(fixed < 10); /* a random permutation has about one fixed point */
}

static void shuffle_depends_on_seed_and_epoch_only(void **state) {
  (void)state;
  enum { n = 100 };
  int64_t a[n], b[n], c[n], d[n];
  indices(n, 1, 42, 3, 0, 1, 0, a);
  indices(n, 1, 42, 3, 0, 1, 0, b);
  indices(n, 1, 43, 3, 0, 1, 0, c);
  indices(n, 1, 42, 4, 0, 1, 0, d);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_not_equal(a, c, sizeof a);
  assert_memory_not_equal(a, d, sizeof a);
}

static void ranks_split_the_same_permutation(void **state) {
  (void)state;
  enum { n = 103, world = 4, per = 26 }; /* ceil(103 / 4) = 26, 104 in all */
  int64_t all[n], part[world][per];
  indices(n, 1, 9, 2, 0, 1, 0, all);
  int count[n] = {0};
  for (int r = 0; r < world; r++) {
    assert_int_equal(ff__sampler_num_samples(n, world, 0), per);
    indices(n, 1, 9, 2, r, world, 0, part[r]);
    for (int k = 0; k < per; k++) {
      size_t pos = (size_t)r + (size_t)k * world; /* position in the padded list */
      assert_int_equal(part[r][k], all[pos % n]);
      count[part[r][k]]++;
    }
  }
  /* Every sample is covered; the one padding entry repeats the first. */
  for (int i = 0; i < n; i++)
    assert_int_equal(count[i], i == all[0] ? 2 : 1);
  assert_int_equal(part[3][25], part[0][0]);
}

static void drop_last_ranks_are_disjoint(void **state) {
  (void)state;
  enum { n = 103, world = 4, per = 25 }; /* ceil((103 - 4) / 4) = 25, 100 in all */
  assert_int_equal(ff__sampler_num_samples(n, world, 1), per);
  int count[n] = {0};
  for (int r = 0; r < world; r++) {
    int64_t got[per];
    indices(n, 1, 9, 2, r, world, 1, got);
    for (int k = 0; k < per; k++)
      count[got[k]]++;
  }
  int covered = 0;
  for (int i = 0; i < n; i++) {
    assert_true(count[i] <= 1);
    covered += count[i];
  }
  assert_int_equal(covered, 100);
}

static void single_sample_shuffles_to_itself(void **state) {
  (void)state;
  int64_t got[1] = {-1};
  indices(1, 1, 5, 0, 0, 1, 0, got);
  assert_int_equal(got[0], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(num_samples_matches_distributed_sampler),
      cmocka_unit_test(num_samples_is_zero_when_drop_last_leaves_nothing),
      cmocka_unit_test(unshuffled_ten_over_three_ranks_pads_with_the_start),
      cmocka_unit_test(unshuffled_ten_over_three_ranks_drops_the_tail),
      cmocka_unit_test(padding_longer_than_the_dataset_repeats_it),
      cmocka_unit_test(shuffled_epoch_is_a_permutation),
      cmocka_unit_test(shuffle_depends_on_seed_and_epoch_only),
      cmocka_unit_test(ranks_split_the_same_permutation),
      cmocka_unit_test(drop_last_ranks_are_disjoint),
      cmocka_unit_test(single_sample_shuffles_to_itself),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
