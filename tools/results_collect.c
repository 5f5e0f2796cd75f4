/* Collects the per-test fragments of one benchmark run into one results document:
 *   attn_results --reset DIR                    (start of a run: empty the fragments)
 *   attn_results --collect DIR --results-dir R --source-dir SRC
 * writes R/<gpu slug>/benchmarks/<date>-<short commit>.json (never overwriting an earlier file; -2,
 * -3, ... on the same day and commit), whole or not at all. The commit comes from $ATTN_COMMIT,
 * else from git in SRC ("unknown" where neither works); "dirty" says whether SRC had
 * uncommitted changes to tracked files ($ATTN_COMMIT_DIRTY=0/1 overrides).
 * A fragment that does not parse or breaks the results schema (attn_check_test_json) is an
 * error, named with its file and field, and nothing is written.
 * Exit 0 written, 77 no GPU or no fragments (nothing to collect), 1 error. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <jansson.h>

#include "cudnn_sdpa.h"
#include "harness.h"
#include "results.h"
#include "thresholds.h"

static int is_fragment(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return n > 5 && !strcmp(e->d_name + n - 5, ".json");
}

/* What --reset leaves in a folder it made: it deletes files only in a folder with this marker
 * (or one holding nothing but what a run writes), never every *.json of any folder. */
#define RESET_MARKER ".attn_results"

/* A file attn_benchmark wrote: in DIR, "benchmark.<test with '/' as '.'>.json" holding an
 * object whose "test" is that test; in DIR/baselines, "<...>-pci<8 hex>.json" holding an object. */
static int is_ours(const char *dir, const char *name, int baseline) {
    size_t n = strlen(name);
    if (n <= 5 || strcmp(name + n - 5, ".json")) return 0;
    if (baseline) {
        if (n < 17 || strncmp(name + n - 17, "-pci", 4) || strspn(name + n - 13, "0123456789abcdef") != 8) return 0;
    } else if (strncmp(name, "benchmark.", 10)) {
        return 0;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *doc = json_load_file(path, 0, NULL);
    int ok = json_is_object(doc);
    if (ok && !baseline) {
        const char *test = json_string_value(json_object_get(doc, "test"));
        char file[512];
        snprintf(file, sizeof file, "%s.json", test ? test : "");
        for (char *c = file; *c; c++)
            if (*c == '/') *c = '.';
        ok = test && !strcmp(file, name);
    }
    json_decref(doc);
    return ok;
}

/* Removes the files of dir that attn_benchmark wrote (none there, or no dir: nothing to do);
 * with `count_other`, deletes nothing and returns the number of entries that are not its. */
static int remove_ours(const char *dir, int baseline, int count_other) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort), other = 0;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        int skip = !strcmp(name, ".") || !strcmp(name, "..") || (!baseline && !strcmp(name, "baselines"));
        int ours = skip || is_ours(dir, name, baseline);
        if (!ours) other++;
        if (ours && !skip && !count_other) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            unlink(path);
        }
        free(list[i]);
    }
    if (n > 0) free(list);
    return other;
}

/* The start of a run: no fragment, and no shared baseline timing (DIR/baselines/, see
 * suites/benchmark/), survives from an earlier run. A folder that --reset did not make (no
 * marker) and that holds anything but a run's files is refused, untouched. */
static int reset(const char *dir) {
    char err[512], baselines[1024], marker[1024];
    snprintf(baselines, sizeof baselines, "%s/baselines", dir);
    snprintf(marker, sizeof marker, "%s/" RESET_MARKER, dir);
    if (access(marker, F_OK) && access(dir, F_OK) == 0 &&
        (remove_ours(dir, 0, 1) || remove_ours(baselines, 1, 1))) {
        fprintf(stderr, "attn_results: %s: not a fragments folder (no %s, which --reset writes in the folders "
                "it makes, and files that are not a benchmark run's): refusing to delete anything in it\n",
                dir, RESET_MARKER);
        return 2;
    }
    if (attn_mkdirs(dir, err, sizeof err)) return fprintf(stderr, "attn_results: %s\n", err), 1;
    FILE *f = fopen(marker, "w");
    int bad = !f || fputs("attn_results --reset: a benchmark run's fragments; --reset deletes only those\n", f) < 0;
    if ((f && fclose(f)) || bad) return fprintf(stderr, "attn_results: %s: cannot write\n", marker), 1;
    remove_ours(dir, 0, 0);
    remove_ours(baselines, 1, 0);
    printf("fragments and shared baselines in %s cleared\n", dir);
    return 0;
}

/* The fragments of dir, sorted by name, as one JSON array in *tests. Returns their number,
 * 0 where there are none (or no dir), -1 (message printed, nothing kept) where one does not
 * parse (cut short, a number JSON cannot hold, a key twice) or breaks the schema
 * (attn_check_test_json: a wrong type, NaN, a negative or an overflowing number). */
static int load_fragments(const char *dir, json_t **tests) {
    struct dirent **list;
    int n = scandir(dir, &list, is_fragment, alphasort);
    if (n <= 0) return 0;
    *tests = json_array();
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (!bad) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
            json_error_t je;
            char why[512];
            json_t *t = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
            if (!t) {
                fprintf(stderr, "attn_results: %s:%d: %s\n", path, je.line, je.text);
                bad = 1;
            } else if (attn_check_test_json(t, why, sizeof why)) {
                fprintf(stderr, "attn_results: %s: %s\n", path, why);
                json_decref(t);
                bad = 1;
            } else {
                json_array_append_new(*tests, t);
            }
        }
        free(list[i]); /* after a bad fragment the loop only frees the rest */
    }
    free(list);
    if (bad) {
        json_decref(*tests);
        *tests = NULL;
        return -1;
    }
    return n;
}

/* What the results document records about the run: the GPU, the software versions, the
 * commit and the time. */
struct run_info {
    struct cudaDeviceProp prop;
    int driver, runtime, khz, mem_khz, cublas;
    long cudnn_version; /* 0: no cuDNN */
    attn_run_stamp at; /* commit, dirty, date, time */
};

/* The GPU's properties and the driver, runtime, cuBLAS and cuDNN versions. */
static void query_gpu(struct run_info *ri) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&ri->prop, dev);
    cudaDriverGetVersion(&ri->driver);
    cudaRuntimeGetVersion(&ri->runtime);
    cudaDeviceGetAttribute(&ri->khz, cudaDevAttrClockRate, dev);
    cudaDeviceGetAttribute(&ri->mem_khz, cudaDevAttrMemoryClockRate, dev);
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        cublasGetVersion(h, &ri->cublas);
        cublasDestroy(h);
    }
    attn_cudnn *cudnn = NULL;
    char why[512];
    ri->cudnn_version = attn_cudnn_open(&cudnn, why, sizeof why) == 0 ? attn_cudnn_version(cudnn) : 0;
    attn_cudnn_close(cudnn);
}

/* The document: {"schema": 1, "run": {...}, "tests": tests}; takes the reference to tests. */
static json_t *results_doc(const struct run_info *ri, json_t *tests) {
    const struct cudaDeviceProp *prop = &ri->prop;
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", prop->major, prop->minor);
    json_t *run = json_pack("{s:s, s:b, s:s, s:{s:s, s:s, s:i, s:f, s:f, s:i}, s:i, s:i, s:i}",
                            "commit", ri->at.commit, "dirty", ri->at.dirty, "date", ri->at.stamp, "gpu", "name", prop->name,
                            "compute_capability", cc, "sms", prop->multiProcessorCount,
                            "sm_clock_max_mhz", ri->khz / 1000.0, "memory_clock_max_mhz", ri->mem_khz / 1000.0,
                            "l2_bytes", prop->l2CacheSize, "driver_version", ri->driver,
                            "runtime_version", ri->runtime, "cublas_version", ri->cublas);
    json_object_set_new(run, "cudnn_version", ri->cudnn_version ? json_integer(ri->cudnn_version) : json_null());
    return json_pack("{s:i, s:o, s:o}", "schema", 1, "run", run, "tests", tests);
}

static int collect(const char *dir, const char *results_dir, const char *src) {
    char err[1024];
    json_t *tests = NULL;
    int n = load_fragments(dir, &tests); /* a bad fragment is an error with or without a GPU */
    if (n < 0) return 1;
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        json_decref(tests);
        return ATTN_EXIT_SKIP;
    }
    if (n == 0) {
        printf("SKIPPED: no benchmark results in %s to collect\n", dir);
        return ATTN_EXIT_SKIP;
    }

    struct run_info ri = {0};
    query_gpu(&ri);
    attn_run_stamp_now(src, &ri.at);
    json_t *doc = results_doc(&ri, tests);

    char slug[256], outdir[1024], stem[128], out[1200];
    attn_gpu_slug(ri.prop.name, slug, sizeof slug);
    /* results/<gpu>/benchmarks/: the layout results/README.md describes; the full document is
     * written, and scripts/results.py compact makes the committed form of it */
    snprintf(outdir, sizeof outdir, "%s/%s/benchmarks", results_dir, slug);
    snprintf(stem, sizeof stem, "%s-%s", ri.at.date, ri.at.commit);
    if (attn_mkdirs(outdir, err, sizeof err) ||
        attn_json_write_new(doc, outdir, stem, out, sizeof out, err, sizeof err)) {
        fprintf(stderr, "attn_results: %s\n", err);
        json_decref(doc);
        return 1;
    }
    printf("results: %s (%d tests, commit %s%s)\n", out, n, ri.at.commit, ri.at.dirty ? ", dirty" : "");
    json_decref(doc);
    return 0;
}

#define USAGE "usage: attn_results --reset DIR | --collect DIR --results-dir R --source-dir SRC\n"

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf(USAGE "  --reset DIR: start a benchmark run: create DIR (and its %s marker) or delete the\n"
               "    fragments and shared baselines an earlier run left there; refuses a folder it did not make\n"
               "  --collect DIR ...: write R/<gpu>/benchmarks/<date>-<commit>.json from DIR's fragments\n",
               RESET_MARKER);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--reset")) return reset(argv[2]);
    if (argc == 7 && !strcmp(argv[1], "--collect") && !strcmp(argv[3], "--results-dir") &&
        !strcmp(argv[5], "--source-dir"))
        return collect(argv[2], argv[4], argv[6]);
    if (argc < 2) fprintf(stderr, "attn_results: expected --reset or --collect\n" USAGE);
    else if (strcmp(argv[1], "--reset") && strcmp(argv[1], "--collect"))
        fprintf(stderr, "attn_results: unknown option '%s'\n" USAGE, argv[1]);
    else fprintf(stderr, "attn_results: %s: wrong arguments after it\n" USAGE, argv[1]);
    return 2;
}
