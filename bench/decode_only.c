/* decode_only: the CPU's physical limit for full JPEG decoding.
 *
 *   decode_only [--threads N] [--limit M] DIR
 *
 * Finds DIR's .jpg/.jpeg files recursively (sorted by path, the first M when
 * --limit is given), reads them all into memory, then decodes every one fully
 * to RGB with libjpeg(-turbo)'s default settings (JDCT_ISLOW, no scaling) on N
 * threads and prints {"images", "seconds", "images_per_s", "threads"} as JSON.
 * Only the decode phase is timed. */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jpeglib.h>

typedef struct {
    char *path;
    unsigned char *data;
    size_t size;
} file_t;

static file_t *g_files;
static size_t g_nfiles, g_cap;
static atomic_size_t g_next;
static atomic_size_t g_failed;

static int is_jpeg(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)ftw;
    if (type != FTW_F || !is_jpeg(path)) return 0;
    if (g_nfiles == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 1024;
        g_files = realloc(g_files, g_cap * sizeof *g_files);
        if (!g_files) { perror("realloc"); exit(1); }
    }
    g_files[g_nfiles++] = (file_t){ .path = strdup(path) };
    return 0;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const file_t *)a)->path, ((const file_t *)b)->path);
}

static int read_file(file_t *f) {
    FILE *fp = fopen(f->path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->data = malloc(n > 0 ? (size_t)n : 1);
    f->size = (n > 0 && f->data) ? fread(f->data, 1, (size_t)n, fp) : 0;
    fclose(fp);
    return (n > 0 && f->size == (size_t)n) ? 0 : -1;
}

typedef struct {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
} err_t;

static void on_error(j_common_ptr cinfo) {
    longjmp(((err_t *)cinfo->err)->jb, 1);
}
static void on_message(j_common_ptr cinfo, int level) { (void)cinfo; (void)level; }

static void *worker(void *arg) {
    (void)arg;
    struct jpeg_decompress_struct cinfo;
    err_t err;
    /* volatile: changed between setjmp and a possible longjmp */
    unsigned char *volatile row = NULL;
    volatile size_t row_cap = 0;
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = on_error;
    err.mgr.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
    for (;;) {
        size_t i = atomic_fetch_add(&g_next, 1);
        if (i >= g_nfiles) break;
        if (setjmp(err.jb)) {
            jpeg_abort_decompress(&cinfo);
            atomic_fetch_add(&g_failed, 1);
            continue;
        }
        jpeg_mem_src(&cinfo, g_files[i].data, (unsigned long)g_files[i].size);
        jpeg_read_header(&cinfo, TRUE);
        cinfo.out_color_space = JCS_RGB;
        cinfo.dct_method = JDCT_ISLOW;
        jpeg_start_decompress(&cinfo);
        /* a full image buffer, as a loader needs one */
        size_t need = (size_t)cinfo.output_width * cinfo.output_components * cinfo.output_height;
        if (need > row_cap) {
            free(row);
            row = malloc(need);
            row_cap = need;
            if (!row) { perror("malloc"); exit(1); }
        }
        size_t stride = (size_t)cinfo.output_width * cinfo.output_components;
        while (cinfo.output_scanline < cinfo.output_height) {
            JSAMPROW r = row + stride * cinfo.output_scanline;
            jpeg_read_scanlines(&cinfo, &r, 1);
        }
        jpeg_finish_decompress(&cinfo);
    }
    jpeg_destroy_decompress(&cinfo);
    free(row);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void) {
    fprintf(stderr, "usage: decode_only [--threads N] [--limit M] DIR\n");
    exit(2);
}

int main(int argc, char **argv) {
    int threads = 1;
    long limit = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) limit = atol(argv[++i]);
        else if (argv[i][0] == '-') usage();
        else if (!dir) dir = argv[i];
        else usage();
    }
    if (!dir || threads < 1 || limit < 0) usage();

    if (nftw(dir, visit, 32, FTW_PHYS) != 0) {
        fprintf(stderr, "decode_only: cannot walk %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (g_nfiles == 0) {
        fprintf(stderr, "decode_only: no .jpg/.jpeg files under %s\n", dir);
        return 1;
    }
    qsort(g_files, g_nfiles, sizeof *g_files, by_path);
    if (limit > 0 && (size_t)limit < g_nfiles) g_nfiles = (size_t)limit;
    for (size_t i = 0; i < g_nfiles; i++) {
        if (read_file(&g_files[i]) != 0) {
            fprintf(stderr, "decode_only: cannot read %s\n", g_files[i].path);
            return 1;
        }
    }

    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    double t0 = now();
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, NULL);
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    double s = now() - t0;

    size_t ok = g_nfiles - atomic_load(&g_failed);
    if (g_failed) fprintf(stderr, "decode_only: %zu files failed to decode\n", (size_t)g_failed);
    printf("{\"images\": %zu, \"seconds\": %.6f, \"images_per_s\": %.2f, \"threads\": %d}\n",
           ok, s, s > 0 ? (double)ok / s : 0.0, threads);
    return g_failed ? 1 : 0;
}
