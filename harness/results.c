#define _POSIX_C_SOURCE 200809L
#include "results.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int dump_tmp(json_t *doc, const char *path, char *tmp, size_t tmplen, char *err, size_t errlen) {
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    if (json_dump_file(doc, tmp, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(6))) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

int attn_json_write_atomic(json_t *doc, const char *path, char *err, size_t errlen) {
    char tmp[1024];
    if (dump_tmp(doc, path, tmp, sizeof tmp, err, errlen)) return 1;
    if (rename(tmp, path)) {
        snprintf(err, errlen, "rename %s -> %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

int attn_json_write_new(json_t *doc, const char *dir, const char *stem, char *out_path,
                        size_t out_len, char *err, size_t errlen) {
    char first[1024], tmp[1100];
    snprintf(first, sizeof first, "%s/%s.json", dir, stem);
    if (dump_tmp(doc, first, tmp, sizeof tmp, err, errlen)) return 1;
    for (int i = 1; i < 1000; i++) {
        if (i == 1) snprintf(out_path, out_len, "%s", first);
        else snprintf(out_path, out_len, "%s/%s-%d.json", dir, stem, i);
        if (link(tmp, out_path) == 0) { /* fails with EEXIST instead of replacing */
            unlink(tmp);
            return 0;
        }
        if (errno != EEXIST) {
            snprintf(err, errlen, "link %s -> %s: %s", tmp, out_path, strerror(errno));
            unlink(tmp);
            return 1;
        }
    }
    snprintf(err, errlen, "%s: too many results files for one day and commit", first);
    unlink(tmp);
    return 1;
}

int attn_mkdirs(const char *path, char *err, size_t errlen) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) && errno != EEXIST) {
                snprintf(err, errlen, "mkdir %s: %s", buf, strerror(errno));
                return 1;
            }
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

json_t *attn_timing_json(const attn_timing *t) {
    return json_pack("{s:f, s:f, s:f, s:f, s:i, s:i, s:b, s:f, s:f, s:f, s:b, s:f}", "median_ms", t->median_ms,
                     "min_ms", t->min_ms, "ci_lo_ms", t->ci_lo_ms, "ci_hi_ms", t->ci_hi_ms,
                     "samples", t->samples, "dropped_for_clock", t->dropped_clock, "noisy", t->noisy,
                     "rsd", t->rsd, "mean_sm_clock_mhz", t->mean_clock_mhz, "gpu_time_s", t->gpu_time_s,
                     "held", t->held, "enqueue_ms", t->enqueue_ms);
}

/* ---- reading results JSON: the schema's types (scripts/attn/schema.py checks the same) ---- */

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
typedef enum { F_STR, F_INT, F_NUM, F_POSITIVE, F_BOOL, F_OBJ, F_OBJ_OR_NULL, F_LIST } field_type;
typedef struct {
    const char *path; /* dotted; "a.*": every member of a */
    field_type type;
} field;

static const field timing_fields[] = {
    {"median_ms", F_POSITIVE}, {"min_ms", F_NUM}, {"ci_lo_ms", F_NUM}, {"ci_hi_ms", F_NUM},
    {"samples", F_INT}, {"dropped_for_clock", F_INT}, {"noisy", F_BOOL}, {"rsd", F_NUM},
    {"mean_sm_clock_mhz", F_NUM}, {"gpu_time_s", F_NUM}, {"held", F_BOOL}, {"enqueue_ms", F_NUM}};
static const char *const timing_paths[] = {"kernel_timing", "baselines.reference.timing", "baselines.cudnn.timing"};
static const field test_fields[] = {
    {"test", F_STR}, {"kernel", F_STR}, {"dtype", F_STR}, {"head_dim", F_INT}, {"causal", F_BOOL},
    {"seqlen_q", F_INT}, {"seqlen_k", F_INT}, {"batch", F_INT}, {"heads", F_INT}, {"kernel_timing", F_OBJ_OR_NULL},
    {"flops", F_NUM}, {"bytes", F_NUM}, {"tflops", F_NUM}, {"gbs", F_NUM}, {"roofline_efficiency", F_NUM},
    {"roofline_bound", F_STR}, {"peaks", F_OBJ}, {"peaks.tflops", F_NUM}, {"peaks.gbs", F_NUM},
    {"baselines", F_OBJ}, {"baselines.timed_by", F_STR}, {"baselines.reference", F_OBJ},
    {"baselines.reference.speedup", F_NUM}, {"baselines.reference.speedup_ci", F_LIST},
    {"baselines.reference.timing", F_OBJ}, {"baselines.cudnn", F_OBJ}, {"baselines.cudnn.available", F_BOOL},
    {"baselines.cudnn.speedup", F_NUM}, {"baselines.cudnn.speedup_ci", F_LIST}, {"baselines.cudnn.reason", F_STR},
    {"baselines.cudnn.kind", F_STR}, {"baselines.cudnn.version", F_INT}, {"baselines.cudnn.timing", F_OBJ},
    {"workload", F_STR}, {"heads_k", F_INT}, {"page_size", F_INT}, {"window", F_LIST}, {"sequences", F_LIST},
    {"thresholds", F_OBJ}, {"launches", F_OBJ}, {"launches.available", F_BOOL}, {"launches.count", F_INT},
    {"launches.each", F_LIST}, {"config", F_OBJ}, {"config.tuned", F_BOOL}, {"verdict", F_STR},
    {"reason", F_STR}, {"phases_s", F_OBJ}, {"phases_s.*", F_NUM}};

/* The value at a dotted path (NULL when absent or under a value that is not an object). */
static const json_t *get_path(const json_t *obj, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *key = strtok_r(buf, ".", &save); key && obj; key = strtok_r(NULL, ".", &save))
        obj = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return obj;
}

/* What a value must be but is not (NULL: fine): every number finite and >= 0, every integer
 * within a C int, as the harness writes them. */
static const char *field_error(const json_t *v, field_type type) {
    switch (type) {
    case F_STR: return json_is_string(v) ? NULL : "a string";
    case F_BOOL: return json_is_boolean(v) ? NULL : "true or false";
    case F_OBJ: return json_is_object(v) ? NULL : "an object";
    case F_OBJ_OR_NULL: return json_is_object(v) || json_is_null(v) ? NULL : "an object or null";
    case F_LIST: return json_is_array(v) ? NULL : "a list";
    case F_INT:
        if (!json_is_integer(v)) return "an integer";
        return json_integer_value(v) >= 0 && json_integer_value(v) <= INT_MAX ? NULL
                                                                              : "an integer from 0 to 2147483647";
    case F_NUM:
    case F_POSITIVE: {
        if (!json_is_number(v)) return type == F_NUM ? "a number" : "a positive number";
        const double x = json_number_value(v);
        if (!isfinite(x)) return "a finite number";
        if (type == F_POSITIVE && x <= 0) return "a positive number";
        return x < 0 ? "a number >= 0" : NULL;
    }
    }
    return NULL;
}

/* A value as a message names it: "the number -1", "a string", ... */
static const char *describe(const json_t *v, char *buf, size_t len) {
    if (json_is_integer(v)) snprintf(buf, len, "the number %lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, len, "the number %g", json_real_value(v));
    else snprintf(buf, len, "%s", json_is_null(v) ? "null" : json_is_true(v) ? "true" : json_is_false(v) ? "false"
                                  : json_is_string(v) ? "a string" : json_is_array(v) ? "a list" : "an object");
    return buf;
}

/* 1 with "'<prefix><name>' is <value>, expected <type>" in err when v is not of its type. */
static int bad_field(const json_t *v, field_type type, const char *prefix, const char *name, char *err,
                     size_t errlen) {
    const char *want = field_error(v, type);
    char what[64];
    if (want) snprintf(err, errlen, "'%s%s' is %s, expected %s", prefix, name, describe(v, what, sizeof what), want);
    return want != NULL;
}

/* Every field of the table that obj holds has its type: 0, or 1 with the first bad one in err. */
static int check_fields(const json_t *obj, const field *f, size_t n, const char *prefix, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        const size_t len = strlen(f[i].path);
        if (len < 2 || strcmp(f[i].path + len - 2, ".*")) {
            const json_t *v = get_path(obj, f[i].path);
            if (v && bad_field(v, f[i].type, prefix, f[i].path, err, errlen)) return 1;
            continue;
        }
        char parent[128], name[256];
        snprintf(parent, sizeof parent, "%.*s", (int)(len - 2), f[i].path);
        const json_t *p = get_path(obj, parent), *v;
        const char *key;
        if (!json_is_object(p)) continue;
        json_object_foreach((json_t *)p, key, v) {
            snprintf(name, sizeof name, "%s.%s", parent, key);
            if (bad_field(v, f[i].type, prefix, name, err, errlen)) return 1;
        }
    }
    return 0;
}

int attn_check_test_json(const json_t *t, char *err, size_t errlen) {
    char what[64], prefix[64];
    if (!json_is_object(t)) {
        snprintf(err, errlen, "expected a JSON object at the top, got %s", t ? describe(t, what, sizeof what) : "nothing");
        return 1;
    }
    if (check_fields(t, test_fields, N_OF(test_fields), "", err, errlen)) return 1;
    for (size_t i = 0; i < N_OF(timing_paths); i++) {
        const json_t *timing = get_path(t, timing_paths[i]);
        snprintf(prefix, sizeof prefix, "%s.", timing_paths[i]);
        if (json_is_object(timing) &&
            check_fields(timing, timing_fields, N_OF(timing_fields), prefix, err, errlen))
            return 1;
    }
    if (!json_object_get(t, "test")) {
        snprintf(err, errlen, "missing key 'test'");
        return 1;
    }
    return 0;
}

int attn_timing_from_json(const json_t *j, attn_timing *t) {
    memset(t, 0, sizeof *t);
    char err[256];
    if (check_fields(j, timing_fields, N_OF(timing_fields), "", err, sizeof err)) return 1;
    json_error_t e;
    return json_unpack_ex((json_t *)j, &e, JSON_STRICT,
                          "{s:F, s:F, s:F, s:F, s:i, s:i, s:b, s:F, s:F, s:F, s:b, s:F}", "median_ms",
                          &t->median_ms, "min_ms", &t->min_ms, "ci_lo_ms", &t->ci_lo_ms, "ci_hi_ms",
                          &t->ci_hi_ms, "samples", &t->samples, "dropped_for_clock", &t->dropped_clock,
                          "noisy", &t->noisy, "rsd", &t->rsd, "mean_sm_clock_mhz", &t->mean_clock_mhz,
                          "gpu_time_s", &t->gpu_time_s, "held", &t->held, "enqueue_ms", &t->enqueue_ms) != 0;
}

static void git_line(const char *src, const char *args, char *out, size_t outlen) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "git -C '%s' %s 2>/dev/null", src, args);
    out[0] = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return;
    if (!fgets(out, (int)outlen, f)) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    pclose(f);
}

void attn_run_stamp_now(const char *src, attn_run_stamp *out) {
    char dirty[8] = "";
    const char *env = getenv("ATTN_COMMIT");
    if (env && *env) snprintf(out->commit, sizeof out->commit, "%s", env);
    else git_line(src, "rev-parse --short HEAD", out->commit, sizeof out->commit);
    if (!out->commit[0]) snprintf(out->commit, sizeof out->commit, "unknown");
    const char *envd = getenv("ATTN_COMMIT_DIRTY");
    if (envd && *envd) out->dirty = atoi(envd) != 0;
    else git_line(src, "status --porcelain --untracked-files=no", dirty, sizeof dirty), out->dirty = dirty[0] != 0;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out->date, sizeof out->date, "%Y-%m-%d", &tm);
    strftime(out->stamp, sizeof out->stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
