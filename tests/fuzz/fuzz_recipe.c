/* fuzz_recipe.c — recipe text, as a preset holds it: a pipeline with views
 * ("decode || 2 x random_resized_crop(...) | ... || ...") and a batch stage,
 * through ff_recipe_check (the views parser, then the pipeline parser) and
 * ff_recipe_pipeline (num_classes written into mixup_cutmix), the first
 * byte choosing num_classes and the output buffer's size. Any text must
 * give FF_OK or a clear error; the rewritten text must obey snprintf's
 * rule; nothing may crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fusionflow/fusionflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int classes[] = {0, 1, 10, 1000, FF_MAX_NUM_CLASSES, FF_MAX_NUM_CLASSES + 1, -1, 100000};
  if (size < 1) return 0;
  int num_classes = classes[data[0] % 8];
  size_t cap = (size_t)(data[0] >> 3) * 8; /* 0 .. 248 bytes: too small as often as not */
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  ff_recipe r = {"fuzz", "", text, 0, ""};
  char why[4608];
  ff_recipe_check(&r, why, sizeof why);
  char *buf = malloc(cap ? cap : 1);
  size_t len = 0;
  if (buf && ff_recipe_pipeline(&r, num_classes, cap ? buf : NULL, cap, &len) == FF_OK && cap &&
      strlen(buf) != (len < cap ? len : cap - 1))
    abort();
  free(buf);
  free(text);
  return 0;
}
