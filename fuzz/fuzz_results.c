/* The C readers of results JSON: attn_results (tools/results_collect.c, its main compiled as
 * attn_results_main) run as the benchmark run runs it, --reset then --collect, on a fragments
 * folder holding the input as a fragment and as a shared baseline timing; and, on the input
 * parsed as --collect parses it, attn_check_test_json and attn_timing_from_json (harness/results.c)
 * on every object in it. Beyond memory and UB errors: a fragment the schema check refuses is
 * refused with the field named. The fragment is named
 * after its "test" when that makes a file name (benchmark/a/b -> benchmark.a.b.json: one that
 * --reset takes for a run's own), else benchmark.fuzz.json. The folder is under /dev/shm (or
 * $TMPDIR); an input of odd size finds --reset's marker there, so both of its branches run.
 * attn_results's messages on stdout and stderr are its business: run with -close_fd_mask=3. */
#define _GNU_SOURCE /* mkdtemp */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz_util.h"
#include "results.h"

int attn_results_main(int argc, char **argv);

static char root[256], frags[320], baselines[352], results[320];

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!lstat(path, &st) && S_ISDIR(st.st_mode)) remove_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static void cleanup(void) {
    if (root[0]) remove_tree(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(root, sizeof root, "%s/attn_fuzz_results.XXXXXX", tmp);
    if (!mkdtemp(root)) perror("fuzz_results: mkdtemp"), exit(2);
    atexit(cleanup);
    snprintf(frags, sizeof frags, "%s/fragments", root);
    snprintf(baselines, sizeof baselines, "%s/baselines", frags);
    snprintf(results, sizeof results, "%s/results", root);
    setenv("ATTN_COMMIT", "fuzz", 1); /* no git */
    setenv("ATTN_COMMIT_DIRTY", "0", 1);
    return 0;
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) perror(path), exit(2);
}

/* benchmark.<test, '/' as '.'>.json, when the input's "test" makes a plain file name */
static void fragment_name(const uint8_t *data, size_t size, char *name, size_t len) {
    snprintf(name, len, "benchmark.fuzz.json");
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    const char *test = json_string_value(json_object_get(doc, "test"));
    if (test && !strncmp(test, "benchmark/", 10) && strlen(test) < 200 &&
        strspn(test, "abcdefghijklmnopqrstuvwxyz0123456789_-/") == strlen(test)) {
        snprintf(name, len, "%s.json", test);
        for (char *c = name; *c; c++)
            if (*c == '/') *c = '.';
    }
    json_decref(doc);
}

/* attn_timing_from_json on j and on every object and array element under it */
static void timings(const json_t *j) {
    attn_timing t;
    attn_timing_from_json(j, &t);
    const char *key;
    json_t *v;
    size_t i;
    if (json_is_object(j)) json_object_foreach((json_t *)j, key, v) timings(v);
    if (json_is_array(j)) json_array_foreach(j, i, v) timings(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char name[256], path[1024];
    fragment_name(data, size, name, sizeof name);
    remove_tree(frags);
    mkdir(frags, 0777);
    mkdir(baselines, 0777);
    if (size % 2) { /* as if an earlier --reset had made the folder */
        snprintf(path, sizeof path, "%s/.attn_results", frags);
        write_file(path, (const uint8_t *)"", 0);
    }
    snprintf(path, sizeof path, "%s/%s", frags, name);
    write_file(path, data, size);
    snprintf(path, sizeof path, "%s/fuzz-pci0000abcd.json", baselines);
    write_file(path, data, size);
    attn_results_main(3, (char *[]){"attn_results", "--reset", frags, NULL});

    remove_tree(frags); /* what --reset left (it may refuse the folder); then the input alone */
    mkdir(frags, 0777);
    snprintf(path, sizeof path, "%s/%s", frags, name);
    write_file(path, data, size);
    attn_results_main(7, (char *[]){"attn_results", "--collect", frags, "--results-dir", results, "--source-dir", root, NULL});
    remove_tree(results);

    char why[512] = "";
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (doc && attn_check_test_json(doc, why, sizeof why) && !why[0]) fuzz_fail("a fragment refused with no reason");
    timings(doc);
    json_decref(doc);
    return 0;
}
