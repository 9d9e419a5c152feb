/* test_views.c — the window the views of a sample share (the bounding box
 * of their planned crops, or the whole image), and views decoded from that
 * window against each view's pipeline run alone (ff_image_augment with the
 * view's draws), for 4:2:0, 4:4:4 and gray JPEGs of odd sizes on 1 and 3
 * threads, and handed out on an output device (emu:0).
 * tests/python/test_views.py compares them with Pillow's whole decode as
 * well. */
#include <setjmp.h> /* cmocka.h needs these four first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "fusionflow/fusionflow.h"
#include "pipeline/views.h"

#define LOCAL "random_resized_crop(size=8, scale=(0.01, 0.06)) | random_horizontal_flip"
#define GLOBAL "random_resized_crop(size=16, scale=(0.3, 1))"
#define FIXED "crop(top=5, left=7, height=9, width=13)"

static ff__views views_ok(const char *text) {
  ff__views v;
  ff__error err = {0};
  if (ff__views_parse(text, &v, &err) != FF_OK) fail_msg("'%s' does not parse: %s", text, err.msg);
  return v;
}

/* The window of sample `index`'s views on a w x h JPEG, with the plans in plans[]. */
static ff__decode_req window_of(const ff__views *v, uint64_t index, int w, int h, ff__plan *plans) {
  ff__image_info info = {FF__FORMAT_JPEG, w, h, 0};
  for (int k = 0; k < v->num_views; k++)
    ff__plan_make(&v->pipes[v->group_of[k]], 3, 0, ff__view_draw_index(index, 0, k), &info, 0, &plans[k]);
  ff__decode_req req = {0};
  ff__views_window(plans, v->num_views, &info, &req);
  return req;
}

static void window_is_the_box_of_the_views_crops(void **state) {
  (void)state;
  ff__views v = views_ok("decode || 5 x " LOCAL " || " FIXED);
  ff__plan *plans = calloc((size_t)v.num_views, sizeof *plans);
  assert_non_null(plans);
  int smaller = 0;
  for (uint64_t index = 0; index < 20; index++) {
    ff__decode_req req = window_of(&v, index, 101, 77, plans);
    int x0 = 101, y0 = 77, x1 = 0, y1 = 0;
    for (int k = 0; k < v.num_views; k++) {
      const ff__decode_req *r = &plans[k].decode;
      assert_true(r->crop_width > 0); /* every view starts with a crop inside the image */
      x0 = r->crop_x < x0 ? r->crop_x : x0, y0 = r->crop_y < y0 ? r->crop_y : y0;
      x1 = r->crop_x + r->crop_width > x1 ? r->crop_x + r->crop_width : x1;
      y1 = r->crop_y + r->crop_height > y1 ? r->crop_y + r->crop_height : y1;
    }
    if (x0 == 0 && y0 == 0 && x1 == 101 && y1 == 77) {
      assert_int_equal(req.crop_width, 0);
      continue;
    }
    smaller++;
    assert_int_equal(req.crop_x, x0);
    assert_int_equal(req.crop_y, y0);
    assert_int_equal(req.crop_width, x1 - x0);
    assert_int_equal(req.crop_height, y1 - y0);
  }
  assert_true(smaller > 10); /* small crops: the window is mostly part of the image */
  free(plans);
  ff__views_free(&v);
}

static void a_view_without_a_leading_crop_needs_the_whole_image(void **state) {
  (void)state;
  static const char *texts[] = {
      "decode || 2 x " LOCAL " || resize(size=(20, 20))",               /* a resize first */
      "decode || " FIXED " || crop(top=-2, left=3, height=9, width=9)", /* a crop that pads */
      "decode || " FIXED " || crop(top=0, left=0, height=77, width=101)",
  };
  for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
    ff__views v = views_ok(texts[t]);
    ff__plan *plans = calloc((size_t)v.num_views, sizeof *plans);
    assert_non_null(plans);
    ff__decode_req req = window_of(&v, 4, 101, 77, plans);
    assert_int_equal(req.crop_width, 0);
    assert_int_equal(req.crop_height, 0);
    free(plans);
    ff__views_free(&v);
  }
}

/* Each view of every sample, from a loader with `threads` threads handing
 * batches out on output_device, equals ff_image_augment of its group's
 * pipeline with the view's draws. */
static void check_views_alone(const char *root, const char *const *paths, const char *text,
                              const char *const *view_ops, int num_views, int threads, const char *output_device) {
  char source[1100];
  snprintf(source, sizeof source, "imagefolder:%s", root);
  ff_config c;
  ff_config_init(&c);
  c.source = source, c.pipeline = text, c.batch_size = 3, c.seed = 5, c.num_threads = threads;
  c.rank = 0, c.world_size = 1;
  c.output_device = output_device;
  ff_loader *l = NULL;
  ff_status st = ff_loader_open(&c, &l);
  if (st) fail_msg("ff_loader_open: %s", ff_loader_errmsg(l));
  assert_int_equal((int)ff_loader_num_views(l), num_views);
  ff_batch *b;
  int seen = 0;
  while ((st = ff_loader_next(l, &b)) == FF_OK) {
    const int64_t *indices = ff_batch_sample_indices(b);
    assert_string_equal(ff_batch_device(b), output_device);
    assert_int_equal(ff_batch_sync(b), FF_OK); /* emu:N memory is host memory: read once it is up */
    ff_batch_info info;
    ff_batch_stats(b, &info);
    assert_int_equal(info.output_uploads, strcmp(output_device, "cpu") ? num_views : 0); /* a copy per view */
    for (size_t s = 0; s < ff_batch_size(b); s++, seen++)
      for (int k = 0; k < num_views; k++) {
        ff_tensor t;
        assert_int_equal(ff_batch_view_images(b, (size_t)k, &t), FF_OK);
        char pipe[256], errbuf[256];
        snprintf(pipe, sizeof pipe, "decode(dct_scale=false) | %s", view_ops[k]);
        uint8_t *alone = NULL;
        int h = 0, w = 0;
        uint64_t index = (uint64_t)indices[s] + ((uint64_t)k << 52);
        st = ff_image_augment(paths[indices[s]], pipe, 5, 0, index, &alone, &h, &w, errbuf, sizeof errbuf);
        if (st) fail_msg("ff_image_augment: %s", errbuf);
        assert_int_equal(h, t.shape[1]);
        assert_int_equal(w, t.shape[2]);
        size_t n = (size_t)h * (size_t)w * 3;
        if (memcmp((const uint8_t *)t.data + s * n, alone, n))
          fail_msg("%s: view %d differs from its pipeline alone (%d threads)", paths[indices[s]], k, threads);
        ff_free(alone);
      }
    ff_batch_release(b);
  }
  if (st != FF_END) fail_msg("ff_loader_next: %s", ff_loader_errmsg(l));
  assert_int_equal(seen, 6);
  ff_loader_close(l);
}

static void views_from_the_window_equal_each_view_alone(void **state) {
  (void)state;
  const char *dir = ff_test_dir("views-window");
  char root[1024], class_dir[1100];
  snprintf(root, sizeof root, "%s", dir);
  snprintf(class_dir, sizeof class_dir, "%s/c0", root);
  ff_test_mkdir(class_dir);
  static const ff_test_jpeg_kind kinds[] = {{0, 2, 2, 0}, {0, 1, 1, 0}, {1, 0, 0, 0}};
  static const int sizes[2][2] = {{61, 47}, {37, 53}};
  static char names[6][1200];
  const char *paths[6];
  for (int i = 0; i < 6; i++) { /* sorted names: sample i is file i */
    snprintf(names[i], sizeof names[i], "%s/img%d.jpg", class_dir, i);
    ff_test_write_jpeg_as(names[i], sizes[i / 3][0], sizes[i / 3][1], 90, &kinds[i % 3], (unsigned)i + 1);
    paths[i] = names[i];
  }
  const char *random_ops[] = {GLOBAL, GLOBAL, LOCAL, LOCAL, LOCAL};
  const char *fixed_ops[] = {FIXED, "crop(top=0, left=0, height=1, width=5)",
                             "crop(top=30, left=24, height=17, width=13)"};
  for (int threads = 1; threads <= 3; threads += 2) {
    check_views_alone(root, paths, "decode || 2 x " GLOBAL " || 3 x " LOCAL, random_ops, 5, threads, "cpu");
    check_views_alone(root, paths,
                      "decode || " FIXED " || crop(top=0, left=0, height=1, width=5) || "
                      "crop(top=30, left=24, height=17, width=13)",
                      fixed_ops, 3, threads, "cpu");
  }
  /* on an output device: each view's tensor goes up in one copy, the same bytes */
  check_views_alone(root, paths, "decode || 2 x " GLOBAL " || 3 x " LOCAL, random_ops, 5, 2, "emu:0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(window_is_the_box_of_the_views_crops),
      cmocka_unit_test(a_view_without_a_leading_crop_needs_the_whole_image),
      cmocka_unit_test(views_from_the_window_equal_each_view_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
