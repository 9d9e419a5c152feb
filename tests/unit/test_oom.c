/* test_oom.c — the out-of-memory contract of the public header: an open
 * that runs out of host memory returns FF_ENOMEM and a NULL handle and
 * leaks nothing (imagefolder: and list: sources), and a loader whose allocations fail mid-epoch hands out
 * errors, never crashes or hangs, and frees everything at close. The Nth
 * allocation is made to fail (alloc_fail.h) for N = 1, 2, 3... until the
 * call under test no longer reaches it; the blocks alive before and after
 * are compared. Skipped under ASan and TSan (their runtimes own malloc). */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_fail.h"
#include "fixtures.h"
#include "fusionflow/fusionflow.h"

enum { MAX_STEPS = 5000 }; /* bounds each loop over N: an open takes a few hundred allocations */

enum { CLASSES = 2, PER_CLASS = 20 };
static char folder_source[2048]; /* "imagefolder:" 2 classes of 20 small JPEGs */
static char list_source[2048];   /* "list:" the same images */

static int make_dataset(void **state) {
  (void)state;
  char root[1024], path[1200], list[1100];
  snprintf(root, sizeof root, "%s", ff_test_dir("oom-data"));
  ff_test_make_imagefolder(root, CLASSES, PER_CLASS, 24, 48, 5);
  snprintf(folder_source, sizeof folder_source, "imagefolder:%s", root);
  snprintf(list, sizeof list, "%s.txt", root);
  FILE *f = fopen(list, "w");
  assert_non_null(f);
  for (int k = 0; k < CLASSES; k++)
    for (int i = 0; i < PER_CLASS; i++) fprintf(f, "%s\t%d\n", ff_test_imagefolder_path(root, k, i, path, sizeof path), k);
  assert_int_equal(fclose(f), 0);
  snprintf(list_source, sizeof list_source, "list:%s", list);
  return 0;
}

static ff_config config(const char *source) {
  ff_config c;
  ff_config_init(&c);
  c.source = source;
  c.pipeline = "decode | random_resized_crop(size=16) | random_horizontal_flip | normalize(mean=imagenet, "
               "std=imagenet)";
  c.batch_size = 4;
  c.seed = 3;
  c.num_threads = 2;
  c.prefetch = 2;
  c.rank = 0;
  c.world_size = 1;
  return c;
}

/* Skips the test where a sanitizer's runtime owns malloc, saying so. */
static void need_hook(void) {
  if (ff_test_alloc_hooked()) return;
  fprintf(stderr, "skipped: AddressSanitizer or ThreadSanitizer owns malloc, allocations cannot be made to fail\n");
  skip();
}

/* Opens and closes once unarmed, so that what the process allocates once
 * and keeps (the thread stacks glibc caches, a library's tables) is not
 * counted as a leak of the steps that follow. */
static void warm_up(const ff_config *cfg) {
  for (int i = 0; i < 2; i++) {
    ff_loader *l = NULL;
    assert_int_equal(ff_loader_open(cfg, &l), FF_OK);
    ff_batch *b;
    while (ff_loader_next(l, &b) == FF_OK) ff_batch_release(b);
    ff_loader_close(l);
  }
}

/* Opens a loader of `source` with its Nth allocation failing, N = 1, 2...
 * until the open no longer reaches it: each failure must give FF_ENOMEM
 * and no handle, and every step leave as many blocks alive as before. */
static void open_fails_at_every_allocation(const char *source) {
  need_hook();
  ff_config cfg = config(source);
  warm_up(&cfg);
  long n = 1, failed_opens = 0, wrong = 0;
  for (; n <= MAX_STEPS; n++) {
    long before = ff_test_alloc_live();
    ff_loader *l = (ff_loader *)1;
    ff_test_alloc_fail_at(n, 0);
    ff_status st = ff_loader_open(&cfg, &l);
    int fired = ff_test_alloc_disarm();
    if (st == FF_OK) {
      ff_loader_close(l);
      if (!fired) break; /* the open needs fewer than n allocations */
    } else {
      failed_opens++;
      if (!fired || st != FF_ENOMEM || l) {
        fprintf(stderr, "allocation %ld failed: status %d, handle %p, message: %s\n", n, st, (void *)l,
                ff_loader_errmsg(l));
        ff_loader_close(l);
        wrong++;
      }
    }
    long after = ff_test_alloc_live();
    if (after != before) {
      fprintf(stderr, "allocation %ld failed: %ld blocks leaked\n", n, after - before);
      wrong++;
    }
  }
  fprintf(stderr, "%s: an open takes %ld allocations on its thread; %ld failed, %ld of them wrongly\n", source,
          n - 1, failed_opens, wrong);
  assert_true(n <= MAX_STEPS);
  assert_int_equal(wrong, 0);
  assert_true(failed_opens > 10);
}

static void an_imagefolder_open_out_of_memory_gives_enomem_and_no_handle(void **state) {
  (void)state;
  open_fails_at_every_allocation(folder_source);
}

static void a_list_open_out_of_memory_gives_enomem_and_no_handle(void **state) {
  (void)state;
  open_fails_at_every_allocation(list_source);
}

/* Fails the nth allocation on any thread after the first batch, reads the
 * epoch to its end (errors allowed), closes: no crash, no hang (the alarm),
 * nothing left. Returns whether the armed allocation failed. */
static int epoch_with_a_failure(const ff_config *cfg, long n, int *errors) {
  long before = ff_test_alloc_live();
  ff_loader *l = NULL;
  assert_int_equal(ff_loader_open(cfg, &l), FF_OK);
  ff_batch *b;
  assert_int_equal(ff_loader_next(l, &b), FF_OK);
  ff_batch_release(b);
  ff_test_alloc_fail_at(n, 1);
  ff_status st;
  int calls = 0;
  while ((st = ff_loader_next(l, &b)) != FF_END && calls++ < 64) {
    if (st == FF_OK) {
      ff_batch_release(b);
      continue;
    }
    if (st != FF_ENOMEM) fprintf(stderr, "allocation %ld failed: next gave %d: %s\n", n, st, ff_loader_errmsg(l));
    assert_int_equal(st, FF_ENOMEM);
    assert_non_null(strstr(ff_loader_errmsg(l), "memory"));
    (*errors)++;
  }
  assert_int_equal(st, FF_END);
  int fired = ff_test_alloc_disarm();
  ff_loader_close(l);
  long after = ff_test_alloc_live();
  if (after != before) fprintf(stderr, "allocation %ld failed mid-epoch: %ld blocks leaked\n", n, after - before);
  assert_int_equal(after, before);
  return fired;
}

static int join_a_node_group(void **state) {
  (void)state;
  char group[64];
  snprintf(group, sizeof group, "test-oom-%d", (int)getpid());
  setenv("FF_NODE_GROUP", group, 1);
  setenv("FF_NODE_THREADS", "2", 1);
  return 0;
}

static int leave_the_node_group(void **state) {
  (void)state;
  unsetenv("FF_NODE_GROUP");
  unsetenv("FF_NODE_THREADS");
  return 0;
}

/* The coordinator's join degrades to running alone when it cannot
 * allocate (one line on stderr): the open succeeds then. */
static void an_open_in_a_node_group_out_of_memory_gives_enomem_and_no_handle(void **state) {
  (void)state;
  open_fails_at_every_allocation(folder_source);
}

static void next_out_of_memory_gives_an_error_and_close_frees_everything(void **state) {
  (void)state;
  need_hook();
  ff_config cfg = config(folder_source);
  warm_up(&cfg);
  ff_test_stop_on_alarm("a loader whose allocation failed mid-epoch");
  alarm(120);
  int errors = 0;
  long n = 1;
  for (; n <= MAX_STEPS && epoch_with_a_failure(&cfg, n, &errors); n++) {
  }
  alarm(0);
  assert_true(n <= MAX_STEPS);
  fprintf(stderr, "the rest of an epoch takes about %ld allocations; %d batches failed with FF_ENOMEM\n", n - 1,
          errors);
  assert_true(errors > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(an_imagefolder_open_out_of_memory_gives_enomem_and_no_handle),
      cmocka_unit_test(a_list_open_out_of_memory_gives_enomem_and_no_handle),
      cmocka_unit_test_setup_teardown(an_open_in_a_node_group_out_of_memory_gives_enomem_and_no_handle,
                                      join_a_node_group, leave_the_node_group),
      cmocka_unit_test(next_out_of_memory_gives_an_error_and_close_frees_everything),
  };
  return cmocka_run_group_tests(tests, make_dataset, NULL);
}
