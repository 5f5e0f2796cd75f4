/* The cuDNN baseline's kernel cache: a plan may ask (attn_cudnn_plan_opts.kernel_cache) for
 * its operation graph to be a dynamic-shape graph whose execution plans share the handle's
 * kernel cache, as cudnn-frontend's graph.set_dynamic_shape_enabled(true) +
 * set_kernel_cache(cache) do: the first plan of a topology compiles its kernel, later plans
 * of the same topology (other sizes and strides) bind the compiled one. Backend attributes
 * (cuDNN >= 9.5): CUDNN_ATTR_OPERATIONGRAPH_IS_DYNAMIC_SHAPE_ENABLED on the operation graph,
 * a CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR bound to an operation graph
 * (CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH) and finalized once, and
 * CUDNN_ATTR_EXECUTION_PLAN_KERNEL_CACHE on every execution plan. Where cuDNN refuses the
 * dynamic graph (an engine without dynamic shapes), the plan is today's static graph. */
#include "cudnn_sdpa_internal.h"

#include <string.h>

const char *sdpa_kc_skip(const attn_cudnn *c, int want, int form) {
    if (!want) return "off";
    if (c->version < KCACHE_MIN_VERSION) return "not tried: cuDNN < 9.5 binds no kernel cache to an operation graph";
    if (form == FORM_SDPA_OP)
        return "not tried: the single SDPA operation takes no dynamic shapes (cudnn-frontend refuses them)";
    if (c->kcache_why[0]) return c->kcache_why;
    return NULL;
}

/* Takes descriptor d out of the plan's list without destroying it (the handle keeps it). */
static void disown(attn_cudnn_plan *pl, void *d) {
    for (int i = pl->n_descs - 1; i >= 0; i--)
        if (pl->descs[i] == d) {
            memmove(&pl->descs[i], &pl->descs[i + 1], (size_t)(pl->n_descs - i - 1) * sizeof *pl->descs);
            pl->n_descs--;
            return;
        }
}

/* The handle's kernel cache, made from the finalized operation graph g (which the handle then
 * keeps: the cache was bound to it). 0, or -1 with why (also kept in c->kcache_why, so that
 * no later plan tries again). */
static int make_cache(builder *b, void *g) {
    attn_cudnn *c = b->c;
    void *kc = NULL;
    char msg[400];
    cudnn_status st = c->f.CreateDescriptor(CUDNN_BACKEND_KERNEL_CACHE_DESCRIPTOR, &kc);
    if (st != CUDNN_STATUS_SUCCESS || !kc) {
        sdpa_msg(c, msg, sizeof msg, st, "cudnnBackendCreateDescriptor", "kernel cache", NULL);
        kc = NULL;
    } else if ((st = c->f.SetAttribute(kc, CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &g)) != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, msg, sizeof msg, st, "cudnnBackendSetAttribute", "kernel cache",
                 "CUDNN_ATTR_KERNEL_CACHE_OPERATION_GRAPH");
    } else if ((st = c->f.Finalize(kc)) != CUDNN_STATUS_SUCCESS) {
        sdpa_msg(c, msg, sizeof msg, st, "cudnnBackendFinalize", "kernel cache", NULL);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        if (kc) c->f.DestroyDescriptor(kc);
        snprintf(c->kcache_why, sizeof c->kcache_why, "not tried: the kernel cache could not be made: %s", msg);
        put(b->why, b->whylen, "%s", c->kcache_why);
        return -1;
    }
    disown(b->pl, g);
    c->kcache = kc;
    c->kcache_graph = g;
    return 0;
}

int sdpa_kcache_bind(builder *b, void *g) {
    return b->c->kcache ? 0 : make_cache(b, g);
}

/* One graph form into b->pl (the builders of cudnn_graph.c and cudnn_graph_bwd.c). */
static int build_form(builder *b, const problem *pr, int form, bool stats_out) {
    b->pl->n_uids = 0;
    if (form == FORM_SDPA_OP) return sdpa_graph_op(b, pr, stats_out);
    if (form == FORM_COMPOSITE) return sdpa_graph_composite(b, pr, stats_out);
    return sdpa_graph_bwd(b, pr);
}

/* Undoes a failed graph attempt: its descriptors, graph inputs and candidates. */
static void undo(attn_cudnn_plan *pl, int mark) {
    sdpa_rollback(pl, mark);
    pl->n_uids = 0;
    pl->exec_plan = NULL;
    pl->n_cands = 0;
}

int sdpa_build_graph(builder *b, const problem *pr, int form, bool stats_out) {
    attn_cudnn_plan *pl = b->pl;
    const int mark = pl->n_descs;
    const char *skip = sdpa_kc_skip(b->c, pl->kc_want, form);
    pl->kc_used = 0;
    if (!skip) {
        char msg[4096] = "";
        builder d = *b;
        d.why = msg, d.whylen = sizeof msg, d.dynamic = 1;
        const double t0 = sdpa_now_s();
        if (!build_form(&d, pr, form, stats_out)) {
            pl->kc_used = 1;
            snprintf(pl->kc_note, sizeof pl->kc_note, "used");
            return 0;
        }
        undo(pl, mark);
        pl->kc_fail_s += sdpa_now_s() - t0;
        snprintf(pl->kc_note, sizeof pl->kc_note, "refused by cuDNN (the static graph taken): %.200s", msg);
    } else {
        snprintf(pl->kc_note, sizeof pl->kc_note, "%.250s", skip);
    }
    if (!build_form(b, pr, form, stats_out)) return 0;
    undo(pl, mark);
    return -1;
}
