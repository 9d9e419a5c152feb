/* batch_mem.c — where the ring's host image memory comes from: ordinary
 * memory, or pinned (page-locked) memory from a device's host allocator, so
 * that a trainer's `.cuda(non_blocking=True)` (a cudaMemcpyAsync) of a batch
 * is truly asynchronous instead of staging through a pageable bounce buffer
 * on the training thread.
 *
 * ff_config.pin_memory -1 (default) pins when the loader's device is a CUDA
 * GPU ("cuda:N", or "auto" when it opens one); 1 pins always, from the
 * loader's device's host allocator (emu:N's for tests; with device "cpu",
 * the CUDA device "auto" picks); 2 as 1 where such a device opens, else
 * ordinary memory (DataLoader's pin_memory=True); 0 never. With an output_device on a device
 * the images go up from pinned memory of that device unless pin_memory is 0.
 * Pinned memory belongs to a device
 * context, and batches outlive ff_loader_close while the consumer holds
 * them, so this module opens its own handle on the device (l->host_dev) and
 * closes it only after the last batch's memory is freed (loader_free). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/loader_internal.h"

ff_status ff__batch_mem_open(ff_loader *l) {
  const char *name = l->cfg.device, *out = l->cfg.output_device;
  int pin = l->cfg.pin_memory;
  if (pin < -1 || pin > 2)
    return ff__error_set(&l->err, FF_EINVAL, "pin_memory must be -1, 0, 1 or 2 (got %d)", pin);
  if (out && (!strncmp(out, "cuda", 4) || !strncmp(out, "emu", 3)) && pin)
    name = out, pin = 1; /* the uploads to the output device (other names: dev_output.c refuses them) */
  int cuda = !strncmp(name, "cuda", 4) || !strcmp(name, "auto");
  if (pin == 0 || (pin == -1 && !cuda)) return FF_OK;
  if (!strcmp(name, "cpu")) name = "auto";
  ff__error err = {0};
  ff_status st = ff__device_open(name, NULL, &l->host_dev, &err);
  ff__device_info info;
  if (!st && !ff__device_query(l->host_dev, &info, &err)) /* "cuda:0 (NVIDIA H200)": up to the space */
    snprintf(l->pinned_device, sizeof l->pinned_device, "%.*s", (int)strcspn(info.name, " "), info.name);
  l->stats.host_memory_pinned = !st;
  if (!st || pin != 1) return FF_OK; /* -1 and 2: pinned when it can be, ordinary memory otherwise */
  return ff__error_set(&l->err, st, "%s: %s", name == out ? "output_device" : "pin_memory", err.msg);
}

ff_status ff__batch_mem_alloc(ff_loader *l, size_t size_bytes, void **out) {
  if (!l->host_dev) {
    *out = malloc(size_bytes ? size_bytes : 1);
    return *out ? FF_OK : FF_ENOMEM;
  }
  ff__error err = {0};
  return ff__device_host_alloc(l->host_dev, size_bytes, out, &err);
}

void ff__batch_mem_free(ff_loader *l, void *ptr) {
  if (l->host_dev)
    ff__device_host_free(l->host_dev, ptr);
  else
    free(ptr);
}

void ff__batch_mem_close(ff_loader *l) {
  ff__device_close(l->host_dev);
  l->host_dev = NULL;
}
