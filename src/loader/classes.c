/* classes.c — what the loader tells about its source's classes: their
 * number and, for folder sources, their names (torchvision's
 * ImageFolder.classes), read from the index built at open. */
#include "loader/loader_internal.h"

size_t ff_loader_num_classes(const ff_loader *l) { return l->index.num_classes; }

const char *ff_loader_class_name(const ff_loader *l, size_t i) {
  return l->index.class_names && i < l->index.num_classes ? l->index.class_names[i] : NULL;
}
