/* test_pool.c — the budgeted device memory pool on a fake backend whose free
 * memory the test controls: reserved memory never exceeds the limit under
 * random allocation sequences, the limit follows the free memory on refresh
 * (shrinking and handing cached blocks back when another user takes
 * memory), a request over budget or refused by the device as out of memory
 * is FF__EBUDGET while any other device failure is a device error, and a
 * steady state reuses cached blocks. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/pool.h"
#include "fixtures.h"

/* A device of `total` bytes of which `other` are held by someone else. */
typedef struct fake {
  size_t total, other, used;
  int refuse; /* the next raw allocations fail: out of memory */
  int broken; /* the next raw allocations fail: the device failed */
  unsigned live, calls, trims;
} fake;

static ff_status fake_alloc(void *ctx, size_t size_bytes, void **out, ff__error *err) {
  fake *f = ctx;
  f->calls++;
  if (f->broken) return ff__error_set(err, FF_EDEVICE, "fake: context lost");
  if (f->refuse || f->used + f->other + size_bytes > f->total)
    return ff__error_set(err, FF__EBUDGET, "fake: full");
  size_t *p = malloc(sizeof(size_t) + size_bytes);
  if (!p) return FF__EBUDGET;
  *p = size_bytes;
  f->used += size_bytes, f->live++;
  *out = p + 1;
  return FF_OK;
}

static void fake_free(void *ctx, void *ptr, size_t size_bytes) {
  fake *f = ctx;
  size_t *p = (size_t *)ptr - 1;
  assert_int_equal(*p, size_bytes);
  f->used -= *p, f->live--;
  free(p);
}

static ff_status fake_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
  fake *f = ctx;
  *free_bytes = f->total - f->used - f->other, *total_bytes = f->total;
  return FF_OK;
}

static void fake_trim(void *ctx) { ((fake *)ctx)->trims++; }

static void open_pool(ff__pool *p, fake *f, size_t limit, size_t headroom, unsigned refresh_every) {
  ff__pool_backend be = {f, fake_alloc, fake_free, fake_info, fake_trim};
  ff__pool_config cfg = {limit, headroom, refresh_every};
  ff__error err = {0};
  assert_int_equal(ff__pool_init(p, &be, &cfg, &err), FF_OK);
}

static void the_limit_is_free_memory_minus_headroom_or_the_user_limit(void **state) {
  (void)state;
  fake f = {.total = 100 << 20, .other = 30 << 20};
  ff__pool p;
  ff__pool_stats s;
  open_pool(&p, &f, 0, 10 << 20, 0);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 60 << 20);
  ff__pool_destroy(&p);
  open_pool(&p, &f, 5 << 20, 10 << 20, 0);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 5 << 20);
  ff__pool_destroy(&p);
  f.other = 95 << 20; /* less free than the headroom: nothing */
  open_pool(&p, &f, 0, 10 << 20, 0);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 0);
  void *x;
  ff__error err = {0};
  assert_int_equal(ff__pool_alloc(&p, 1, &x, &err), FF__EBUDGET);
  ff__pool_destroy(&p);
}

static void size_classes_round_up_by_at_most_a_quarter(void **state) {
  (void)state;
  for (size_t n = 1; n < (1u << 24); n = n * 3 / 2 + 1) {
    size_t c = ff__pool_class_bytes(n);
    assert_true(c >= n);
    assert_true(c <= 512 || c <= n + n / 4 + 1);
    assert_int_equal(ff__pool_class_bytes(c), c);
  }
}

static void random_sequences_never_exceed_the_limit(void **state) {
  (void)state;
  enum { SLOTS = 64 };
  uint32_t rng = 99;
  for (int round = 0; round < 20; round++) {
    fake f = {.total = 64 << 20};
    ff__pool p;
    open_pool(&p, &f, (size_t)(8 + round) << 20, 1 << 20, round % 3 ? 16 : 0);
    void *held[SLOTS] = {0};
    ff__error err = {0};
    for (int step = 0; step < 4000; step++) {
      int k = (int)(ff_test_rand(&rng) % SLOTS);
      if (held[k]) {
        ff__pool_free(&p, held[k]);
        held[k] = NULL;
      } else {
        size_t size = 1 + ff_test_rand(&rng) % (ff_test_rand(&rng) % 2 ? 4096 : (3 << 20));
        ff_status st = ff__pool_alloc(&p, size, &held[k], &err);
        assert_true(st == FF_OK || st == FF__EBUDGET);
        if (st) held[k] = NULL;
      }
      if (step % 500 == 0) { /* someone else takes or gives back memory */
        f.other = (ff_test_rand(&rng) % 40) << 20;
        if (f.other + f.used > f.total) f.other = f.total - f.used;
        assert_int_equal(ff__pool_refresh(&p, &err), FF_OK);
      }
      ff__pool_stats s;
      ff__pool_stats_get(&p, &s);
      assert_true(s.used_bytes <= s.reserved_bytes);
      assert_true(s.peak_bytes >= s.reserved_bytes);
      assert_int_equal(s.reserved_bytes, f.used);
      /* above the limit only by blocks in use when it shrank, never by cache */
      if (s.reserved_bytes > s.limit_bytes) assert_int_equal(s.reserved_bytes, s.used_bytes);
      assert_true(f.used + f.other <= f.total);
    }
    for (int k = 0; k < SLOTS; k++)
      ff__pool_free(&p, held[k]);
    ff__pool_destroy(&p);
    assert_int_equal(f.live, 0);
  }
}

static void refresh_shrinks_the_limit_and_returns_cached_blocks(void **state) {
  (void)state;
  fake f = {.total = 100 << 20};
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 10 << 20, 0);
  void *a, *b;
  assert_int_equal(ff__pool_alloc(&p, 20 << 20, &a, &err), FF_OK); /* both exact size classes */
  assert_int_equal(ff__pool_alloc(&p, 28 << 20, &b, &err), FF_OK);
  ff__pool_free(&p, b); /* cached */
  ff__pool_stats s;
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 90 << 20);
  assert_int_equal(s.reserved_bytes, 48 << 20);
  assert_int_equal(s.used_bytes, 20 << 20);
  f.other = 52 << 20; /* the trainer takes all that was free */
  assert_int_equal(ff__pool_refresh(&p, &err), FF_OK);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 38 << 20);    /* what we hold + free - headroom */
  assert_int_equal(s.reserved_bytes, 20 << 20); /* the cached block went back */
  assert_int_equal(f.used, 20 << 20);
  assert_int_equal(ff__pool_alloc(&p, 28 << 20, &b, &err), FF__EBUDGET);
  f.other = 80 << 20; /* and more: below what is in use; a freed block goes straight back */
  assert_int_equal(ff__pool_refresh(&p, &err), FF_OK);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 10 << 20);
  ff__pool_free(&p, a);
  assert_int_equal(f.used, 0);
  f.other = 0; /* the trainer lets go: the limit grows back */
  assert_int_equal(ff__pool_refresh(&p, &err), FF_OK);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, 90 << 20);
  ff__pool_destroy(&p);
}

static void a_device_refusal_is_a_budget_status(void **state) {
  (void)state;
  fake f = {.total = 100 << 20};
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 0, 0);
  void *a, *b;
  assert_int_equal(ff__pool_alloc(&p, 1 << 20, &a, &err), FF_OK);
  ff__pool_free(&p, a);
  f.refuse = 1;
  assert_int_equal(ff__pool_alloc(&p, 2 << 20, &b, &err), FF__EBUDGET);
  assert_int_equal(f.live, 0); /* the cache was handed back before giving up */
  f.refuse = 0;
  assert_int_equal(ff__pool_alloc(&p, 2 << 20, &b, &err), FF_OK);
  ff__pool_free(&p, b);
  assert_int_equal(ff__pool_alloc(&p, 0, &b, &err), FF_EINVAL);
  ff__pool_destroy(&p);
}

static void a_device_failure_is_a_device_error_not_a_budget_refusal(void **state) {
  (void)state;
  fake f = {.total = 100 << 20};
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 0, 0);
  void *a, *b = NULL;
  assert_int_equal(ff__pool_alloc(&p, 1 << 20, &a, &err), FF_OK);
  ff__pool_free(&p, a);
  f.broken = 1, f.calls = 0;
  assert_int_equal(ff__pool_alloc(&p, 2 << 20, &b, &err), FF_EDEVICE);
  assert_non_null(strstr(err.msg, "context lost")); /* the device's own message */
  assert_null(b);
  assert_int_equal(f.calls, 1); /* no retry: freeing the cache cannot help */
  assert_int_equal(f.live, 1);  /* and the cache stays */
  ff__pool_stats s;
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.used_bytes, 0);
  ff__pool_destroy(&p);
}

static void a_steady_state_reuses_cached_blocks(void **state) {
  (void)state;
  fake f = {.total = 1 << 30};
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 0, 8);
  void *x[3];
  for (int round = 0; round < 100; round++) {
    for (int k = 0; k < 3; k++)
      assert_int_equal(ff__pool_alloc(&p, (size_t)(k + 1) * 100000 + round, &x[k], &err), FF_OK);
    for (int k = 0; k < 3; k++)
      ff__pool_free(&p, x[k]);
  }
  ff__pool_stats s;
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.raw_allocs, 3);
  ff__pool_trim(&p);
  assert_int_equal(f.live, 0);
  ff__pool_destroy(&p);
}

/* A framework's cap on the free memory sets the limit; when it shrinks,
 * cached blocks go back and the device is trimmed, in-use blocks stay. */
static void a_given_free_figure_sets_the_limit_and_a_shrinking_one_trims(void **state) {
  (void)state;
  fake f = {.total = 1 << 30};
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 1 << 20, 0);
  void *a, *b;
  assert_int_equal(ff__pool_alloc(&p, 8 << 20, &a, &err), FF_OK);
  assert_int_equal(ff__pool_alloc(&p, 8 << 20, &b, &err), FF_OK);
  ff__pool_free(&p, b); /* cached */
  ff__pool_stats s;
  assert_int_equal(ff__pool_set_free(&p, 100 << 20, &err), FF_OK);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, (16 << 20) + (100 << 20) - (1 << 20)); /* reserved + given - headroom */
  assert_int_equal(f.trims, 0);
  assert_int_equal(ff__pool_set_free(&p, 0, &err), FF_OK); /* the trainer took it all */
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, (16 << 20) - (1 << 20));
  assert_int_equal(s.reserved_bytes, 8 << 20); /* the cached block went back, the one in use stayed */
  assert_int_equal(f.live, 1);
  assert_int_equal(f.trims, 1);
  void *c;
  assert_int_equal(ff__pool_alloc(&p, 8 << 20, &c, &err), FF__EBUDGET); /* over the new limit */
  assert_int_equal(ff__pool_set_free(&p, -1, &err), FF_OK); /* back to the device's own figure */
  ff__pool_stats_get(&p, &s);
  assert_true(s.limit_bytes > (512u << 20));
  ff__pool_free(&p, a);
  ff__pool_destroy(&p);
}

/* Another user's cache (torch's reserved but unallocated memory) is not
 * free: a figure that counts it (free + reserved - allocated, as the Python
 * loader once reported) does not raise the limit past the device's free
 * memory, so the loader never plans on memory it cannot get. */
static void the_limit_counts_only_memory_the_device_has_free(void **state) {
  (void)state;
  fake f = {.total = 1 << 30, .other = 900 << 20}; /* 900 MiB cached by the trainer's allocator */
  ff__pool p;
  ff__error err = {0};
  open_pool(&p, &f, 0, 16 << 20, 0);
  ff__pool_stats s;
  ff__pool_stats_get(&p, &s);
  size_t free_bytes = (1u << 30) - (900u << 20);
  assert_int_equal(s.limit_bytes, free_bytes - (16 << 20));
  assert_int_equal(ff__pool_set_free(&p, 1 << 30, &err), FF_OK); /* "free + cached": 1 GiB */
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, free_bytes - (16 << 20)); /* still only what is free */
  void *a;
  assert_int_equal(ff__pool_alloc(&p, 200 << 20, &a, &err), FF__EBUDGET); /* over budget, not tried */
  assert_int_equal(f.calls, 0);
  f.other = 100 << 20; /* the trainer released its cache (torch.cuda.empty_cache()) */
  assert_int_equal(ff__pool_refresh(&p, &err), FF_OK);
  ff__pool_stats_get(&p, &s);
  assert_int_equal(s.limit_bytes, (1u << 30) - (100u << 20) - (16u << 20));
  assert_int_equal(ff__pool_alloc(&p, 200 << 20, &a, &err), FF_OK);
  ff__pool_free(&p, a);
  ff__pool_destroy(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_limit_is_free_memory_minus_headroom_or_the_user_limit),
      cmocka_unit_test(size_classes_round_up_by_at_most_a_quarter),
      cmocka_unit_test(random_sequences_never_exceed_the_limit),
      cmocka_unit_test(refresh_shrinks_the_limit_and_returns_cached_blocks),
      cmocka_unit_test(a_device_refusal_is_a_budget_status),
      cmocka_unit_test(a_device_failure_is_a_device_error_not_a_budget_refusal),
      cmocka_unit_test(a_steady_state_reuses_cached_blocks),
      cmocka_unit_test(a_given_free_figure_sets_the_limit_and_a_shrinking_one_trims),
      cmocka_unit_test(the_limit_counts_only_memory_the_device_has_free),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
