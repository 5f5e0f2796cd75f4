/* Results files: JSON through jansson, written whole or not at all (a temporary file in the
 * same folder, then rename or link). */
#ifndef ATTN_RESULTS_H
#define ATTN_RESULTS_H

#include <jansson.h>
#include <stddef.h>

#include "bench_gpu.h"

/* Writes `doc` to path atomically (tmp + rename; replaces an existing file). */
int attn_json_write_atomic(json_t *doc, const char *path, char *err, size_t errlen);

/* Writes `doc` as <dir>/<stem>.json, or <stem>-2.json, -3, ... : never overwrites an
 * earlier file. The chosen path goes to out_path. */
int attn_json_write_new(json_t *doc, const char *dir, const char *stem, char *out_path,
                        size_t out_len, char *err, size_t errlen);

/* A timing as the results schema writes it ("kernel_timing", baselines' "timing"), and back:
 * attn_timing_from_json returns 0, or 1 when a field is missing, of the wrong type, or a
 * number no timing holds (negative; an integer beyond a C int; a median that is not > 0). */
json_t *attn_timing_json(const attn_timing *t);
int attn_timing_from_json(const json_t *j, attn_timing *t);

/* One test's record in a results file, or a fragment of a run (attn_benchmark's), checked
 * against the schema (results/README.md; scripts/attn/schema.py checks the same): an object
 * with "test"; every field of the schema that is present has its type, every number is finite
 * and >= 0 (a median > 0), every integer fits a C int. 0, or 1 with the first bad field in
 * err: "'tflops' is the number -1, expected a number >= 0". */
int attn_check_test_json(const json_t *t, char *err, size_t errlen);

/* A run's commit, whether the tree was dirty ($ATTN_COMMIT, $ATTN_COMMIT_DIRTY, else git in
 * src), today's date (UTC, for file names) and the time stamp (for documents). */
typedef struct {
    char commit[64], date[32], stamp[64];
    int dirty;
} attn_run_stamp;
void attn_run_stamp_now(const char *src, attn_run_stamp *out);

/* mkdir -p */
int attn_mkdirs(const char *path, char *err, size_t errlen);

#endif
