/* policy_file.c — reads a learned augmentation policy from JSON (jansson)
 * into the table the planner draws from: a list of sub-policies of
 * (op, probability, magnitude) as AutoAugment and Fast AutoAugment publish
 * them, or DeepAutoAugment's layers, each a probability table over
 * (op, magnitude) pairs. The format, and how the authors' released ImageNet
 * policies convert to it, is docs/policy-file.md. Every error names the
 * file, where in it, and what was expected. */
#include "pipeline/policy_file.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* torchvision's AutoAugment names and the single ops' names. */
static const struct {
  const char *tv, *ours;
  ff__aug_op op;
} names[] = {
    {"Identity", "identity", FF__AUG_IDENTITY},         {"ShearX", "shear_x", FF__AUG_SHEAR_X},
    {"ShearY", "shear_y", FF__AUG_SHEAR_Y},             {"TranslateX", "translate_x", FF__AUG_TRANSLATE_X},
    {"TranslateY", "translate_y", FF__AUG_TRANSLATE_Y}, {"Rotate", "rotate", FF__AUG_ROTATE},
    {"Brightness", "brightness", FF__AUG_BRIGHTNESS},   {"Color", "color", FF__AUG_COLOR},
    {"Contrast", "contrast", FF__AUG_CONTRAST},         {"Sharpness", "sharpness", FF__AUG_SHARPNESS},
    {"Posterize", "posterize", FF__AUG_POSTERIZE},      {"Solarize", "solarize", FF__AUG_SOLARIZE},
    {"AutoContrast", "autocontrast", FF__AUG_AUTOCONTRAST}, {"Equalize", "equalize", FF__AUG_EQUALIZE},
    {"Invert", "invert", FF__AUG_INVERT},               {"Hue", "hue", FF__AUG_HUE},
};

typedef struct reader {
  const char *path;
  char *why;
  size_t cap;
} reader;

static ff_status bad(const reader *r, const json_t *at, const char *fmt, const char *what) {
  char msg[768];
  snprintf(msg, sizeof msg, fmt, what);
  (void)at; /* jansson keeps no positions of loaded values: `what` says where (sub-policy 3, entry 1) */
  snprintf(r->why, r->cap, "%s: %s", r->path, msg);
  return FF_EPIPELINE;
}

static ff_status read_entry(const reader *r, const json_t *e, const char *where, int num_bins,
                            ff__policy_entry *out) {
  char what[640];
  if (!json_is_object(e)) return bad(r, e, "%s: expected an object {\"op\": ..., \"p\": ...}", where);
  const char *key;
  json_t *v;
  memset(out, 0, sizeof *out);
  out->bin = -1;
  int have_op = 0, have_p = 0;
  json_object_foreach((json_t *)e, key, v) {
    if (!strcmp(key, "op")) {
      const char *s = json_string_value(v);
      size_t k = 0;
      while (s && k < sizeof names / sizeof names[0] && strcmp(s, names[k].tv) && strcmp(s, names[k].ours)) k++;
      if (!s || k == sizeof names / sizeof names[0]) {
        snprintf(what, sizeof what, "%s: unknown op %s%s%s (AutoAugment's names: ShearX, ShearY, TranslateX, "
                 "TranslateY, Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast, "
                 "Equalize, Invert, Identity, Hue)", where, s ? "'" : "", s ? s : "(not a string)", s ? "'" : "");
        return bad(r, e, "%s", what);
      }
      out->op = names[k].op, have_op = 1;
    } else if (!strcmp(key, "p")) {
      double p = json_number_value(v);
      if (!json_is_number(v) || !(p >= 0 && p <= 1)) return bad(r, e, "%s: p must be a number in [0, 1]", where);
      out->p = (float)p, have_p = 1;
    } else if (!strcmp(key, "magnitude")) {
      if (json_is_null(v)) continue;
      json_int_t m = json_integer_value(v);
      if (!json_is_integer(v) || m < 0 || m >= num_bins) {
        snprintf(what, sizeof what, "%s: magnitude must be a bin in [0, %d] (num_magnitude_bins %d) or null", where,
                 num_bins - 1, num_bins);
        return bad(r, e, "%s", what);
      }
      out->bin = (int)m;
    } else if (!strcmp(key, "arg")) {
      if (!json_is_number(v) || !isfinite(json_number_value(v))) return bad(r, e, "%s: arg must be a number", where);
      out->arg = json_number_value(v), out->has_arg = 1;
    } else if (!strcmp(key, "random_sign") || !strcmp(key, "of_size")) {
      if (!json_is_boolean(v)) return bad(r, e, "%s: random_sign and of_size are true or false", where);
      *(!strcmp(key, "of_size") ? &out->of_size : &out->random_sign) = json_is_true(v);
    } else {
      snprintf(what, sizeof what, "%s: unknown key '%s' (keys: op, p, magnitude, arg, random_sign, of_size)", where,
               key);
      return bad(r, e, "%s", what);
    }
  }
  if (!have_op) return bad(r, e, "%s: the entry has no \"op\"", where);
  if (!have_p) return bad(r, e, "%s: the entry has no \"p\"", where);
  if (out->has_arg && out->bin >= 0) return bad(r, e, "%s: give magnitude or arg, not both", where);
  int factor = out->op >= FF__AUG_BRIGHTNESS && out->op <= FF__AUG_SHARPNESS;
  if (out->has_arg && ((factor && out->arg < 0) || (out->op == FF__AUG_POSTERIZE && (out->arg < 0 || out->arg > 8)) ||
                       (out->op == FF__AUG_HUE && fabs(out->arg) > 0.5)))
    return bad(r, e, "%s: arg out of the op's range (factors >= 0, posterize bits 0 to 8, hue within 0.5)", where);
  if (out->of_size && out->op != FF__AUG_TRANSLATE_X && out->op != FF__AUG_TRANSLATE_Y)
    return bad(r, e, "%s: of_size is for TranslateX and TranslateY", where);
  return FF_OK;
}

ff_status ff__policy_file_load(const char *path, ff__policy_table *t, char *why, size_t why_cap) {
  reader r = {path, why, why_cap};
  json_error_t jerr;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(why, why_cap, "%s: cannot open the policy file: %s", path, strerror(errno));
    return FF_EIO;
  }
  struct stat info;
  if (fstat(fileno(f), &info) || !S_ISREG(info.st_mode) || info.st_size > (16 << 20)) {
    fclose(f);
    snprintf(why, why_cap, "%s: not a regular file of at most 16 MiB", path);
    return FF_EIO;
  }
  json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
  fclose(f);
  if (!root) {
    snprintf(why, why_cap, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    return FF_EPIPELINE;
  }
  ff_status st = FF_OK;
  memset(t, 0, sizeof *t);
  t->num_magnitude_bins = 10;
  json_t *version = json_object_get(root, "fusionflow_policy");
  json_t *bins = json_object_get(root, "num_magnitude_bins");
  json_t *subs = json_object_get(root, "sub_policies"), *layers = json_object_get(root, "layers");
  const char *key;
  json_t *v;
  if (!json_is_object(root)) st = bad(&r, root, "%s", "expected a JSON object");
  else if (!json_is_integer(version) || json_integer_value(version) != 1)
    st = bad(&r, root, "%s", "expected \"fusionflow_policy\": 1 (the format's version)");
  else if (bins && (!json_is_integer(bins) || json_integer_value(bins) < 2 || json_integer_value(bins) > 1000))
    st = bad(&r, root, "%s", "num_magnitude_bins must be an integer in [2, 1000]");
  else if (!subs == !layers) st = bad(&r, root, "%s", "expected one of \"sub_policies\" and \"layers\"");
  json_object_foreach(json_is_object(root) ? root : NULL, key, v) {
    if (st) break;
    if (strcmp(key, "fusionflow_policy") && strcmp(key, "num_magnitude_bins") && strcmp(key, "sub_policies") &&
        strcmp(key, "layers") && strcmp(key, "comment"))
      st = bad(&r, root, "unknown key '%s' (keys: fusionflow_policy, num_magnitude_bins, sub_policies, layers, "
               "comment)", key);
  }
  if (!st && bins) t->num_magnitude_bins = (int)json_integer_value(bins);
  json_t *groups = subs ? subs : layers;
  t->layered = layers != NULL;
  const char *kind = t->layered ? "layer" : "sub-policy";
  if (!st && (!json_is_array(groups) || !json_array_size(groups) || json_array_size(groups) > FF__POLICY_MAX_GROUPS))
    st = bad(&r, groups, "%s", t->layered ? "layers must be a list of 1 to 128 layers"
                                          : "sub_policies must be a list of 1 to 128 sub-policies");
  size_t g;
  json_t *group;
  int n = 0;
  json_array_foreach(st ? NULL : groups, g, group) {
    char where[64];
    snprintf(where, sizeof where, "%s %zu", kind, g);
    size_t size = json_array_size(group);
    if (!json_is_array(group) || !size) {
      st = bad(&r, group, "%s: expected a non-empty list of ops", where);
      break;
    }
    if (!t->layered && size > FF__POLICY_MAX_GROUP_OPS) {
      st = bad(&r, group, "%s: at most 8 ops in a sub-policy", where);
      break;
    }
    if (n + (int)size > FF__POLICY_MAX_ENTRIES) {
      st = bad(&r, group, "%s: more than 1024 entries in the file", where);
      break;
    }
    t->start[g] = n;
    double total = 0;
    for (size_t k = 0; !st && k < size; k++) {
      char at[96];
      snprintf(at, sizeof at, "%s, entry %zu", where, k);
      st = read_entry(&r, json_array_get(group, k), at, t->num_magnitude_bins, &t->entries[n]);
      total += t->entries[n++].p;
    }
    if (st) break;
    if (t->layered) { /* a layer's probabilities are a distribution: normalised */
      if (!(total > 0)) {
        st = bad(&r, group, "%s: the probabilities are all 0", where);
        break;
      }
      for (int k = t->start[g]; k < n; k++) t->entries[k].p = (float)(t->entries[k].p / total);
    }
    t->num_groups = (int)g + 1;
    t->start[g + 1] = n;
  }
  json_decref(root);
  return st;
}
