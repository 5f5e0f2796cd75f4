/* Which problems a kernel takes (attn_kernel_lacks, declared in registry.h): its dtypes,
 * head dims and ATTN_CAP_* bits against what a problem needs. Free of CUDA calls, as
 * plugin.c is. */
#include <stdarg.h>
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

const char *attn_kernel_lacks(const attn_kernel *k, const attn_fwd_params *p, char *buf,
                              size_t len) {
    uint32_t dtypes = k->dtypes ? k->dtypes : (1u << ATTN_F16) | (1u << ATTN_BF16);
    if ((unsigned)p->dtype >= 32 || !(dtypes & (1u << p->dtype)))
        return lacks(buf, len, k, "dtype %s: not in its dtypes (0x%x)",
                     p->dtype == ATTN_F16 ? "fp16" : p->dtype == ATTN_BF16 ? "bf16" : "(unknown)",
                     (unsigned)dtypes);

    char dims[128];
    const int hdv = p->head_dim_v && p->head_dim_v != p->head_dim; /* a separate V width */
    const struct { const char *field; int value, check; } dim[] = {
        {"head_dim", p->head_dim, 1},
        {"head_dim_v", p->head_dim_v, hdv},
    };
    for (size_t i = 0; i < sizeof dim / sizeof dim[0]; i++)
        if (dim[i].check && !takes_head_dim(k->head_dims, dim[i].value))
            return lacks(buf, len, k, "%s %d: its head_dims are %s", dim[i].field, dim[i].value,
                         head_dim_list(k->head_dims, dims, sizeof dims));

    /* causal is window_right 0 already: only a bound beyond that needs ATTN_CAP_WINDOW */
    const int window = p->window_left >= 0 ||
                       (p->window_right >= 0 && !(p->causal && p->window_right == 0));
    const int varlen = p->cu_seqlens_q || p->cu_seqlens_k;
/* p needs capability cap when cond holds; the reason describes the need with p's values */
#define NEED(cap, cond, fmt, ...)      \
    if ((cond) && !(k->caps & (cap))) \
    return lacks(buf, len, k, fmt ": " #cap " not in its caps", __VA_ARGS__)
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
