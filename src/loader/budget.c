/* budget.c — the trainer's cap on the device memory the offload device's
 * budget may count as free (ff_loader_set_device_free_bytes): never more
 * than the device has free (what a framework caches unused is the
 * framework's), the pool's limit follows it at once (exec/pool.h: cached
 * blocks go back and the device is trimmed when it shrinks), and the
 * offload runtime's admission sees the new figure at the next split. */
#include "loader/loader_internal.h"

ff_status ff_loader_set_device_free_bytes(ff_loader *l, int64_t free_bytes) {
  ff__device *dev = ff__offload_device(l ? l->offload : NULL);
  if (!dev) return FF_OK;
  ff__error err = {0};
  ff_status st = ff__device_set_free(dev, free_bytes, &err);
  if (st) return ff__error_set(&l->err, st, "%s", err.msg);
  size_t limit = 0, peak = 0;
  ff__offload_refresh(l->offload, &limit, &peak);
  pthread_mutex_lock(&l->mu);
  l->stats.device_pool_limit_bytes = limit, l->stats.device_pool_peak_bytes = peak;
  pthread_mutex_unlock(&l->mu);
  return FF_OK;
}
