/* recipe.c — training-recipe presets (ff_recipe_find): each names the
 * published recipe it follows and expands to a pipeline (views and the
 * batch stage included) plus the sampler setting. A recipe whose pipeline
 * needs ops this build lacks says so, naming them (ff_recipe_check): the
 * table keeps the recipe as published rather than a stand-in with other
 * ops, and it runs as soon as the build has them. Each decodes exactly
 * (dct_scale=false, written out: the published recipes decode in full; the
 * views' decode always is). The mixing recipes'
 * num_classes=1000 is ImageNet's; ff_recipe_pipeline sets it for another
 * data set, for the CLI (--num-classes) and the Python package alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusionflow/fusionflow.h"
#include "pipeline/pipeline.h"
#include "pipeline/views.h"

#define NORM "normalize(mean=imagenet, std=imagenet)"
/* timm's create_transform hparams for 224 crops with ImageNet's mean:
 * translate_const = int(224 * 0.45), img_mean = round(255 * mean). */
#define TIMM_AA_224 "img_mean=(124, 116, 104), translate_const=100"
/* DINO transforms PIL images: its jitter, grayscale, blur (ImageFilter.GaussianBlur with
 * random.uniform(0.1, 2) as the radius) and solarize in Pillow's arithmetic. */
#define DINO_JITTER                                                                                          \
  "random_horizontal_flip | random_apply(p=0.8, [color_jitter(brightness=0.4, contrast=0.4, saturation=0.2, " \
  "hue=0.1, semantics=pil)]) | random_grayscale(p=0.2, semantics=pil)"
#define DINO_BLUR "gaussian_blur(sigma=(0.1, 2.0), semantics=pil)"

static const ff_recipe recipes[] = {
    {"deit",
     "DeiT (Touvron et al., ICML 2021), facebookresearch/deit main.py defaults: timm's create_transform(224, "
     "is_training, auto_augment=rand-m9-mstd0.5-inc1, interpolation=bicubic, re_prob=0.25, re_mode=pixel, "
     "re_count=1; colour jitter off, as timm disables it with RandAugment; RandAugment hparams "
     "translate_const=100, img_mean=(124, 116, 104)), Mixup 0.8 / CutMix 1.0, prob 1, switch 0.5, batch mode, "
     "label smoothing 0.1, RASampler with 3 repeats. The crop's bicubic is torchvision's tensor bicubic, "
     "where timm resizes with Pillow's (RandAugment is Pillow's arithmetic, as timm's)",
     "decode(dct_scale=false) | random_resized_crop(size=224, interpolation=bicubic) | random_horizontal_flip"
     " | timm_rand_augment(config=\"rand-m9-mstd0.5-inc1\", interpolation=bicubic, " TIMM_AA_224 ") | " NORM
     " | random_erasing(p=0.25, mode=pixel, max_count=1)"
     " | mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, mode=batch, "
     "label_smoothing=0.1, num_classes=1000)",
     3, "timm_rand_augment, random_erasing, bicubic interpolation, mixup_cutmix"},
    {"torchvision-v2",
     "torchvision's reference classification recipe (references/classification, \"How to train "
     "state-of-the-art models using TorchVision's latest primitives\", ResNet-50): train crop 176 bilinear, "
     "TrivialAugmentWide, random erasing 0.1, MixUp 0.2 / CutMix 1.0 (RandomChoice; label smoothing 0.1 in "
     "the loss), RASampler with 4 repeats (--ra-reps 4)",
     "decode(dct_scale=false) | random_resized_crop(size=176) | random_horizontal_flip | "
     "trivial_augment_wide(interpolation=bilinear)"
     " | " NORM " | random_erasing(p=0.1)"
     " | mixup_cutmix(mixup_alpha=0.2, cutmix_alpha=1.0, switch_prob=0.5, convention=torchvision, "
     "num_classes=1000)",
     4, "random_erasing, mixup_cutmix"},
    {"dino",
     "DINO (Caron et al., ICCV 2021), main_dino.py DataAugmentationDINO: 2 global crops 224 (scale 0.4-1, "
     "bicubic; blur p=1, and blur p=0.1 + solarize p=0.2) and 8 local crops 96 (scale 0.05-0.4, bicubic, blur "
     "p=0.5), each flip + ColorJitter(0.4, 0.4, 0.2, 0.1) p=0.8 + grayscale p=0.2, ImageNet normalisation. "
     "DINO jitters, grays, blurs (ImageFilter.GaussianBlur, radius uniform in (0.1, 2)) and solarizes PIL "
     "images: these are Pillow's arithmetic here (semantics=pil), exact; the crop's bicubic is torchvision's "
     "tensor bicubic, where DINO resizes with Pillow's",
     "decode"
     " || random_resized_crop(size=224, scale=(0.4, 1), interpolation=bicubic) | " DINO_JITTER " | " DINO_BLUR
     " | " NORM
     " || random_resized_crop(size=224, scale=(0.4, 1), interpolation=bicubic) | " DINO_JITTER
     " | random_apply(p=0.1, [" DINO_BLUR "]) | random_solarize(threshold=128, p=0.2, semantics=pil) | " NORM
     " || 8 x random_resized_crop(size=96, scale=(0.05, 0.4), interpolation=bicubic) | " DINO_JITTER
     " | random_apply(p=0.5, [" DINO_BLUR "]) | " NORM,
     0,
     "random_apply, color_jitter, random_grayscale, gaussian_blur, random_solarize, bicubic interpolation"},
    {"simclr",
     "SimCLR (Chen et al., ICML 2020), appendix A: 2 views of random crop 224 (scale 0.08-1) + flip, colour "
     "distortion s=1 (jitter 0.8/0.8/0.8/0.2 with p=0.8, grayscale p=0.2), Gaussian blur p=0.5 with kernel "
     "23 (10% of the side, reflect padding) and sigma in (0.1, 2); pixels in [0, 1] without mean/std, as "
     "SimCLR feeds them. The jitter is torchvision's ColorJitter (multiplicative brightness, as the PyTorch "
     "ports), where SimCLR's TensorFlow code adds a brightness delta",
     "decode"
     " || 2 x random_resized_crop(size=224) | random_horizontal_flip"
     " | random_apply(p=0.8, [color_jitter(brightness=0.8, contrast=0.8, saturation=0.8, hue=0.2)])"
     " | random_grayscale(p=0.2) | random_apply(p=0.5, [gaussian_blur(kernel_size=23, sigma=(0.1, 2.0))])"
     " | to_dtype(dtype=float32)",
     0, "random_apply, color_jitter, random_grayscale, gaussian_blur"},
    {"resnet-strikes-back-a1",
     "ResNet strikes back, procedure A1 (Wightman et al., 2021; timm train.py with its A1 arguments): 224 "
     "crops with random interpolation (timm's train default), RandAugment rand-m7-mstd0.5-inc1 (random "
     "interpolation; translate_const=100, img_mean=(124, 116, 104)), no random erasing, Mixup 0.2 / CutMix "
     "1.0, switch 0.5, without label smoothing (BCE loss; its target threshold 0.2 belongs to the loss), 3 "
     "repeated augmentations. The crop's bicubic is torchvision's tensor bicubic, where timm resizes with "
     "Pillow's",
     "decode(dct_scale=false) | random_resized_crop(size=224, interpolation=random) | random_horizontal_flip"
     " | timm_rand_augment(config=\"rand-m7-mstd0.5-inc1\", " TIMM_AA_224 ") | " NORM
     " | mixup_cutmix(mixup_alpha=0.2, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, mode=batch, "
     "label_smoothing=0.0, num_classes=1000)",
     3, "timm_rand_augment, random interpolation, mixup_cutmix"},
};
#define NUM_RECIPES (sizeof recipes / sizeof recipes[0])

const ff_recipe *ff_recipe_at(size_t i) { return i < NUM_RECIPES ? &recipes[i] : NULL; }

const ff_recipe *ff_recipe_find(const char *name) {
  for (size_t i = 0; name && i < NUM_RECIPES; i++)
    if (!strcmp(recipes[i].name, name)) return &recipes[i];
  return NULL;
}

ff_status ff_recipe_check(const ff_recipe *r, char *errbuf, size_t errbuf_size) {
  if (!r) {
    if (errbuf && errbuf_size) snprintf(errbuf, errbuf_size, "no such recipe");
    return FF_EINVAL;
  }
  ff__error err = {0};
  ff__views views;
  ff_status st = ff__views_parse(r->pipeline, &views, &err);
  if (!st && !views.num_groups) {
    ff__pipeline *p = malloc(sizeof *p);
    st = p ? ff__pipeline_parse(r->pipeline, p, &err) : ff__error_set(&err, FF_ENOMEM, "out of memory");
    free(p);
  }
  ff__views_free(&views);
  if (st && errbuf && errbuf_size)
    snprintf(errbuf, errbuf_size, "recipe %s needs ops this build does not have (%s): %s", r->name, r->needs,
             err.msg);
  return st;
}

ff_status ff_recipe_pipeline(const ff_recipe *r, int num_classes, char *buf, size_t buf_size,
                             size_t *len_out) {
  static const char published[] = "num_classes=1000";
  if (!r || (!buf && buf_size) || num_classes < 0 || num_classes > FF_MAX_NUM_CLASSES) return FF_EINVAL;
  const char *at = strstr(r->pipeline, published);
  if (num_classes && !at) return FF_EPIPELINE;
  int n = num_classes ? snprintf(buf, buf_size, "%.*snum_classes=%d%s", (int)(at - r->pipeline), r->pipeline,
                                 num_classes, at + strlen(published))
                      : snprintf(buf, buf_size, "%s", r->pipeline);
  if (n < 0) return FF_EINTERNAL;
  if (len_out) *len_out = (size_t)n;
  return FF_OK;
}
