/* dev_mix.c — see dev_mix.h. The table: one stage record per pair of
 * flipped images (timm: i and n-1-i, disjoint, so a thread reads both
 * elements and writes both) or one record for the whole rolled batch
 * (torchvision: a thread walks its element down the chain from the last
 * image, keeping the last one's original for image 0) — the CPU stage's
 * order of reads, without its scratch image — then the plan's images. */
#include "exec/dev_mix.h"

#include <string.h>

#include "kernels/stage.h"

#define ELEMS_OFF(n) (((size_t)((n) + 1) / 2 * sizeof(ff__dstage) + 255) / 256 * 256)

size_t ff__dev_mix_bytes(int n) { return ELEMS_OFF(n) + (size_t)n * sizeof(ff__mix_elem); }

ff_status ff__dev_mix(ff__device *dev, ff__dstream *s, const ff__mix_plan *plan, int h, int w, void *h_table,
                      void *d_table, void *d_images, ff__error *err) {
  int n = plan->n, records = plan->rolled ? 1 : (n + 1) / 2, any = 0;
  if (n < 1) return FF_OK;
  ff__dstage *st = h_table;
  uint64_t elems = (uint64_t)(uintptr_t)d_table + ELEMS_OFF(n);
  memcpy((char *)h_table + ELEMS_OFF(n), plan->elems, (size_t)n * sizeof *plan->elems);
  for (int r = 0; r < records; r++) {
    int skip = 1; /* every image the record writes stays as it is */
    for (int i = plan->rolled ? 0 : r; i < (plan->rolled ? n : r + 1); i++)
      skip &= plan->elems[i].kind == FF__MIX_NONE && plan->elems[n - 1 - i].kind == FF__MIX_NONE;
    any |= !skip;
    st[r] = (ff__dstage){.kind = skip ? FF__DS_NONE : FF__DS_BATCH_MIX,
                         .count = (uint32_t)(3 * h * w),
                         .dst = {(uint64_t)(uintptr_t)d_images, w, h, 0},
                         .a = elems};
    st[r].p.batch_mix.n = n, st[r].p.batch_mix.i = r, st[r].p.batch_mix.rolled = plan->rolled;
  }
  if (!any) return FF_OK; /* no empty launch */
  ff__device_range_push(dev, "fusionflow: mixup_cutmix");
  ff_status r = ff__device_upload(dev, s, d_table, h_table, ff__dev_mix_bytes(n), err);
  if (!r) r = ff__device_launch_stages(dev, s, d_table, records, FF__DS_BATCH_MIX, (uint32_t)(3 * h * w), err);
  ff__device_range_pop(dev);
  return r;
}
