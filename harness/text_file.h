/* A whole file read into memory, for the parsers that take a buffer (tuned, INI files).
 * Host-only C with libc alone: the configure step compiles it into attn_shapes. */
#ifndef ATTN_TEXT_FILE_H
#define ATTN_TEXT_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The file at `path` in *text (NUL-terminated; free() it) and its length in *len (NUL bytes
 * inside count: the parsers reject them). Returns 0, or errno's value (ENOMEM when out of
 * memory); *text is then NULL. */
int attn_text_file_read(const char *path, char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
