/* views.c — parsing multi-view pipeline text (views.h): the text is cut at
 * each top-level `||` (outside parentheses), the head must be the shared
 * decode, and each group (`N x OPS` or `OPS`) becomes its own pipeline,
 * `decode(dct_scale=false) | OPS`, parsed by parse.c; its errors are moved
 * back to the columns of the original text. The window the views share is
 * the bounding box of their planned crops. */
#include "pipeline/views.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VIEW_HEAD "decode(dct_scale=false) | "

void ff__views_free(ff__views *v) {
  free(v->pipes);
  memset(v, 0, sizeof *v);
}

/* The group's parse error at the original text's column: the group text
 * starts at `start` in it, after the VIEW_HEAD we put in front. */
static ff_status moved_error(ff__error *err, size_t start, int group) {
  int col = 0, used = 0;
  char reason[FF__ERRMSG_MAX];
  if (sscanf(err->msg, "pipeline column %d: %n", &col, &used) == 1 && used > 0) {
    snprintf(reason, sizeof reason, "%s", err->msg + used);
    col = col - (int)strlen(VIEW_HEAD) + (int)start;
    if (col < (int)start + 1) col = (int)start + 1;
    return ff__error_set(err, FF_EPIPELINE, "pipeline column %d: view group %d: %s", col, group + 1, reason);
  }
  snprintf(reason, sizeof reason, "%s", err->msg);
  return ff__error_set(err, err->status, "view group %d: %s", group + 1, reason);
}

ff_status ff__views_parse(const char *text, ff__views *out, ff__error *err) {
  memset(out, 0, sizeof *out);
  size_t cuts[FF__VIEW_GROUPS_MAX + 1], ncuts = 0, len = strlen(text);
  int depth = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (text[i] == '(' || text[i] == '[')
      depth++;
    else if (text[i] == ')' || text[i] == ']')
      depth--;
    else if (!depth && text[i] == '|' && text[i + 1] == '|') {
      if (ncuts == FF__VIEW_GROUPS_MAX)
        return ff__error_set(err, FF_EPIPELINE, "pipeline column %zu: at most %d view groups", i + 1,
                             FF__VIEW_GROUPS_MAX);
      cuts[ncuts++] = i++;
    }
  }
  if (!ncuts) return FF_OK;
  /* the head: decode, alone */
  char head[64];
  size_t h0 = strspn(text, " \t\n"), hlen = cuts[0] - h0;
  while (hlen && isspace((unsigned char)text[h0 + hlen - 1]))
    hlen--;
  if (hlen < sizeof head) memcpy(head, text + h0, hlen);
  head[hlen < sizeof head ? hlen : 0] = 0;
  if (strcmp(head, "decode") && strcmp(head, "decode()") && strcmp(head, "decode(dct_scale=false)"))
    return ff__error_set(
        err, FF_EPIPELINE,
        "pipeline column %zu: expected 'decode' alone before the first '||' "
        "(the views share one decode of the image; each view's ops come after its '||')",
        h0 + 1);
  out->pipes = calloc(ncuts, sizeof *out->pipes);
  if (!out->pipes) return ff__error_set(err, FF_ENOMEM, "out of memory parsing the views");
  cuts[ncuts] = len;
  for (size_t g = 0; g < ncuts; g++) {
    size_t start = cuts[g] + 2, end = g + 1 < ncuts ? cuts[g + 1] : len;
    while (start < end && isspace((unsigned char)text[start]))
      start++;
    int count = 1;
    size_t digits = 0;
    while (start + digits < end && isdigit((unsigned char)text[start + digits]))
      digits++;
    if (digits) {
      size_t k = start + digits;
      while (k < end && isspace((unsigned char)text[k]))
        k++;
      if (k < end && text[k] == 'x' && k + 1 < end && isspace((unsigned char)text[k + 1])) {
        count = atoi(text + start);
        start = k + 1;
      }
    }
    if (count < 1 || out->num_views + count > FF__VIEWS_MAX) {
      ff__views_free(out);
      return ff__error_set(err, FF_EPIPELINE, "pipeline column %zu: between 1 and %d views in all", start + 1,
                           FF__VIEWS_MAX);
    }
    size_t n = end - start;
    char *group = malloc(strlen(VIEW_HEAD) + n + 1);
    if (!group) {
      ff__views_free(out);
      return ff__error_set(err, FF_ENOMEM, "out of memory parsing the views");
    }
    memcpy(group, VIEW_HEAD, strlen(VIEW_HEAD));
    memcpy(group + strlen(VIEW_HEAD), text + start, n);
    group[strlen(VIEW_HEAD) + n] = 0;
    ff_status st = ff__pipeline_parse(group, &out->pipes[g], err);
    free(group);
    if (!st && out->pipes[g].has_mix)
      st = ff__error_set(err, FF_EPIPELINE,
                         "pipeline column %zu: mixup_cutmix mixes one image per sample: it "
                         "does not take views",
                         start + 1);
    else if (st)
      st = moved_error(err, start, (int)g);
    if (st) {
      ff__views_free(out);
      return st;
    }
    for (int k = 0; k < count; k++)
      out->group_of[out->num_views++] = (int)g;
    out->count[g] = count;
    out->num_groups = (int)g + 1;
  }
  return FF_OK;
}

void ff__views_window(const ff__plan *plans, int num_views, const ff__image_info *info, ff__decode_req *req) {
  int x0 = info->width, y0 = info->height, x1 = 0, y1 = 0;
  for (int k = 0; k < num_views; k++) {
    const ff__decode_req *r = &plans[k].decode;
    if (!r->crop_width) { /* this view needs the whole image */
      x0 = y0 = 0, x1 = info->width, y1 = info->height;
      break;
    }
    if (r->crop_x < x0) x0 = r->crop_x;
    if (r->crop_y < y0) y0 = r->crop_y;
    if (r->crop_x + r->crop_width > x1) x1 = r->crop_x + r->crop_width;
    if (r->crop_y + r->crop_height > y1) y1 = r->crop_y + r->crop_height;
  }
  int whole = x0 == 0 && y0 == 0 && x1 == info->width && y1 == info->height;
  req->crop_x = whole ? 0 : x0, req->crop_y = whole ? 0 : y0;
  req->crop_width = whole ? 0 : x1 - x0, req->crop_height = whole ? 0 : y1 - y0;
}
