/* A fuzz target without libFuzzer: every file of the folders (or the files) given, in name
 * order, through LLVMFuzzerTestOneInput once. The unit tests (unit/fuzz/<target>) replay each
 * target's committed corpus with the project's own compiler (fuzz/CMakeLists.txt), so that every
 * crash the fuzzing found, kept as a file in fuzz/corpus/<target>/, is tested on every build,
 * clang or not. Exit 0: every input ran; 1: a folder held no input (a crash aborts). */
#define _DEFAULT_SOURCE /* scandir, DT_* */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return perror(path), 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) return fprintf(stderr, "%s: cannot read\n", path), fclose(f), free(data), 0;
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)n);
    free(data);
    return 1;
}

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int status = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st)) return perror(argv[a]), 1;
        if (!S_ISDIR(st.st_mode)) {
            status |= !run_file(argv[a]);
            continue;
        }
        struct dirent **list;
        int n = scandir(argv[a], &list, not_hidden, alphasort), ran = 0;
        for (int i = 0; i < n; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], list[i]->d_name);
            if (!stat(path, &st) && S_ISREG(st.st_mode)) ran += run_file(path);
            free(list[i]);
        }
        if (n > 0) free(list);
        printf("replay: %d inputs from %s\n", ran, argv[a]);
        if (ran == 0) fprintf(stderr, "replay: no input in %s\n", argv[a]), status = 1;
    }
    return status;
}
