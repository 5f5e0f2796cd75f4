/* What the fuzz targets share: the fuzz bytes as a file that a loader opens by its path, and
 * the libFuzzer entry points every target defines (fuzz/replay.c calls them without libFuzzer). */
#ifndef ATTN_FUZZ_UTIL_H
#define ATTN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The bytes of one input in a memfd: "/proc/self/fd/N", rewritten for each input, so that the
 * loaders read them exactly as they read a user's file (fopen by path), with no disk. Exits
 * with a message when the memfd cannot be made or written (not a finding: the machine). */
const char *fuzz_file(const uint8_t *data, size_t size);

/* The bytes as a C string (a NUL appended; an embedded NUL ends it early, as for a reader of
 * text). Heap, exactly size + 1 bytes, so that ASan sees a read past the end; free it. */
char *fuzz_text(const uint8_t *data, size_t size);

/* Stops the run with the message (an invariant of the parser broken: a finding). */
void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
