/* The cuDNN baseline's engine choice: the engine configs heuristics modes A, B and FALLBACK
 * propose, each distinct one finalized into a candidate execution plan; and autotuning,
 * which times the candidates on the caller's buffers and keeps the fastest (cudnn_sdpa.h). */
#include "cudnn_sdpa_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- engine configs ------------------------------------------------------------------- */

/* What the search over heuristics modes keeps for its refusal message. */
typedef struct {
    char first[4096]; /* the first failure: the likeliest cause when no engine works */
    char msg[4096];   /* the latest failure */
    char counts[256]; /* per mode, "failed" or how many configs it proposed */
} heur_log;

static void log_count(heur_log *lg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_count(heur_log *lg, const char *fmt, ...) {
    size_t used = strlen(lg->counts);
    if (used + 1 >= sizeof lg->counts) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lg->counts + used, sizeof lg->counts - used, fmt, ap);
    va_end(ap);
}

static void keep_first(heur_log *lg) {
    if (!lg->first[0]) snprintf(lg->first, sizeof lg->first, "%s", lg->msg);
}

/* cudnnBackendGetAttribute of the heuristics' results: requested 0 asks for their count
 * (cfgs NULL). On failure the reason goes to lg and *got is 0. */
static void heur_results(attn_cudnn *c, void *heur, const char *mode, int64_t requested, int64_t *got, void **cfgs,
                         const char *attr, heur_log *lg) {
    cudnn_status st = c->f.GetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                        requested, got, cfgs);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, lg->msg, sizeof lg->msg, st, "cudnnBackendGetAttribute", mode, attr);
        keep_first(lg);
        *got = 0;
    }
}

/* The engine configs the heuristics descriptor proposes, at most MAX_ENGINE_CFGS, created
 * through hb; returns how many cuDNN filled in (0 when it could not list them). */
static int64_t engine_configs(builder *hb, void *heur, const char *mode, void **cfgs, heur_log *lg) {
    int64_t n_cfgs = 0;
    heur_results(hb->c, heur, mode, 0, &n_cfgs, NULL, "CUDNN_ATTR_ENGINEHEUR_RESULTS count", lg);
    if (n_cfgs > MAX_ENGINE_CFGS) n_cfgs = MAX_ENGINE_CFGS;
    int64_t got = 0;
    for (int64_t i = 0; i < n_cfgs; i++)
        if (!(cfgs[i] = sdpa_mk(hb, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"))) {
            keep_first(lg);
            n_cfgs = 0;
        }
    if (n_cfgs > 0) heur_results(hb->c, heur, mode, n_cfgs, &got, cfgs, "CUDNN_ATTR_ENGINEHEUR_RESULTS", lg);
    if (got > n_cfgs) got = n_cfgs;
    return got;
}

/* Which engine and knobs a config stands for, as cudnn-frontend tags its plans:
 * "eng<CUDNN_ATTR_ENGINE_GLOBAL_INDEX>" then "_k<knob type>=<value>" per knob choice.
 * The descriptors it reads into are its own, destroyed before it returns. 0, or -1 (tag
 * "eng?", *id -1) when cuDNN does not say. */
static int config_tag(attn_cudnn *c, void *cfg, char *tag, size_t len, long long *id) {
    snprintf(tag, len, "eng?");
    *id = -1;
    void *eng = NULL, *knobs[KNOB_MAX];
    int n_knobs = 0, rc = -1;
    int64_t n = 0, engine_index = -1;
    if (c->f.CreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) || !eng) return -1;
    if (c->f.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ||
        c->f.GetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &engine_index))
        goto done;
    *id = (long long)engine_index;
    size_t used = (size_t)snprintf(tag, len, "eng%lld", (long long)engine_index);
    for (; n_knobs < KNOB_MAX; n_knobs++)
        if (c->f.CreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &knobs[n_knobs]) || !knobs[n_knobs])
            break;
    int64_t got = 0;
    if (n_knobs < KNOB_MAX ||
        c->f.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, KNOB_MAX, &got,
                          knobs)) {
        snprintf(tag + used, len - used, "_k?"); /* the engine is known, its knobs are not */
        rc = 0;
        goto done;
    }
    for (int64_t i = 0; i < got && i < KNOB_MAX && used < len; i++) {
        int type = -1;
        int64_t value = -2, cnt = 0;
        c->f.GetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type);
        c->f.GetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &cnt, &value);
        int k = snprintf(tag + used, len - used, "_k%d=%lld", type, (long long)value);
        if (k < 0) break;
        used += (size_t)k;
    }
    rc = 0;
done:
    for (int i = 0; i < n_knobs; i++) c->f.DestroyDescriptor(knobs[i]);
    c->f.DestroyDescriptor(eng);
    return rc;
}

/* Finalizes one config into an execution plan, kept as a candidate: 0 built; 1 not built
 * (its reason goes to lg through hb, its descriptors are rolled back); -1 when the plan's
 * workspace size cannot be read (reason in b->why, the search stops). */
static int build_candidate(builder *b, builder *hb, void *cfg, const char *what, const char *tag,
                           long long engine_id, heur_log *lg) {
    attn_cudnn *c = b->c;
    attn_cudnn_plan *pl = b->pl;
    int pmark = pl->n_descs;
    void *plan = sdpa_mk(hb, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, what);
    const double t0 = sdpa_now_s();
    int failed = !plan ||
                 SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
                 SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) ||
                 (b->dynamic && SA(hb, plan, what, CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c->kcache));
    if (!failed) { /* where cuDNN generates the kernel and the driver compiles it */
        failed = sdpa_fin(hb, plan, what);
        pl->finalizes++;
    }
    pl->finalize_s += sdpa_now_s() - t0;
    if (failed) {
        keep_first(lg);
        sdpa_rollback(pl, pmark);
        return 1;
    }
    int64_t ws = 0, n = 0;
    cudnn_status st = c->f.GetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
    if (st != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, b->why, b->whylen, st, "cudnnBackendGetAttribute", what,
                 "CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE");
        return -1;
    }
    candidate *cd = &pl->cands[pl->n_cands++];
    cd->plan = plan;
    cd->workspace = ws < 0 ? 0 : ws;
    cd->engine_id = engine_id;
    snprintf(cd->tag, sizeof cd->tag, "%s", tag);
    cd->ms = -1;
    return 0;
}

/* The distinct configs seen so far in one search (by tag), so that a config two heuristics
 * modes propose is built once. */
typedef struct {
    char (*tags)[TAG_LEN];
    int n, cap;
} seen_tags;

static int seen_before(seen_tags *st, const char *tag) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->tags[i], tag)) return 1;
    if (st->n < st->cap) snprintf(st->tags[st->n++], TAG_LEN, "%s", tag);
    return 0;
}

/* 1 when the search has what it wants: a plan when not tuning, else max_configs tried. */
static int search_done(const attn_cudnn_plan *pl) {
    if (!pl->tune) return pl->n_cands > 0 || pl->configs_tried >= 3 * MAX_ENGINE_CFGS;
    return pl->configs_tried >= pl->max_configs || pl->n_cands >= MAX_CANDIDATES;
}

/* One heuristics mode on the finalized operation graph g: its configs not seen before are
 * built into candidates (pl->cands). 0 (whatever it found), or -1 to stop the search (reason
 * in b->why). A mode that yields no candidate leaves no descriptor behind. */
static int collect_configs(builder *b, void *g, int mode, const char *mode_name, heur_log *lg, seen_tags *seen) {
    attn_cudnn_plan *pl = b->pl;
    int mark = pl->n_descs, before = pl->n_cands, fresh = 0;
    /* failures inside a mode are not final (the next config or mode may work): they go to
     * lg->msg, not to the caller's why */
    builder hb = *b;
    hb.why = lg->msg;
    hb.whylen = sizeof lg->msg;
    void *heur = sdpa_mk(&hb, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
    if (!heur ||
        SA(&hb, heur, mode_name, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) ||
        SA(&hb, heur, mode_name, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ||
        sdpa_fin(&hb, heur, mode_name)) {
        keep_first(lg);
        log_count(lg, "%s%s: failed", lg->counts[0] ? ", " : "", mode_name);
        sdpa_rollback(pl, mark);
        return 0;
    }
    void *cfgs[MAX_ENGINE_CFGS];
    int64_t got = engine_configs(&hb, heur, mode_name, cfgs, lg);
    for (int64_t i = 0; i < got && !search_done(pl); i++) {
        char tag[TAG_LEN], what[TAG_LEN + 128];
        long long id;
        if (config_tag(b->c, cfgs[i], tag, sizeof tag, &id)) /* unknown: never merged with another */
            snprintf(tag, sizeof tag, "eng?(%s #%lld)", mode_name, (long long)i);
        if (seen_before(seen, tag)) continue;
        fresh++;
        pl->configs_tried++;
        snprintf(what, sizeof what, "execution plan, %s config %lld of %lld (%s)", mode_name, (long long)i,
                 (long long)got, tag);
        if (build_candidate(b, &hb, cfgs[i], what, tag, id, lg) < 0) return -1;
    }
    log_count(lg, "%s%s: %lld config%s", lg->counts[0] ? ", " : "", mode_name, (long long)got, got == 1 ? "" : "s");
    if (got > 0 && fresh < got) log_count(lg, " (%d new)", fresh);
    if (pl->n_cands == before) sdpa_rollback(pl, mark);
    return 0;
}

/* collect_configs, its time (less the execution plans' finalize) counted as the heuristics' */
static int collect_mode(builder *b, void *g, int mode, const char *mode_name, heur_log *lg, seen_tags *seen) {
    attn_cudnn_plan *pl = b->pl;
    const double t0 = sdpa_now_s(), fin0 = pl->finalize_s;
    int rc = collect_configs(b, g, mode, mode_name, lg, seen);
    pl->heur_s += sdpa_now_s() - t0 - (pl->finalize_s - fin0); /* the rest is build_candidate's */
    return rc;
}

/* Operation graph, then heuristics: modes A, B and FALLBACK when tuning (every distinct
 * config that builds becomes a candidate, up to max_configs tried), else A then FALLBACK
 * until one config builds. Sets pl->exec_plan (the first candidate: the heuristics' first
 * choice) and pl->workspace_size (the largest candidate's, so that any can run). */
int sdpa_make_plan(builder *b, void **ops, int n_ops) {
    attn_cudnn *c = b->c;
    attn_cudnn_plan *pl = b->pl;
    if (b->ops_only) {
        b->n_ops = n_ops;
        return 0;
    }
    const bool dynamic = true;
    void *g = sdpa_mk(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    if (!g || SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->handle) ||
        SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_ops, ops) ||
        (b->dynamic && SA(b, g, "operation graph", CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED,
                          CUDNN_TYPE_BOOLEAN, 1, &dynamic)))
        return -1;
    const double t0 = sdpa_now_s();
    int failed = sdpa_fin(b, g, "operation graph");
    pl->opgraph_s += sdpa_now_s() - t0;
    if (failed || (b->dynamic && sdpa_kcache_bind(b, g))) return -1;

    static const int tuned_modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};
    static const int first_modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    static const char *const tuned_names[3] = {"heuristics mode A", "heuristics mode B", "heuristics mode FALLBACK"};
    static const char *const first_names[2] = {"heuristics mode A", "heuristics mode FALLBACK"};
    const int n_modes = pl->tune ? 3 : 2;
    const int *modes = pl->tune ? tuned_modes : first_modes;
    const char *const *names = pl->tune ? tuned_names : first_names;

    heur_log lg = {.first = "", .counts = ""};
    seen_tags seen = {calloc(3 * MAX_ENGINE_CFGS, TAG_LEN), 0, 3 * MAX_ENGINE_CFGS};
    if (!seen.tags) {
        put(b->why, b->whylen, "out of host memory (engine config tags)");
        return -1;
    }
    pl->n_cands = pl->configs_tried = 0;
    int rc = 0;
    for (int m = 0; m < n_modes && !rc && !search_done(pl); m++)
        rc = collect_mode(b, g, modes[m], names[m], &lg, &seen);
    free(seen.tags);
    snprintf(pl->heuristics, sizeof pl->heuristics, "%s", lg.counts);
    if (rc) return -1;
    if (pl->n_cands > 0) {
        pl->exec_plan = pl->cands[0].plan;
        pl->workspace_size = 0;
        for (int i = 0; i < pl->n_cands; i++)
            if (pl->cands[i].workspace > pl->workspace_size) pl->workspace_size = pl->cands[i].workspace;
        pl->configs_built = pl->n_cands;
        return 0;
    }
    if (!lg.first[0] && c->f.GetLastErrorString) {
        char last[4000];
        sdpa_last_error(c, last, sizeof last);
        if (last[0]) snprintf(lg.first, sizeof lg.first, "cuDNN's last error: %s", last);
    }
    put(b->why, b->whylen, "no engine supports this graph (%s; %d distinct config%s tried); first failure: %s",
        lg.counts, pl->configs_tried, pl->configs_tried == 1 ? "" : "s", lg.first[0] ? lg.first : "none reported");
    return -1;
}

/* ---- autotuning ---------------------------------------------------------------------- */

double sdpa_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Destroys one descriptor of the plan (an execution plan that lost), keeping the order of
 * the others. */
static void drop_desc(attn_cudnn_plan *pl, void *d) {
    for (int i = 0; i < pl->n_descs; i++)
        if (pl->descs[i] == d) {
            pl->c->f.DestroyDescriptor(d);
            memmove(&pl->descs[i], &pl->descs[i + 1], (size_t)(pl->n_descs - i - 1) * sizeof *pl->descs);
            pl->n_descs--;
            return;
        }
}

/* Time per run of the plan's current execution plan (run(ctx, ...) on the tuning's buffers),
 * stream: one warm-up, one run timed alone, then three rounds of `runs` back-to-back runs (0:
 * enough for about 1 ms by the lone run's time, 1 to 50) between events; the fastest round.
 * 0, 1 when this config fails to run (reason in why; the next may work), -1 on a CUDA error
 * (the context may be lost: the search stops). */
static int time_config(attn_cudnn_plan *pl, sdpa_run_fn run, void *ctx, cudaStream_t stream, int runs,
                       cudaEvent_t ev[2], double *ms, char *why, size_t whylen) {
    float t = 0;
    /* the warm-up (lazy module loading, first-launch costs), then one run that is timed
     * to size the rounds */
    if (run(ctx, pl, stream, why, whylen)) return 1;
    cudaError_t e = cudaEventRecord(ev[0], stream);
    if (e == cudaSuccess && run(ctx, pl, stream, why, whylen)) {
        cudaStreamSynchronize(stream);
        return 1;
    }
    if (e == cudaSuccess) e = cudaEventRecord(ev[1], stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(ev[1]);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&t, ev[0], ev[1]);
    if (e != cudaSuccess) goto cuda_error;
    if (runs <= 0) { /* about 1 ms per round, from the warm-up's time */
        runs = t > 0.02f ? (int)ceil(1.0 / t) : 50;
        if (runs > 50) runs = 50;
    }
    double best = INFINITY;
    for (int round = 0; round < 3; round++) {
        if ((e = cudaEventRecord(ev[0], stream)) != cudaSuccess) goto cuda_error;
        for (int i = 0; i < runs; i++)
            if (run(ctx, pl, stream, why, whylen)) {
                cudaStreamSynchronize(stream);
                return 1;
            }
        if ((e = cudaEventRecord(ev[1], stream)) != cudaSuccess || (e = cudaEventSynchronize(ev[1])) != cudaSuccess ||
            (e = cudaEventElapsedTime(&t, ev[0], ev[1])) != cudaSuccess)
            goto cuda_error;
        if (t / runs < best) best = t / runs;
    }
    *ms = best;
    return 0;
cuda_error:
    put(why, whylen, "CUDA error while timing %s: %s", pl->engine, cudaGetErrorString(e));
    return -1;
}

/* Keeps the fastest candidate: sets the plan's execution plan, engine, workspace; destroys
 * the others' execution plans. 0, or -1 with why. */
int sdpa_keep_candidate(attn_cudnn_plan *pl, int best, char *why, size_t whylen) {
    candidate *cb = &pl->cands[best];
    pl->exec_plan = cb->plan;
    snprintf(pl->engine, sizeof pl->engine, "%s", cb->tag);
    pl->engine_id = cb->engine_id;
    pl->chosen_rank = best;
    pl->best_ms = cb->ms > 0 ? cb->ms : 0;
    pl->first_ms = pl->cands[0].ms > 0 ? pl->cands[0].ms : 0;
    for (int i = 0; i < pl->n_cands; i++)
        if (i != best) drop_desc(pl, pl->cands[i].plan);
    pl->n_cands = 0;
    if (pl->bwd) { /* its workspace is the run's (sized for the largest candidate) */
        pl->workspace_size = cb->workspace;
        return 0;
    }
    if (cb->workspace != pl->workspace_size) { /* the chosen one needs less than the largest */
        if (pl->workspace) cudaFree(pl->workspace); /* synchronizes the device */
        pl->workspace = NULL;
        pl->workspace_size = cb->workspace;
        if (cb->workspace > 0) {
            cudaError_t e = cudaMalloc(&pl->workspace, (size_t)cb->workspace);
            if (e != cudaSuccess) {
                pl->workspace = NULL;
                put(why, whylen, "cudaMalloc(workspace of %s, %lld bytes): %s", cb->tag, (long long)cb->workspace,
                    cudaGetErrorString(e));
                return -1;
            }
        }
    }
    return 0;
}

/* Runs every candidate (run(ctx, ...)) and keeps the fastest (cudnn-frontend's autotune,
 * with rounds of back-to-back runs). 0; 1 when none ran (reason in why); -1 on a CUDA error. */
int sdpa_tune_plan(attn_cudnn_plan *pl, sdpa_run_fn run, void *ctx, cudaStream_t stream, int runs, char *why,
                   size_t whylen) {
    const double t0 = sdpa_now_s();
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t e = cudaEventCreate(&ev[0]);
    if (e == cudaSuccess) e = cudaEventCreate(&ev[1]);
    if (e != cudaSuccess) {
        put(why, whylen, "cudaEventCreate: %s", cudaGetErrorString(e));
        if (ev[0]) cudaEventDestroy(ev[0]);
        return -1;
    }
    char first_fail[1024] = "", msg[1024];
    int best = -1, rc = 0;
    for (int i = 0; i < pl->n_cands; i++) {
        candidate *cd = &pl->cands[i];
        pl->exec_plan = cd->plan;
        snprintf(pl->engine, sizeof pl->engine, "%s", cd->tag);
        msg[0] = 0;
        rc = time_config(pl, run, ctx, stream, runs, ev, &cd->ms, msg, sizeof msg);
        if (rc < 0) {
            put(why, whylen, "%s", msg);
            break;
        }
        if (rc > 0) {
            cd->ms = -1;
            if (!first_fail[0]) snprintf(first_fail, sizeof first_fail, "%s: %s", cd->tag, msg);
            rc = 0;
            continue;
        }
        pl->configs_timed++;
        if (best < 0 || cd->ms < pl->cands[best].ms) best = i;
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    pl->tune_s = sdpa_now_s() - t0;
    if (rc < 0) return -1;
    if (best < 0) {
        put(why, whylen, "none of the %d execution plans ran; first failure: %s", pl->n_cands, first_fail);
        return 1;
    }
    return sdpa_keep_candidate(pl, best, why, whylen);
}
