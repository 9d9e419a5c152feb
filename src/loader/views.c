/* views.c — the views of one sample (pipeline/views.h), on a CPU worker:
 * the file is read and decoded once, whole; each view is planned on the
 * decoded image with its own draws, its crop (the region a single-view
 * plan would decode) is copied out of the shared image, and its steps run
 * on the copy and write into the view's part of the batch. */
#include <string.h>

#include "core/clock.h"
#include "loader/loader_internal.h"

ff_status ff__views_run(const ff__views *v, ff__worker *w, ff__buf *region, const ff__sample_job *job,
                        void *images, const size_t *view_offset, int slot, ff__error *err) {
  size_t size_bytes;
  ff__plan plan;
  ff_status st = ff__sample_read(w, &v->pipes[0], job, &size_bytes, &plan, err);
  if (st) return st;
  uint64_t t0 = ff__now_ns();
  ff__decode_req req = plan.decode;
  req.crop_x = req.crop_y = req.crop_width = req.crop_height = 0, req.min_width = req.min_height = 0;
  ff__image full;
  st = ff__codec_decode(w->file.data, size_bytes, job->path, &req, &w->pixels, &full, err);
  w->decode_ns += ff__now_ns() - t0;
  if (st) return st;
  w->decoded_pixels = (uint64_t)full.width * (uint64_t)full.height;
  ff__image_info info = w->header;
  for (int k = 0; k < v->num_views; k++) {
    const ff__pipeline *pipe = &v->pipes[v->group_of[k]];
    uint64_t t1 = ff__now_ns();
    ff__plan_make(pipe, job->seed, job->epoch, ff__view_draw_index(job->index, job->repeat, k), &info,
                  job->max_pixels, &plan);
    if ((st = ff__plan_check(&plan, &info, job->max_pixels, job->path, err))) return st;
    const ff__decode_req *r = &plan.decode;
    int x = r->crop_width ? r->crop_x : 0, y = r->crop_width ? r->crop_y : 0;
    int cw = r->crop_width ? r->crop_width : full.width, ch = r->crop_width ? r->crop_height : full.height;
    uint8_t *dst = ff__buf_reserve(region, (size_t)cw * ch * 3);
    if (!dst)
      return ff__error_set(err, FF_ENOMEM, "%s: out of memory for a view of %dx%d", job->path, cw, ch);
    for (int row = 0; row < ch; row++)
      memcpy(dst + (size_t)row * cw * 3, full.data + (size_t)(y + row) * full.stride + (size_t)x * 3,
             (size_t)cw * 3);
    ff__image img = {dst, cw, ch, 3, (size_t)cw * 3};
    st = ff__ops_run(&plan, &w->ops, &img, err);
    if (!st && (img.width != pipe->out_width || img.height != pipe->out_height))
      st = ff__error_set(err, FF_EINTERNAL, "%s: view %d gave %dx%d instead of %dx%d", job->path, k,
                         img.width, img.height, pipe->out_width, pipe->out_height);
    if (!st) ff__op_write_output(pipe, &img, (char *)images + view_offset[k], slot);
    w->ops_ns += ff__now_ns() - t1;
    if (st) return st;
  }
  return FF_OK;
}
