/* The host side of a batch of sequences of different lengths: cu_seqlens for packed rows
 * and, for paged K/V, a pool of pages with a shuffled block table (attn_abi.h's layouts), so
 * that a kernel assuming equal lengths, contiguous pages or a page boundary it did not read
 * from page_size is wrong on them; and the block table as serving engines lay it out
 * (attn_seqs_serving), so that one reading past a sequence's pages, or taking a length from
 * the table's width, is wrong too. CUDA-free: the suites upload what this builds. */
#ifndef ATTN_SEQS_H
#define ATTN_SEQS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int batch;
    int32_t *cu_seqlens_q, *cu_seqlens_k; /* [batch + 1], from 0 */
    int max_q, max_k;                     /* the longest sequence's lengths */
    int64_t total_q, total_k;             /* rows of the packed tensors */
    /* paged (page_size > 0): sequence b's key j is in page block_table[b * stride + j / page_size] */
    int page_size, block_table_stride, num_pages;
    int32_t *block_table;                 /* [batch][block_table_stride]; NULL when not paged */
} attn_seqs;

/* Builds the layout of `batch` sequences of len_q[b] queries and len_k[b] keys (0 allowed).
 * page_size > 0 also builds the pool: every sequence's blocks get distinct pages, in an
 * order shuffled by `seed`, among num_pages = the blocks needed + `spare_pages` (never read).
 * Entries past a sequence's blocks are -1. 0, or 1 with the reason in err. */
int attn_seqs_make(attn_seqs *s, int batch, const int *len_q, const int *len_k, int page_size, int spare_pages,
                   uint64_t seed, char *err, size_t errlen);
/* The block table as serving engines (vLLM, SGLang, FlashInfer) allocate it: a fixed number
 * of columns per sequence, here between 1.5 and 2.5 times the longest sequence's pages (at
 * least one more), chosen by `seed`, so that block_table_stride * page_size is never the
 * stored length; every entry past a sequence's pages, which attn_abi.h says no kernel reads,
 * holds what such an engine leaves there: -1, a stale page of the pool (often another
 * sequence's), an id just past the pool or one from ATTN_SEQS_FAR_PAGE on (any read of that
 * page faults), each kind from `seed`, all four when the table has four such entries. The
 * pages a sequence uses are kept. 0, or 1 with the reason in err (s unchanged). */
enum { ATTN_SEQS_FAR_PAGE = 1 << 30 };
int attn_seqs_serving(attn_seqs *s, uint64_t seed, char *err, size_t errlen);
void attn_seqs_free(attn_seqs *s);

#ifdef __cplusplus
}
#endif
#endif
