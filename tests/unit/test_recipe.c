/* test_recipe.c — ff_recipe_pipeline, which the CLI (bench --recipe NAME
 * --num-classes N) and the Python package (recipe_pipeline, Loader(recipe=,
 * num_classes=)) both call: the text of every recipe as published or with
 * its mixup_cutmix's num_classes set, sized by a first call and cut at the
 * buffer's end as snprintf cuts, and the refusals (a recipe without a batch
 * stage, a num_classes below 0, NULL arguments). The expected texts are the
 * table's with the substitution done here by hand. tests/python/test_recipes.py
 * checks the two callers against each other. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusionflow/fusionflow.h"

/* published with its one "num_classes=1000" made "num_classes=N", or NULL when it has none. */
static char *by_hand(const char *published, int n) {
  const char *at = strstr(published, "num_classes=1000");
  if (!at) return NULL;
  assert_null(strstr(at + 1, "num_classes=1000")); /* one batch stage */
  char *out = malloc(strlen(published) + 16);
  assert_non_null(out);
  sprintf(out, "%.*snum_classes=%d%s", (int)(at - published), published, n, at + strlen("num_classes=1000"));
  return out;
}

static void every_recipe_is_published_or_gets_its_num_classes(void **state) {
  (void)state;
  int mixing = 0, plain = 0;
  for (size_t i = 0; ff_recipe_at(i); i++) {
    const ff_recipe *r = ff_recipe_at(i);
    char buf[8192];
    size_t len = 0;
    assert_int_equal(ff_recipe_pipeline(r, 0, buf, sizeof buf, &len), FF_OK);
    assert_string_equal(buf, r->pipeline);
    assert_int_equal(len, strlen(r->pipeline));
    char *want = by_hand(r->pipeline, 7);
    int has_mix = strstr(r->pipeline, "mixup_cutmix(") != NULL;
    assert_int_equal(want != NULL, has_mix);
    len = 12345;
    memcpy(buf, "untouched", 10);
    ff_status st = ff_recipe_pipeline(r, 7, buf, sizeof buf, &len);
    if (want) {
      assert_int_equal(st, FF_OK);
      assert_string_equal(buf, want);
      assert_int_equal(len, strlen(want));
      mixing++;
    } else { /* dino, simclr: no batch stage whose num_classes to set */
      assert_int_equal(st, FF_EPIPELINE);
      assert_string_equal(buf, "untouched");
      assert_int_equal(len, 12345);
      plain++;
    }
    free(want);
  }
  assert_true(mixing >= 1 && plain >= 1);
}

static void a_first_call_sizes_the_buffer_and_a_short_one_is_cut(void **state) {
  (void)state;
  const ff_recipe *r = ff_recipe_find("deit");
  assert_non_null(r);
  char *want = by_hand(r->pipeline, 1234567);
  size_t len = 0;
  assert_int_equal(ff_recipe_pipeline(r, 1234567, NULL, 0, &len), FF_OK);
  assert_int_equal(len, strlen(want));
  char *buf = malloc(len + 1);
  assert_non_null(buf);
  assert_int_equal(ff_recipe_pipeline(r, 1234567, buf, len + 1, NULL), FF_OK);
  assert_string_equal(buf, want);
  size_t got = 0;
  assert_int_equal(ff_recipe_pipeline(r, 1234567, buf, 20, &got), FF_OK);
  assert_int_equal(got, len); /* >= the buffer's 20: cut */
  assert_int_equal(strlen(buf), 19);
  assert_memory_equal(buf, want, 19);
  free(buf);
  free(want);
}

static void bad_arguments_are_refused(void **state) {
  (void)state;
  const ff_recipe *deit = ff_recipe_find("deit");
  char buf[64] = "untouched";
  size_t len = 99;
  assert_int_equal(ff_recipe_pipeline(deit, -1, buf, sizeof buf, &len), FF_EINVAL);
  assert_int_equal(ff_recipe_pipeline(deit, FF_MAX_NUM_CLASSES + 1, buf, sizeof buf, &len), FF_EINVAL); /* the parser's bound */
  assert_int_equal(ff_recipe_pipeline(NULL, 7, buf, sizeof buf, &len), FF_EINVAL);
  assert_int_equal(ff_recipe_pipeline(ff_recipe_find("nope"), 0, buf, sizeof buf, &len), FF_EINVAL);
  assert_int_equal(ff_recipe_pipeline(deit, 7, NULL, 8, &len), FF_EINVAL);
  assert_int_equal(ff_recipe_pipeline(ff_recipe_find("dino"), -1, buf, sizeof buf, &len), FF_EINVAL);
  assert_string_equal(buf, "untouched");
  assert_int_equal(len, 99);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_recipe_is_published_or_gets_its_num_classes),
      cmocka_unit_test(a_first_call_sizes_the_buffer_and_a_short_one_is_cut),
      cmocka_unit_test(bad_arguments_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
