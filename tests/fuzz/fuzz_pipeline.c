/* fuzz_pipeline.c — pipeline text through the parser (with and without a
 * fixed output size), then, when it parses, through the planner for a few
 * image shapes (tiny, ordinary, very wide). Bad text must give a
 * "pipeline column N" error; good text a plan of at most FF__PLAN_MAX_STEPS. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ff__pipeline pipe; /* large: off the stack */
  static ff__plan plan;
  static const ff__image_info shapes[] = {
      {FF__FORMAT_JPEG, 1, 1, 0}, {FF__FORMAT_PNG, 64, 48, 0}, {FF__FORMAT_JPEG, 4000, 3, 1}};
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  ff__error err = {0};
  ff__pipeline_parse(text, &pipe, &err);
  if (ff__pipeline_parse_any_size(text, &pipe, &err) == FF_OK)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      ff__plan_make(&pipe, 7, 1, i, &shapes[i], 1u << 24, &plan);
  free(text);
  return 0;
}
