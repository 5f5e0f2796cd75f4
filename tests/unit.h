/* Shared by the unit tests: running a suite, writing a temporary input file. */
#ifndef ATTN_UNIT_H
#define ATTN_UNIT_H

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs the suite (forking per test, as Check does by default); the exit status. */
static inline int attn_unit_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}

/* Runs the suite in this process (the GPU tests: a CUDA context does not survive fork()); the
 * exit status. */
static inline int attn_unit_run_in_process(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}

#ifdef CUDART_VERSION /* the GPU tests (cuda_runtime_api.h included before this header) */
#include <stdio.h>
/* 1 after saying so when no CUDA GPU is visible: the test then exits ATTN_EXIT_SKIP (77) */
static inline int attn_unit_no_gpu(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return 0;
    printf("SKIPPED: no CUDA GPU\n");
    return 1;
}
#endif

/* Writes `text` to a new file under /tmp; its path goes to path (64 bytes). */
static inline const char *attn_unit_temp_file(char *path, const char *text) {
    strcpy(path, "/tmp/attn_unit_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

#endif
