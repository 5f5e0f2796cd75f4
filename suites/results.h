/* Results files: JSON through jansson, written whole or not at all (a temporary file in the
 * same folder, then rename or link). */
#ifndef ATTN_RESULTS_H
#define ATTN_RESULTS_H

#include <jansson.h>
#include <stddef.h>

/* Writes `doc` to path atomically (tmp + rename; replaces an existing file). */
int attn_json_write_atomic(json_t *doc, const char *path, char *err, size_t errlen);

/* Writes `doc` as <dir>/<stem>.json, or <stem>-2.json, -3, ... : never overwrites an
 * earlier file. The chosen path goes to out_path. */
int attn_json_write_new(json_t *doc, const char *dir, const char *stem, char *out_path,
                        size_t out_len, char *err, size_t errlen);

/* mkdir -p */
int attn_mkdirs(const char *path, char *err, size_t errlen);

#endif
