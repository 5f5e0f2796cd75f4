#define _GNU_SOURCE /* memfd_create */
#include "fuzz_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("attn_fuzz_input", 0);
        if (fd < 0) perror("fuzz: memfd_create"), exit(2);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        perror("fuzz: writing the memfd"), exit(2);
    return path;
}

char *fuzz_text(const uint8_t *data, size_t size) {
    char *t = malloc(size + 1);
    if (!t) fprintf(stderr, "fuzz: out of memory\n"), exit(2);
    if (size) memcpy(t, data, size);
    t[size] = 0;
    return t;
}

/* The sanitizers' report channel: libFuzzer's -close_fd_mask closes the target's stderr, not it. */
__attribute__((weak)) void __sanitizer_report_error_summary(const char *summary);

void fuzz_fail(const char *fmt, ...) {
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(what, sizeof what, "fuzz: invariant broken: ");
    vsnprintf(what + n, sizeof what - (size_t)n, fmt, ap);
    va_end(ap);
    if (__sanitizer_report_error_summary) __sanitizer_report_error_summary(what);
    else fprintf(stderr, "%s\n", what);
    abort();
}
