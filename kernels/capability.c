/* Which problems a kernel takes (attn_kernel_lacks, declared in registry.h): its dtypes,
 * head dims (or head dim pairs) and ATTN_CAP_* bits against what a problem needs. Free of
 * CUDA calls, as plugin.c is. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "registry.h"

/* buf = "kernel '<name>' does not take <what>"; returns buf. */
static const char *lacks(char *buf, size_t len, const attn_kernel *k, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(buf, len, "kernel '%s' does not take %s", k->name, what);
    return buf;
}

/* 1 iff d is in the 0-terminated list (NULL = any) */
static int takes_head_dim(const int *dims, int d) {
    if (!dims) return 1;
    for (; *dims; dims++)
        if (*dims == d) return 1;
    return 0;
}

/* "64, 128" (the list of a kernel's head dims) */
static const char *head_dim_list(const int *dims, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; dims[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%d", i ? ", " : "", dims[i]);
    return buf;
}

/* 1 iff (d, dv) is in the 0-terminated pair list */
static int takes_pair(const int *pairs, int d, int dv) {
    for (; pairs[0]; pairs += 2)
        if (pairs[0] == d && pairs[1] == dv) return 1;
    return 0;
}

/* "64x64, 192x128" (the list of a kernel's head dim pairs) */
static const char *pair_list(const int *pairs, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; pairs[2 * i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%dx%d", i ? ", " : "", pairs[2 * i], pairs[2 * i + 1]);
    return buf;
}

/* The rules of attn_abi.h that decide what p needs (GQA, a window, paged or varlen K/V): a
 * problem that breaks one is invalid, and no kernel takes it, rather than one that declares
 * the capability that the broken field seems to ask for. NULL when none is broken. */
static const char *invalid(const attn_kernel *k, const attn_fwd_params *p, char *buf, size_t len) {
    if (p->heads_k < 1 || p->heads_k > p->heads || p->heads % p->heads_k)
        return lacks(buf, len, k, "an invalid problem: heads_k %d (must be >= 1 and divide heads %d)", p->heads_k,
                     p->heads);
    if (p->causal && p->window_right > 0)
        return lacks(buf, len, k, "an invalid problem: window_right %d with causal (causal means window_right 0)",
                     p->window_right);
    if (p->block_table && p->cu_seqlens_k)
        return lacks(buf, len, k, "an invalid problem: cu_seqlens_k with block_table (a paged problem's lengths "
                     "are seqused_k or seqlen_k)");
    return NULL;
}

/* The head dims: the pair against k->head_dim_pairs when set, else head_dim (and head_dim_v
 * when it differs) against k->head_dims. */
static const char *lacks_head_dims(const attn_kernel *k, const attn_fwd_params *p, char *buf, size_t len) {
    char dims[512];
    if (k->head_dim_pairs) {
        const int dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
        if (takes_pair(k->head_dim_pairs, p->head_dim, dv)) return NULL;
        return lacks(buf, len, k, "the head dim pair %dx%d (head_dim x head_dim_v): its head_dim_pairs are %s",
                     p->head_dim, dv, pair_list(k->head_dim_pairs, dims, sizeof dims));
    }
    const int hdv = p->head_dim_v && p->head_dim_v != p->head_dim; /* a separate V width */
    const struct { const char *field; int value, check; } dim[] = {
        {"head_dim", p->head_dim, 1},
        {"head_dim_v", p->head_dim_v, hdv},
    };
    for (size_t i = 0; i < sizeof dim / sizeof dim[0]; i++)
        if (dim[i].check && !takes_head_dim(k->head_dims, dim[i].value))
            return lacks(buf, len, k, "%s %d: its head_dims are %s", dim[i].field, dim[i].value,
                         head_dim_list(k->head_dims, dims, sizeof dims));
    return NULL;
}

/* What p needs beyond the kernel's caps (its forward's, or its backward's bwd_caps). */
static const char *lacks_problem(const attn_kernel *k, const attn_fwd_params *p, uint32_t caps,
                                 const char *caps_name, char *buf, size_t len);

const char *attn_kernel_lacks(const attn_kernel *k, const attn_fwd_params *p, char *buf,
                              size_t len) {
    return lacks_problem(k, p, k->caps, "caps", buf, len);
}

const char *attn_kernel_lacks_bwd(const attn_kernel *k, const attn_bwd_params *bp, char *buf,
                                  size_t len) {
    if (!k->bwd) return lacks(buf, len, k, "the backward pass: it has no bwd");
    if (bp->fwd->block_table)
        return lacks(buf, len, k, "an invalid problem: paged K/V (block_table) has no backward in ABI version %d",
                     ATTN_ABI_VERSION);
    if (bp->deterministic && !(k->bwd_caps & ATTN_BWD_DETERMINISTIC))
        return lacks(buf, len, k, "a deterministic backward: ATTN_BWD_DETERMINISTIC not in its bwd_caps");
    return lacks_problem(k, bp->fwd, k->bwd_caps, "bwd_caps", buf, len);
}

static const char *lacks_problem(const attn_kernel *k, const attn_fwd_params *p, uint32_t caps,
                                 const char *caps_name, char *buf, size_t len) {
    if (invalid(k, p, buf, len)) return buf;
    uint32_t dtypes = k->dtypes ? k->dtypes : (1u << ATTN_F16) | (1u << ATTN_BF16);
    if ((unsigned)p->dtype >= 32 || !(dtypes & (1u << p->dtype)))
        return lacks(buf, len, k, "dtype %s: not in its dtypes (0x%x)",
                     p->dtype == ATTN_F16 ? "fp16" : p->dtype == ATTN_BF16 ? "bf16" : "(unknown)",
                     (unsigned)dtypes);
    if (lacks_head_dims(k, p, buf, len)) return buf;
    const int hdv = p->head_dim_v && p->head_dim_v != p->head_dim;

    /* causal is window_right 0 already: only a bound beyond that needs ATTN_CAP_WINDOW */
    const int window = p->window_left >= 0 ||
                       (p->window_right >= 0 && !(p->causal && p->window_right == 0));
    const int varlen = p->cu_seqlens_q || p->cu_seqlens_k;
/* p needs capability cap when cond holds; the reason describes the need with p's values */
#define NEED(cap, cond, fmt, ...)  \
    if ((cond) && !(caps & (cap))) \
    return lacks(buf, len, k, fmt ": " #cap " not in its %s", __VA_ARGS__, caps_name)
    NEED(ATTN_CAP_GQA, p->heads_k < p->heads, "grouped KV heads (heads_k %d < heads %d)",
         p->heads_k, p->heads);
    NEED(ATTN_CAP_WINDOW, window, "a sliding window (window_left %d, window_right %d%s)",
         p->window_left, p->window_right, p->causal ? ", causal" : "");
    NEED(ATTN_CAP_SOFTCAP, p->softcap > 0, "a softcap (softcap %g)", (double)p->softcap);
    NEED(ATTN_CAP_HEAD_DIM_V, hdv, "a separate V head dim (head_dim_v %d != head_dim %d)",
         p->head_dim_v, p->head_dim);
    NEED(ATTN_CAP_VARLEN, varlen, "variable lengths (%s)",
         p->cu_seqlens_q && p->cu_seqlens_k ? "cu_seqlens_q and cu_seqlens_k"
         : p->cu_seqlens_q                  ? "cu_seqlens_q"
                                            : "cu_seqlens_k");
    NEED(ATTN_CAP_PAGED, p->block_table != NULL, "paged K/V (block_table, page_size %d)",
         p->page_size);
    NEED(ATTN_CAP_SEQUSED_K, p->seqused_k != NULL, "used key lengths (%s)", "seqused_k");
#undef NEED
    return NULL;
}
