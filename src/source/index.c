/* index.c — freeing a sample index and locating a sample's bytes in it. */
#include "source/index.h"

#include <stdlib.h>

#include "source/reader.h"
#include "source/strlist.h"

void ff__index_free(ff__index *index) {
  if (!index) return;
  ff__reader_destroy(index->reader);
  if (index->names_block && index->paths) free(index->paths[0]), index->count = 0;
  ff__strlist paths = {index->paths, index->count, index->count};
  ff__strlist classes = {index->class_names, index->class_names ? index->num_classes : 0, 0};
  ff__strlist_free(&paths);
  ff__strlist_free(&classes);
  free(index->size_bytes);
  free(index->labels);
  ff__strlist shards = {index->shards, index->num_shards, 0}, bad = {index->bad, index->num_bad, 0};
  ff__strlist_free(&shards);
  ff__strlist_free(&bad);
  free(index->offsets);
  free(index->shard_of);
  *index = (ff__index){0};
}

void ff__index_locate(const ff__index *index, size_t i, const char **shard, uint64_t *offset, uint64_t *length) {
  *shard = index->offsets ? index->shards[index->shard_of[i]] : NULL;
  *offset = index->offsets ? index->offsets[i] : 0;
  *length = index->offsets ? index->size_bytes[i] : 0;
}
