/* fuzz_tar_stream.c — a streamed shard's bytes (what curl or a pipe:
 * command hands libarchive; the HTTP framing is curl's) through the tar
 * scanner from memory, as stream.c reads it: a counting pass, the shard's
 * finish and its index, then a reading pass that takes each sample's bytes
 * under a member limit and the image sniff. Any bytes (any compression
 * libarchive takes) must end in samples, listed problems or an error;
 * every sample's bytes reach the callback once, and nothing leaks. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <archive.h>

#include "codec/codec.h"
#include "source/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reading pass's sample: its bytes are ours (freed), or the reason they were refused. */
static ff_status take(void *ctx, const ff__tar_sample *s, uint8_t *bytes, const ff__error *problem, ff__error *err) {
  (void)err;
  size_t *seen = ctx;
  if (!bytes == !problem) abort(); /* one or the other */
  if (bytes && s->size) bytes[s->size - 1] ^= 1; /* the whole member is there to touch */
  free(bytes);
  ++*seen;
  return FF_OK;
}

static ff_status scan(const uint8_t *data, size_t size, ff__tar_sample_fn fn, void *ctx, ff__tar_shard *sc) {
  static const ff__tar_read_opts opts = {1 << 20, ff__codec_is_image};
  struct archive *a = ff__tar_archive_new();
  if (!a) return FF_ENOMEM;
  ff__error err = {0};
  ff_status st = archive_read_open_memory(a, data, size) == ARCHIVE_OK
                     ? ff__tar_scan_archive(a, "fuzz.tar", 0, fn, ctx, &opts, sc, &err)
                     : FF_EDATA;
  archive_read_free(a);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ff__tar_shard counted = {0};
  ff__error err = {0};
  if (scan(data, size, NULL, NULL, &counted) == FF_OK && ff__tar_shard_finish(&counted, "fuzz.tar", &err) == FF_OK) {
    ff__strlist shards = {0};
    ff__index index;
    if (!ff__strlist_push(&shards, "http://host/fuzz.tar") &&
        ff__tar_index_build("http://host/fuzz.tar", &shards, &counted, 0, &index, &err) == FF_OK)
      ff__index_free(&index);
    ff__strlist_free(&shards);
  }
  ff__tar_shard_free(&counted);
  ff__tar_shard read = {0};
  size_t seen = 0;
  scan(data, size, take, &seen, &read);
  ff__tar_shard_free(&read);
  return 0;
}
