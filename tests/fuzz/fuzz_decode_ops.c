/* fuzz_decode_ops.c — one sample end to end as a CPU worker runs it, from
 * memory: the input is pipeline text, a NUL byte, then the encoded image.
 * The pipeline goes through the loader's checks (parse, max_image_pixels
 * against the sizes it fixes), the image is probed and planned for a seed
 * drawn from the input, decoded, the steps run, and with a fixed output
 * size the result is written as one batch slot. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "ops/ops.h"
#include "pipeline/pipeline.h"

#define FUZZ_MAX_PIXELS (2048u * 2048u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ff__pipeline pipe; /* large: off the stack */
  static ff__plan plan;
  const uint8_t *nul = memchr(data, 0, size);
  if (!nul) return 0;
  const uint8_t *image = nul + 1;
  size_t image_size = size - (size_t)(image - data);
  ff__error err = {0};
  if (ff__pipeline_parse_any_size((const char *)data, &pipe, &err) != FF_OK) return 0;
  if (pipe.peak_pixels > FUZZ_MAX_PIXELS) return 0; /* the loader refuses it at open */
  ff__image_info info;
  if (ff__codec_probe(image, image_size, "fuzz", FUZZ_MAX_PIXELS, &info, &err) != FF_OK) return 0;
  uint64_t seed = 0;
  for (size_t i = 0; i < image_size && i < 8; i++)
    seed = seed << 8 | image[image_size - 1 - i];
  ff__plan_make(&pipe, seed, 0, image_size, &info, FUZZ_MAX_PIXELS, &plan);

  ff__buf pixels = {0};
  ff__op_scratch scratch = {0};
  ff__image img;
  ff_status st = ff__codec_decode(image, image_size, "fuzz", &plan.decode, &pixels, &img, &err);
  if (!st) st = ff__ops_run(&plan, &scratch, &img, &err);
  if (!st && pipe.out_width && img.width == pipe.out_width && img.height == pipe.out_height) {
    size_t elem = pipe.output == FF__OUTPUT_NCHW_F32 ? sizeof(float) : 1;
    void *slot = malloc((size_t)pipe.out_width * pipe.out_height * 3 * elem);
    if (slot) ff__op_write_output(&pipe, &img, slot, 0);
    free(slot);
  }
  ff__op_scratch_free(&scratch);
  ff__buf_free(&pixels);
  return 0;
}
