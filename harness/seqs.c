/* Sequences of different lengths, packed and paged (seqs.h). */
#include "seqs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

void attn_seqs_free(attn_seqs *s) {
    free(s->cu_seqlens_q);
    free(s->cu_seqlens_k);
    free(s->block_table);
    memset(s, 0, sizeof *s);
}

/* cu[b + 1] = cu[b] + len[b]; the longest length and the total, or 1 when they overflow. */
static int prefix_sums(const int *len, int batch, int32_t *cu, int *max, int64_t *total) {
    cu[0] = 0;
    *max = 0;
    for (int b = 0; b < batch; b++) {
        if (len[b] < 0 || (int64_t)cu[b] + len[b] > INT32_MAX) return 1;
        cu[b + 1] = cu[b] + len[b];
        if (len[b] > *max) *max = len[b];
    }
    *total = cu[batch];
    return 0;
}

/* The block table: the needed pages drawn without replacement from a shuffled pool. */
static int make_pages(attn_seqs *s, const int *len_k, int spare, uint64_t seed) {
    int needed = 0;
    s->block_table_stride = s->max_k > 0 ? (s->max_k + s->page_size - 1) / s->page_size : 1;
    for (int b = 0; b < s->batch; b++) needed += (len_k[b] + s->page_size - 1) / s->page_size;
    s->num_pages = needed + spare > 0 ? needed + spare : 1;
    int32_t *pool = malloc(sizeof *pool * (size_t)s->num_pages);
    s->block_table = malloc(sizeof *s->block_table * (size_t)s->batch * (size_t)s->block_table_stride);
    if (!pool || !s->block_table) {
        free(pool);
        return 1;
    }
    for (int i = 0; i < s->num_pages; i++) pool[i] = i;
    attn_rng rng;
    attn_rng_init(&rng, seed);
    for (int i = s->num_pages - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(attn_rng_u64(&rng) % (uint64_t)(i + 1));
        int32_t t = pool[i];
        pool[i] = pool[j], pool[j] = t;
    }
    int next = 0;
    for (int b = 0; b < s->batch; b++) {
        int blocks = (len_k[b] + s->page_size - 1) / s->page_size;
        for (int i = 0; i < s->block_table_stride; i++)
            s->block_table[(size_t)b * s->block_table_stride + i] = i < blocks ? pool[next++] : -1;
    }
    free(pool);
    return 0;
}

int attn_seqs_make(attn_seqs *s, int batch, const int *len_q, const int *len_k, int page_size, int spare_pages,
                   uint64_t seed, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (batch < 1 || page_size < 0 || spare_pages < 0) {
        snprintf(err, errlen, "sequences: batch %d, page_size %d, spare_pages %d (need >= 1, >= 0, >= 0)", batch,
                 page_size, spare_pages);
        return 1;
    }
    s->batch = batch;
    s->page_size = page_size;
    s->cu_seqlens_q = malloc(sizeof(int32_t) * (size_t)(batch + 1));
    s->cu_seqlens_k = malloc(sizeof(int32_t) * (size_t)(batch + 1));
    if (!s->cu_seqlens_q || !s->cu_seqlens_k) {
        attn_seqs_free(s);
        snprintf(err, errlen, "sequences: out of host memory");
        return 1;
    }
    if (prefix_sums(len_q, batch, s->cu_seqlens_q, &s->max_q, &s->total_q) ||
        prefix_sums(len_k, batch, s->cu_seqlens_k, &s->max_k, &s->total_k)) {
        attn_seqs_free(s);
        snprintf(err, errlen, "sequences: a length is negative or the lengths add up past 2^31 - 1");
        return 1;
    }
    if (page_size > 0 && make_pages(s, len_k, spare_pages, seed)) {
        attn_seqs_free(s);
        snprintf(err, errlen, "sequences: out of host memory for the block table");
        return 1;
    }
    return 0;
}

/* What a serving engine leaves in the entries past a sequence's pages. */
enum { PAST_NONE, PAST_STALE, PAST_POOL_END, PAST_FAR, PAST_KINDS };

static int32_t past_entry(int kind, int num_pages, attn_rng *rng) {
    const uint64_t r = attn_rng_u64(rng);
    /* just past the pool: from num_pages on, below the far ids */
    const int64_t room = (int64_t)ATTN_SEQS_FAR_PAGE - num_pages, span = num_pages < room ? num_pages : room;
    if (kind == PAST_POOL_END && span > 0) return (int32_t)(num_pages + (int64_t)(r % (uint64_t)span));
    if (kind == PAST_POOL_END || kind == PAST_FAR)
        return (int32_t)(ATTN_SEQS_FAR_PAGE + (int64_t)(r % ATTN_SEQS_FAR_PAGE));
    return kind == PAST_STALE ? (int32_t)(r % (uint64_t)num_pages) : -1;
}

int attn_seqs_serving(attn_seqs *s, uint64_t seed, char *err, size_t errlen) {
    if (!s->block_table) {
        snprintf(err, errlen, "sequences: a serving engine's block table needs pages (page_size %d)", s->page_size);
        return 1;
    }
    attn_rng rng;
    attn_rng_init(&rng, seed ^ 0x5e7a1c0dedb10cull); /* apart from the pages' shuffle */
    const int64_t blocks = s->block_table_stride; /* the longest sequence's pages (1 without keys) */
    int64_t stride = blocks + blocks / 2 + 1 + (int64_t)(attn_rng_u64(&rng) % (uint64_t)(blocks + 1));
    if (stride * s->page_size > INT32_MAX) stride = INT32_MAX / s->page_size; /* a length in an int */
    if (stride <= blocks) {
        snprintf(err, errlen, "sequences: no room for a spare block-table column (%lld pages of %d rows)",
                 (long long)blocks, s->page_size);
        return 1;
    }
    int32_t *table = malloc(sizeof *table * (size_t)s->batch * (size_t)stride);
    if (!table) {
        snprintf(err, errlen, "sequences: out of host memory for the block table");
        return 1;
    }
    int order[PAST_KINDS] = {PAST_NONE, PAST_STALE, PAST_POOL_END, PAST_FAR};
    for (int i = PAST_KINDS - 1; i > 0; i--) { /* the first entries past the pages: every kind once */
        const int j = (int)(attn_rng_u64(&rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    int64_t past = 0;
    for (int b = 0; b < s->batch; b++) {
        const int64_t used = ((int64_t)s->cu_seqlens_k[b + 1] - s->cu_seqlens_k[b] + s->page_size - 1) / s->page_size;
        for (int64_t i = 0; i < stride; i++) {
            if (i < used) {
                table[b * stride + i] = s->block_table[b * blocks + i];
                continue;
            }
            const int kind = past < PAST_KINDS ? order[past] : (int)(attn_rng_u64(&rng) % PAST_KINDS);
            table[b * stride + i] = past_entry(kind, s->num_pages, &rng);
            past++;
        }
    }
    free(s->block_table);
    s->block_table = table;
    s->block_table_stride = (int)stride;
    return 0;
}
