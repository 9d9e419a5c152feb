/* batch_stage.c — what the Mixup/CutMix batch stage costs on a device batch
 * against the batch's preparation.
 *
 *   batch_stage DIR [DEVICE] [BATCH] [BATCHES]
 *
 * DIR an ImageFolder tree (e.g. make demo-data's), DEVICE emu:0 (default)
 * or cuda:N, BATCH 32, BATCHES 20. For mode=batch and mode=elem of DeiT's
 * settings (mixup_alpha 0.8, cutmix_alpha 1.0, label smoothing 0.1) on
 * BATCH images of 3 x 224 x 224 float32, it prints:
 *   - the stage alone on the idle device: the plan's upload and launch
 *     (ff__dev_mix) until the device is done, ms per batch, the mean of
 *     BATCHES batches' plans; and the CPU stage (ff__mix_apply_images) on
 *     the same batch in host memory;
 *   - the loader with device and output_device DEVICE (direct aggregation,
 *     2 threads) and `decode | random_resized_crop(224) | flip | normalize`,
 *     ms per batch over BATCHES batches with the stage and without it, and
 *     the stage alone as a share of the batch with it.
 * On emu the device is the emulator's one thread, whose launch loops over
 * the elements one call each: its figures are the emulator's, not a GPU's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "exec/dev_mix.h"
#include "exec/device.h"
#include "fusionflow/fusionflow.h"

#define SIDE 224
#define PIPE "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"

static void die(const char *what, const char *msg) {
  fprintf(stderr, "batch_stage: %s: %s\n", what, msg);
  exit(1);
}

/* ms per batch of the loader over `batches` batches after one. */
static double loader_ms(const char *source, const char *pipeline, const char *device, int batch, int batches) {
  ff_config c;
  ff_config_init(&c);
  c.source = source, c.pipeline = pipeline, c.batch_size = batch, c.num_threads = 2, c.seed = 1;
  c.rank = 0, c.world_size = 1, c.device = device, c.output_device = device, c.drop_last = 1;
  ff_loader *l = NULL;
  if (ff_loader_open(&c, &l)) die("ff_loader_open", ff_loader_errmsg(l));
  uint64_t t0 = 0;
  int done = -1;
  for (uint64_t epoch = 0; done < batches; epoch++) {
    ff_loader_set_epoch(l, epoch);
    ff_batch *b;
    ff_status st;
    while (done < batches && (st = ff_loader_next(l, &b)) != FF_END) {
      if (st) die("ff_loader_next", ff_loader_errmsg(l));
      ff_batch_sync(b);
      ff_batch_release(b);
      if (++done == 0) t0 = ff__now_ns(); /* after the first batch */
    }
  }
  double ms = (double)(ff__now_ns() - t0) / 1e6 / batches;
  ff_loader_close(l);
  return ms;
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage", "batch_stage DIR [DEVICE] [BATCH] [BATCHES]");
  char source[1100];
  snprintf(source, sizeof source, "imagefolder:%s", argv[1]);
  const char *device = argc > 2 ? argv[2] : "emu:0";
  int batch = argc > 3 ? atoi(argv[3]) : 32, batches = argc > 4 ? atoi(argv[4]) : 20;
  if (batch < 2 || batch % 2 || batches < 1) die("usage", "BATCH must be even and >= 2, BATCHES >= 1");
  size_t image = (size_t)3 * SIDE * SIDE, bytes = (size_t)batch * image * sizeof(float);
  ff__error err = {0};
  ff__device *d = NULL;
  ff__dstream *s = NULL;
  void *d_images = NULL, *d_table = NULL, *h_table = NULL;
  if (ff__device_open(device, NULL, &d, &err) || ff__device_stream_create(d, &s, &err) ||
      ff__device_alloc(d, bytes, &d_images, &err) || ff__device_alloc(d, ff__dev_mix_bytes(batch), &d_table, &err) ||
      ff__device_host_alloc(d, ff__dev_mix_bytes(batch), &h_table, &err))
    die(device, err.msg);
  float *host = malloc(bytes), *scratch = malloc(image * sizeof(float));
  if (!host || !scratch) die("malloc", "out of memory");
  for (size_t i = 0; i < bytes / sizeof(float); i++)
    host[i] = (float)(i % 977) * 0.01f - 4.0f;
  if (ff__device_upload(d, s, d_images, host, bytes, &err)) die(device, err.msg);
  ff__device_synchronize(d);
  static const char *modes[] = {"batch", "elem"};
  for (int m = 0; m < 2; m++) {
    ff__mix_params p = {.mixup_alpha = 0.8, .cutmix_alpha = 1.0, .prob = 1.0, .switch_prob = 0.5,
                        .mode = m ? FF__MIX_ELEM : FF__MIX_BATCH, .convention = FF__MIX_TIMM, .correct_lam = 1,
                        .label_smoothing = 0.1, .num_classes = 1000};
    ff__mix_plan plan;
    if (ff__mix_plan_alloc(&plan, batch, &err)) die("plan", err.msg);
    uint64_t dev_ns = 0, cpu_ns = 0;
    for (int r = 0; r < batches; r++) {
      ff__mix_plan_make(&p, 1, 0, (uint64_t)r, batch, SIDE, SIDE, &plan);
      uint64_t t0 = ff__now_ns();
      if (ff__dev_mix(d, s, &plan, SIDE, SIDE, h_table, d_table, d_images, &err)) die(device, err.msg);
      ff__device_synchronize(d);
      uint64_t t1 = ff__now_ns();
      ff__mix_apply_images(&plan, host, SIDE, SIDE, scratch);
      dev_ns += t1 - t0, cpu_ns += ff__now_ns() - t1;
    }
    ff__mix_plan_free(&plan);
    char pipeline[512];
    snprintf(pipeline, sizeof pipeline,
             "%s | mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, mode=%s, num_classes=1000)",
             PIPE, modes[m]);
    double stage = (double)dev_ns / 1e6 / batches, with = loader_ms(source, pipeline, device, batch, batches);
    double without = loader_ms(source, PIPE, device, batch, batches);
    printf("mode=%-5s %d x 3x%dx%d: stage on idle %s %.2f ms/batch (CPU stage %.2f ms); loader on %s %.1f ms/batch "
           "with the stage, %.1f without; the stage %.1f%% of the batch\n",
           modes[m], batch, SIDE, SIDE, device, stage, (double)cpu_ns / 1e6 / batches, device, with, without,
           100.0 * stage / with);
  }
  free(host), free(scratch);
  ff__device_free(d, d_images), ff__device_free(d, d_table), ff__device_host_free(d, h_table);
  ff__device_stream_destroy(d, s);
  ff__device_close(d);
  return 0;
}
