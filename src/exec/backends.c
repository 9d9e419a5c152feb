/* backends.c — opening a device by name: the table of backends by kind
 * (`emu:N` the emulator in exec/emu.c, `cuda:N` exec/cuda.cu when the
 * library was built with CUDA, FF_HAVE_CUDA), and `auto`, the CUDA device a
 * trainer on this thread would use. The opened backend goes to
 * ff__device_wrap (exec/device.c), which knows no backend; the backends
 * know only exec/device_impl.h. */
#include <stdlib.h>
#include <string.h>

#include "exec/device.h"
#include "exec/device_impl.h"

typedef ff_status (*open_fn)(const char *name, int ordinal, const char *query, const ff__device_options *opt,
                             ff__device_opened *o, ff__error *err);

static ff_status open_emu(const char *name, int ordinal, const char *query, const ff__device_options *opt,
                          ff__device_opened *o, ff__error *err) {
  (void)name;
  return ff__emu_open(ordinal, query, opt, o, err);
}

static ff_status open_cuda(const char *name, int ordinal, const char *query, const ff__device_options *opt,
                           ff__device_opened *o, ff__error *err) {
#ifdef FF_HAVE_CUDA
  return *query ? ff__error_set(err, FF_EINVAL, "device '%s': cuda takes no options", name)
                : ff__cuda_open(ordinal, opt, o, err);
#else
  (void)name, (void)query, (void)opt, (void)o;
  return ff__error_set(err, FF_EDEVICE, "cuda:%d: fusionflow was built without CUDA; use emu:0 or cpu", ordinal);
#endif
}

static const struct {
  const char *kind;
  open_fn open;
} backends[] = {{"emu", open_emu}, {"cuda", open_cuda}};

ff__device_kind ff__device_name_kind(const char *name) {
  if (!name || !*name) return FF__DEVICE_KIND_NONE;
  if (!strcmp(name, "cpu")) return FF__DEVICE_KIND_CPU;
  if (!strcmp(name, "auto")) return FF__DEVICE_KIND_AUTO;
  size_t kind_len;
  int ordinal;
  const char *query;
  if (!ff__device_parse_name(name, &kind_len, &ordinal, &query)) return FF__DEVICE_KIND_NONE;
  if (kind_len == 4 && !strncmp(name, "cuda", 4)) return FF__DEVICE_KIND_CUDA;
  if (kind_len == 3 && !strncmp(name, "emu", 3)) return FF__DEVICE_KIND_EMU;
  return FF__DEVICE_KIND_NONE;
}

int ff__device_name_ordinal(const char *name) {
  ff__device_kind kind = ff__device_name_kind(name);
  if (kind != FF__DEVICE_KIND_CUDA && kind != FF__DEVICE_KIND_EMU) return -1;
  size_t kind_len;
  int ordinal;
  const char *query;
  return ff__device_parse_name(name, &kind_len, &ordinal, &query) ? ordinal : -1;
}

int ff__device_auto_pick(int current, const char *local_rank, int count) {
  if (count <= 0) return 0;
  if (current >= 0 && current < count) return current;
  char *stop;
  long rank = local_rank ? strtol(local_rank, &stop, 10) : 0;
  if (!local_rank || stop == local_rank || *stop || rank < 0) rank = 0;
  return (int)(rank % count);
}

int ff__device_cuda_gpus(ff__error *err) {
#ifdef FF_HAVE_CUDA
  int count = 0, current = -1;
  return ff__cuda_probe(&count, &current, err) ? 0 : count;
#else
  ff__error_set(err, FF_EDEVICE, "built without CUDA");
  return -1;
#endif
}

static ff_status open_backend(const char *name, const ff__device_options *opt, ff__device_opened *o,
                              ff__error *err) {
  if (!strcmp(name, "auto")) {
#ifdef FF_HAVE_CUDA
    int count = 0, current = -1;
    ff_status st = ff__cuda_probe(&count, &current, err);
    return st ? st : ff__cuda_open(ff__device_auto_pick(current, getenv("LOCAL_RANK"), count), opt, o, err);
#else
    (void)opt, (void)o;
    return ff__error_set(err, FF_EDEVICE, "auto: fusionflow was built without CUDA; use emu:0 or cpu");
#endif
  }
  size_t kind_len;
  int ordinal;
  const char *query;
  if (!ff__device_parse_name(name, &kind_len, &ordinal, &query))
    return ff__error_set(err, FF_EINVAL, "device '%s': expected cuda:N or emu:N", name);
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
    if (strlen(backends[i].kind) == kind_len && !strncmp(name, backends[i].kind, kind_len))
      return backends[i].open(name, ordinal, query, opt, o, err);
  return ff__error_set(err, FF_EINVAL, "device '%s': unknown kind (cpu, auto, cuda:N, emu:N)", name);
}

ff_status ff__device_open(const char *name, const ff__device_options *opt, ff__device **out, ff__error *err) {
  ff__device_options defaults;
  ff__device_options_init(&defaults);
  if (!opt) opt = &defaults;
  if (!name || !out) return ff__error_set(err, FF_EINVAL, "device: no name");
  ff__device_opened o = {0};
  ff_status st = open_backend(name, opt, &o, err);
  return st ? st : ff__device_wrap(&o, opt, out, err);
}
