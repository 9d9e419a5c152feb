/* config.c — ff_config: its defaults (ff_config_init) and the check of a
 * caller's config at open, which fills in what the environment decides
 * (WORLD_SIZE, RANK, FF_FORCE_DEVICE_SHARE) and the defaults of fields left
 * 0. Every range a user can get wrong is refused here with a message
 * naming the field, before anything is opened. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "loader/loader_internal.h"

void ff_config_init(ff_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->batch_size = 64;
  cfg->shuffle = 1;
  cfg->prefetch = 2;
  cfg->rank = -1;
  cfg->world_size = -1;
  cfg->max_image_pixels = 89478485;
  cfg->device = "cpu";
  cfg->device_headroom_bytes = -1;
  cfg->pin_memory = -1;
  cfg->output_device = "cpu";
  ff__sched_params p;
  ff__sched_params_init(&p, cfg->prefetch);
  cfg->device_max_time_share = p.max_device_time;
  cfg->max_jpeg_scans = 500;
  cfg->max_metadata_bytes = (size_t)16 << 20;
  cfg->shuffle_buffer = 1000;
  cfg->max_member_bytes = FF_MEMBER_BYTES_AUTO;
}

static ff_status env_int(const char *name, int fallback, int *out, ff__error *err) {
  const char *s = getenv(name);
  if (!s || !*s) return *out = fallback, FF_OK;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*end || errno || v < 0 || v > 1 << 20)
    return ff__error_set(err, FF_EINVAL, "environment variable %s='%s' is not a valid integer", name, s);
  *out = (int)v;
  return FF_OK;
}

ff_status ff__loader_check_config(ff_config *c, ff__error *err) {
  if (c->struct_size < offsetof(ff_config, max_image_pixels) + sizeof c->max_image_pixels)
    return ff__error_set(err, FF_EINVAL, "config.struct_size is %zu: call ff_config_init first", c->struct_size);
  if (!c->source && !c->source_callbacks)
    return ff__error_set(err, FF_EINVAL, "config.source (or config.source_callbacks) is required");
  if (!c->pipeline) return ff__error_set(err, FF_EINVAL, "config.pipeline is required");
  if (c->batch_size < 1) return ff__error_set(err, FF_EINVAL, "batch_size must be >= 1 (got %d)", c->batch_size);
  if (c->prefetch < 1) return ff__error_set(err, FF_EINVAL, "prefetch must be >= 1 (got %d)", c->prefetch);
  if (c->num_threads < 0) return ff__error_set(err, FF_EINVAL, "num_threads must be >= 0 (got %d)", c->num_threads);
  if (c->on_error != FF_ON_ERROR_RAISE && c->on_error != FF_ON_ERROR_SKIP && c->on_error != FF_ON_ERROR_REPLACE)
    return ff__error_set(err, FF_EINVAL, "on_error must be raise, skip or replace (got %d)", (int)c->on_error);
  if (c->max_jpeg_scans < 0)
    return ff__error_set(err, FF_EINVAL, "max_jpeg_scans must be >= 0 (got %d)", c->max_jpeg_scans);
  if (c->device_decode != FF_DEVICE_DECODE_AUTO && c->device_decode != FF_DEVICE_DECODE_OFF &&
      c->device_decode != FF_DEVICE_DECODE_ON)
    return ff__error_set(err, FF_EINVAL, "device_decode must be auto, off or on (got %d)", (int)c->device_decode);
  if (!c->device_alloc != !c->device_free)
    return ff__error_set(err, FF_EINVAL, "device_alloc and device_free go together: set both or neither");
  if (c->struct_size > offsetof(ff_config, repeated_augmentations) &&
      (c->repeated_augmentations < 0 || c->repeated_augmentations > 4096))
    return ff__error_set(err, FF_EINVAL, "repeated_augmentations must be in [0, 4096] (got %d)",
                         c->repeated_augmentations);
  if (c->repeated_augmentations && c->sampler_drop_last)
    return ff__error_set(err, FF_EINVAL, "repeated_augmentations takes num_selected_samples per rank "
                         "(RepeatAugSampler): sampler_drop_last does not apply");
  if (c->permutation != FF_PERMUTATION_PHILOX && c->permutation != FF_PERMUTATION_TORCH)
    return ff__error_set(err, FF_EINVAL, "permutation must be philox or torch (got %d)", (int)c->permutation);
  if (c->semantics != FF_SEMANTICS_V1 && c->semantics != FF_SEMANTICS_V2)
    return ff__error_set(err, FF_EINVAL, "semantics must be v1 or v2 (got %d)", (int)c->semantics);
  if (!c->device) c->device = "cpu";
  if (!c->output_device) c->output_device = "cpu";
  if (!(c->device_max_time_share > 0 && c->device_max_time_share <= 1))
    return ff__error_set(err, FF_EINVAL, "device_max_time_share must be in (0, 1] (got %g)",
                         c->device_max_time_share);
  if (c->device_headroom_bytes < -1)
    return ff__error_set(err, FF_EINVAL, "device_headroom_bytes must be >= 0 or -1 (got %lld)",
                         (long long)c->device_headroom_bytes);
  ff_status st;
  if (c->world_size < 0 && (st = env_int("WORLD_SIZE", 1, &c->world_size, err))) return st;
  if (c->rank < 0 && (st = env_int("RANK", 0, &c->rank, err))) return st;
  if (c->world_size < 1) return ff__error_set(err, FF_EINVAL, "world_size must be >= 1 (got %d)", c->world_size);
  if (c->rank >= c->world_size)
    return ff__error_set(err, FF_EINVAL, "rank must be in [0, world_size) (got rank %d, world_size %d)", c->rank,
                         c->world_size);
  if (!c->num_threads) c->num_threads = ff__cpu_cores();
  return FF_OK;
}

/* FF_FORCE_DEVICE_SHARE=x (0..1) fixes the share of every split (tests,
 * demonstrations); unset: the policy decides. */
ff_status ff__loader_env_share(double *out, ff__error *err) {
  const char *s = getenv("FF_FORCE_DEVICE_SHARE");
  *out = -1;
  if (!s || !*s) return FF_OK;
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= 0 && v <= 1))
    return ff__error_set(err, FF_EINVAL, "environment variable FF_FORCE_DEVICE_SHARE='%s' is not in [0, 1]", s);
  *out = v;
  return FF_OK;
}
