/* attn_tune's phase 3 in its child: the work file read back, every class searched
 * (class.c), the gate tables, the results file and the tuned file. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results.h"
#include "text_file.h"
#include "thresholds.h"
#include "tune.h"
#include "tuned.h"

/* Reads the work file into tu->states; 0, or 1 with err. */
static int read_work(tuner *tu, char *err, size_t errlen) {
    for (int g = 0; g < tu->n_groups; g++)
        if (!tu->states[g] && !(tu->states[g] = calloc(tu->space_size, sizeof *tu->states[g])))
            return snprintf(err, errlen, "out of memory"), 1;
    FILE *f = fopen(tu->work_path, "r");
    if (!f) return snprintf(err, errlen, "%.900s: cannot be read", tu->work_path), 1;
    char line[1200];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        char kind;
        int g, n = 0;
        size_t i;
        if (sscanf(line, "%c %d %zu %n", &kind, &g, &i, &n) < 3 || g < 0 || g >= tu->n_groups || i >= tu->space_size) {
            fclose(f);
            return snprintf(err, errlen, "%.500s:%d: malformed line '%.400s'", tu->work_path, lineno, line), 1;
        }
        config_state *c = &tu->states[g][i];
        const char *rest = line + n;
        switch (kind) {
        case 'G':
            c->state = ST_GATED;
            if (sscanf(rest, "%23s %d %d %n", c->gate, &c->regs, &c->spill, &n) >= 3)
                snprintf(c->detail, sizeof c->detail, "%s", rest + n);
            break;
        case 'P': c->state = ST_PASSED, sscanf(rest, "%d %d", &c->regs, &c->spill); break;
        case 'F': c->state = ST_FAILED, snprintf(c->gate, sizeof c->gate, "correctness"),
                  snprintf(c->detail, sizeof c->detail, "%s", rest); break;
        case 'X': c->state = ST_CRASHED, snprintf(c->gate, sizeof c->gate, "correctness"),
                  snprintf(c->detail, sizeof c->detail, "crashed or hung (a fault, a broken CUDA context or the "
                           "case timeout): %s", rest); break;
        default:
            fclose(f);
            return snprintf(err, errlen, "%.900s:%d: unknown line kind '%c'", tu->work_path, lineno, kind), 1;
        }
    }
    fclose(f);
    return 0;
}

/* The group's gate table: counts per gate, every configuration's verdict. */
static json_t *group_json(const tuner *tu, int gi) {
    const group *g = &tu->groups[gi];
    json_t *counts = json_object(), *configs = json_array();
    printf("\n%s %s d%d: %zu configurations:", tu->a.kernel_name, attn_dtype_name(g->dtype), g->d, tu->space_size);
    for (size_t i = 0; i < tu->space_size; i++) {
        const config_state *c = &tu->states[gi][i];
        const char *verdict = c->state == ST_PASSED ? "passed" : c->state == ST_UNSEEN ? "not_run" : c->gate;
        json_object_set_new(counts, verdict, json_integer(json_integer_value(json_object_get(counts, verdict)) + 1));
        json_t *o = json_pack("{s:o, s:s}", "config", config_json(tu, i), "verdict", verdict);
        int v[ATTN_TUNE_MAX_TUNABLES];
        attn_config_facts f;
        config_values(tu, i, v);
        if (tu->tuning->facts(v, g->dtype, g->d, &f) == ATTN_OK) /* what the gates judged, beside ptxas's count */
            json_object_set_new(o, "needs", json_pack("{s:i, s:i, s:i, s:i}", "threads", f.threads, "shared_bytes",
                                                      f.shared_bytes, "regs_estimate", f.regs_estimate, "min_blocks",
                                                      f.min_blocks));
        if (c->detail[0]) json_object_set_new(o, "detail", json_string(c->detail));
        if (c->regs >= 0 && c->state != ST_UNSEEN) json_object_set_new(o, "registers", json_integer(c->regs));
        if (c->spill >= 0 && c->state != ST_UNSEEN) json_object_set_new(o, "spill_bytes", json_integer(c->spill));
        json_array_append_new(configs, o);
    }
    const char *key;
    json_t *val;
    json_object_foreach(counts, key, val) printf(" %s %lld", key, (long long)json_integer_value(val));
    printf("\n");
    char cfg[256];
    for (size_t i = 0; i < tu->space_size; i++)
        if (tu->states[gi][i].state == ST_FAILED || tu->states[gi][i].state == ST_CRASHED)
            printf("  %s: rejected by correctness: %s\n", config_text(tu, i, cfg, sizeof cfg),
                   tu->states[gi][i].detail);
    return json_pack("{s:s, s:i, s:o, s:o}", "dtype", attn_dtype_name(g->dtype), "head_dim", g->d, "gates", counts,
                     "configs", configs);
}

/* 0 when the configure step's parser (harness/tuned.h) takes the file at `tmp` with this
 * kernel's tunables and values, else 1 with its message: attn_tune never writes a tuned file
 * that stops the next configure step. */
static int check_tuned(const tuner *tu, const char *tmp, char *err, size_t errlen) {
    char spec_text[4096] = "", why[1024] = "";
    size_t n = 0;
    for (int t = 0; t < tu->space.n && n < sizeof spec_text; t++) {
        const attn_tunable *tv = &tu->tuning->tunables[t];
        const int listed = tv->count <= ATTN_TUNED_MAX_ALLOWED; /* else any int, as the parser reads it */
        n += (size_t)snprintf(spec_text + n, sizeof spec_text - n, "%s%s%s", t ? "," : "", tv->name, listed ? "=" : "");
        for (int k = 0; listed && k < tv->count && n < sizeof spec_text; k++)
            n += (size_t)snprintf(spec_text + n, sizeof spec_text - n, "%s%d", k ? "|" : "", tv->values[k]);
    }
    attn_tuned_spec spec;
    char *text = NULL;
    size_t len = 0;
    int bad = n >= sizeof spec_text || attn_tuned_spec_parse(spec_text, &spec, why, sizeof why) ||
              attn_text_file_read(tmp, &text, &len) ||
              attn_tuned_parse(text, len, tmp, tu->a.kernel_name, &spec, NULL, NULL, why, sizeof why);
    free(text);
    if (bad) snprintf(err, errlen, "the tuned file would stop the configure step, not written: %.900s", why);
    return bad;
}

/* Writes <tuned-dir>/<slug>.tuned.txt whole (tmp + rename): the header, the GPU, the other
 * kernels' lines as they were, then this run's. 0, or 1 with err. */
static int write_tuned(const tuner *tu, const char *slug, const attn_run_stamp *st, const char *results_file,
                       char **lines, int n,                       char *err, size_t errlen) {
    char path[1100], tmp[1200];
    snprintf(path, sizeof path, "%s/%s.tuned.txt", tu->a.tuned_dir, slug);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) return snprintf(err, errlen, "%.900s: cannot be written", tmp), 1;
    const char *base = strrchr(results_file, '/');
    fprintf(out, "# Tuned configurations on %s: one line per shape class of the benchmark matrix\n"
                 "# whose winner's time beat the default's by %.0f %% or more (95 %% CIs, timed interleaved);\n"
                 "# read by cmake/tuned.cmake. Written by attn_tune (suites/tune.c) on %s, commit %s%s;\n"
                 "# %s's search: results/%s/tune/%s. Other kernels' lines are kept as they were.\n"
                 "gpu %s\n", tu->prop.name, 100 * ACCEPT_MARGIN, st->stamp, st->commit, st->dirty ? " (dirty)" : "",
            tu->a.kernel_name, slug, base ? base + 1 : results_file, tu->prop.name);
    FILE *in = fopen(path, "r");
    size_t klen = strlen(tu->a.kernel_name);
    if (in) { /* keep other kernels' lines and comments about them */
        char l[2048];
        while (fgets(l, sizeof l, in)) {
            const char *w = l[0] == '#' && l[1] == ' ' ? l + 2 : l;
            const int ours = !strncmp(w, tu->a.kernel_name, klen) && (w[klen] == ' ' || w[klen] == '\t');
            const int kernel_line = l[0] != '#' && strncmp(l, "gpu ", 4) && l[0] != '\n';
            const int other_comment = l[0] == '#' && w != l && !ours && strchr(w, ' ') && strstr(w, " d") &&
                                      strstr(w, "default kept");
            if (!ours && (kernel_line || other_comment)) fputs(l, out);
        }
        fclose(in);
    }
    for (int i = 0; i < n; i++)
        if (lines[i][0]) fprintf(out, "%s\n", lines[i]);
    if (fclose(out)) {
        unlink(tmp);
        return snprintf(err, errlen, "%.900s: cannot be written", path), 1;
    }
    if (check_tuned(tu, tmp, err, errlen)) return unlink(tmp), 1;
    if (rename(tmp, path)) {
        unlink(tmp);
        return snprintf(err, errlen, "%.900s: cannot be written", path), 1;
    }
    printf("tuned file: %s\n", path);
    return 0;
}

attn_case_verdict run_search(int i, void *ctx, int *stop_child) {
    (void)i, (void)stop_child;
    tuner *tu = ctx;
    char err[1024];
    const double t0 = attn_wall_s();
    if (read_work(tu, err, sizeof err)) return printf("FAILED: %s\n", err), ATTN_CASE_FAILED;
    if (attn_timer_create(&tu->timer, tu->stream, err, sizeof err))
        return printf("FAILED: timer: %s\n", err), ATTN_CASE_FAILED;
    attn_run_stamp st;
    attn_run_stamp_now(tu->a.source_dir, &st);
    json_t *tun = json_array();
    for (int t = 0; t < tu->space.n; t++) {
        json_t *vals = json_array();
        const attn_tunable *tv = &tu->tuning->tunables[t];
        for (int k = 0; k < tv->count; k++) json_array_append_new(vals, json_integer(tv->values[k]));
        json_array_append_new(tun, json_pack("{s:s, s:o}", "name", tu->tuning->tunables[t].name, "values", vals));
    }
    json_t *gj = json_array();
    for (int g = 0; g < tu->n_groups; g++) json_array_append_new(gj, group_json(tu, g));
    json_t *cj = json_array();
    char **lines = calloc((size_t)tu->n_groups * tu->a.n_masks * tu->a.n_seqlens, sizeof *lines);
    int n_lines = 0, accepted = 0;
    for (int g = 0; g < tu->n_groups; g++)
        for (int m = 0; m < tu->a.n_masks; m++)
            for (int s = 0; s < tu->a.n_seqlens; s++) {
                const shape_class sc = {g, tu->a.masks[m], tu->a.seqlens[s], s ? tu->a.seqlens[s - 1] + 1 : 1,
                                        s + 1 < tu->a.n_seqlens ? tu->a.seqlens[s] : 1 << 24};
                char *line = calloc(1, 1024);
                json_t *c = tune_class(tu, &sc, line, 1024);
                accepted += json_is_true(json_object_get(c, "accepted"));
                json_array_append_new(cj, c);
                lines[n_lines++] = line;
            }
    char slug[256], stem[256], out_path[1200];
    attn_gpu_slug(tu->prop.name, slug, sizeof slug);
    snprintf(stem, sizeof stem, "%s-%s-%s", st.date, st.commit, tu->a.kernel_name);
    char dir[1100]; /* a folder of its own: the benchmark scripts read the .json files of results/<gpu> */
    snprintf(dir, sizeof dir, "%s/%s/tune", tu->a.results_dir, slug);
    json_t *doc = json_pack("{s:s, s:s, s:{s:s, s:b, s:s, s:s}, s:o, s:o, s:o, s:f, s:i, s:i}", "kind", "tune", "kernel",
                            tu->a.kernel_name, "run", "commit", st.commit, "dirty", st.dirty, "date", st.stamp, "gpu",
                            tu->prop.name, "tunables", tun, "groups", gj, "classes", cj, "search_s", attn_wall_s() - t0,
                            "exhaustive_max", tu->a.exhaustive_max, "trials", tu->a.trials);
    int rc = attn_mkdirs(dir, err, sizeof err) ||
             attn_json_write_new(doc, dir, stem, out_path, sizeof out_path, err, sizeof err);
    if (!rc) printf("\nresults: %s\n", out_path);
    if (!rc) rc = write_tuned(tu, slug, &st, out_path, lines, n_lines, err, sizeof err);
    if (rc) printf("FAILED: %s\n", err);
    printf("%d of %d classes take a tuned configuration (search %.1f s)\n", accepted, n_lines, attn_wall_s() - t0);
    for (int k = 0; k < n_lines; k++) free(lines[k]);
    free(lines);
    json_decref(doc);
    attn_timer_destroy(tu->timer);
    return rc ? ATTN_CASE_FAILED : ATTN_CASE_PASSED;
}

const char *search_label(int i, void *ctx) { return (void)i, (void)ctx, "the search"; }
