#define _POSIX_C_SOURCE 200809L
#include "results.h"

#include <errno.h>
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

int attn_timing_from_json(const json_t *j, attn_timing *t) {
    memset(t, 0, sizeof *t);
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
