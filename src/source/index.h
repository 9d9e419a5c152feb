/* index.h — a dataset as an index of samples: path, encoded size, label, and
 * for tar: sources where in which shard the bytes are. Every source builds
 * one (source.h opens them by name); the loader reads samples through it. */
#ifndef FF_SOURCE_INDEX_H
#define FF_SOURCE_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct ff__index {
  size_t count;
  char **paths;          /* count paths */
  uint64_t *size_bytes;  /* encoded size of each file */
  int64_t *labels;       /* NULL when the labels come with the bytes (a reader's sources) */
  size_t num_classes;
  char **class_names;    /* imagefolder only (else NULL) */
  /* tar: sources (else all 0/NULL): sample i is size_bytes[i] bytes at byte
   * offsets[i] of file shards[shard_of[i]]; paths[i] is "SHARD:MEMBER". */
  uint64_t *offsets;
  uint32_t *shard_of;
  char **shards;
  size_t num_shards;
  char **bad;            /* members and shards left out of the index, each message naming shard and member */
  size_t num_bad;
  size_t ignored_members; /* members that belong to no sample (WebDataset ignores them too) */
  int streamed;          /* shards read only from start to end (source/stream.h): offsets is NULL */
  size_t ignored_files;  /* imagefolder: files in the class folders without an image extension */
  struct ff__reader *reader; /* NULL: samples are files at paths; else how to read them (reader.h) */
  int names_block;       /* paths point into one block at paths[0] (callback sources) */
} ff__index;

/* Where sample i's bytes are: *length bytes at byte *offset of file *shard,
 * or (*shard NULL, *offset and *length 0) the whole file paths[i] -- or,
 * for a streamed index, the stream (ff__stream_take). */
void ff__index_locate(const ff__index *index, size_t i, const char **shard, uint64_t *offset, uint64_t *length);
/* Frees what the index holds (its reader too) and zeroes it. NULL: nothing. */
void ff__index_free(ff__index *index);

#endif
