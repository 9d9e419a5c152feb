/* views.c — the views of one sample (pipeline/views.h), on a CPU worker:
 * the file is read and every view is planned on its header with its own
 * draws; the image is then decoded once, as the window that holds all the
 * views' crops (the whole image when a view does not start with a crop
 * inside it); each view's crop is copied out of that window at its
 * coordinates shifted by the window's corner, and its steps run on the copy
 * and write into the view's part of the batch. The window decode gives the
 * pixels a whole decode would (codec.h), so the views do not depend on it;
 * as with a single view's region, damage below the window goes unread. */
#include <string.h>

#include "core/clock.h"
#include "loader/loader_internal.h"

void ff__view_scratch_free(ff__view_scratch *s) {
  ff__buf_free(&s->plans);
  ff__buf_free(&s->crop);
}

ff_status ff__views_plan(const ff__views *v, const ff__sample_job *job, const ff__image_info *info, ff__plan *plans,
                         ff__decode_req *window, ff__error *err) {
  for (int k = 1; k < v->num_views; k++) {
    ff__plan_make(&v->pipes[v->group_of[k]], job->seed, job->epoch, ff__view_draw_index(job->index, job->repeat, k),
                  info, job->max_pixels, &plans[k]);
    ff_status st = ff__plan_check(&plans[k], info, job->max_pixels, job->path, err);
    if (st) return st;
  }
  *window = plans[0].decode;
  ff__views_window(plans, v->num_views, info, window);
  return FF_OK;
}

ff_status ff__views_run(const ff__views *v, ff__worker *w, ff__view_scratch *scratch,
                        const ff__sample_job *job, void *images, const size_t *view_offset, int slot,
                        ff__error *err) {
  ff__plan *plans = ff__buf_reserve(&scratch->plans, (size_t)v->num_views * sizeof *plans);
  if (!plans)
    return ff__error_set(err, FF_ENOMEM, "%s: out of memory planning %d views", job->path, v->num_views);
  size_t size_bytes;
  /* view 0 draws as the sample: its plan is the sample's */
  ff_status st = ff__sample_read(w, &v->pipes[v->group_of[0]], job, &size_bytes, &plans[0], err);
  if (st) return st;
  uint64_t t0 = ff__now_ns();
  ff__decode_req req;
  st = ff__views_plan(v, job, &w->header, plans, &req, err);
  w->read_ns += ff__now_ns() - t0;
  if (st) return st;

  t0 = ff__now_ns();
  uint64_t cpu0 = ff__thread_cpu_ns();
  req.min_width = req.min_height = 0;
  ff__image win;
  st = ff__codec_decode(w->file.data, size_bytes, job->path, &req, &w->pixels, &win, err);
  w->decode_ns += ff__now_ns() - t0;
  w->decode_cpu_ns += ff__thread_cpu_ns() - cpu0;
  if (st) return st;
  w->decoded_pixels = (uint64_t)win.width * (uint64_t)win.height;
  int win_x = req.crop_width ? req.crop_x : 0, win_y = req.crop_width ? req.crop_y : 0;
  for (int k = 0; k < v->num_views; k++) {
    const ff__pipeline *pipe = &v->pipes[v->group_of[k]];
    uint64_t t1 = ff__now_ns();
    const ff__decode_req *r = &plans[k].decode;
    int x = r->crop_width ? r->crop_x - win_x : 0, y = r->crop_width ? r->crop_y - win_y : 0;
    int cw = r->crop_width ? r->crop_width : win.width, ch = r->crop_width ? r->crop_height : win.height;
    uint8_t *dst = ff__buf_reserve(&scratch->crop, (size_t)cw * ch * 3);
    if (!dst)
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory for a view of %dx%d", job->path, cw, ch);
    for (int row = 0; row < ch; row++)
      memcpy(dst + (size_t)row * cw * 3, win.data + (size_t)(y + row) * win.stride + (size_t)x * 3,
             (size_t)cw * 3);
    ff__image img = {dst, cw, ch, 3, (size_t)cw * 3};
    st = ff__ops_run(&plans[k], &w->ops, &img, err);
    if (!st && (img.width != pipe->out_width || img.height != pipe->out_height))
      st = ff__error_set(err, FF_EINTERNAL, "%s: view %d gave %dx%d instead of %dx%d", job->path, k,
                         img.width, img.height, pipe->out_width, pipe->out_height);
    if (!st) ff__op_write_output(pipe, &img, (char *)images + view_offset[k], slot);
    w->ops_ns += ff__now_ns() - t1;
    if (st) return st;
  }
  return FF_OK;
}
