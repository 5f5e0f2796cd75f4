/* The shapes parser (harness/shapes.c): what a good file gives (axes, sizes, shapes in their
 * order, packed batches, the cases in the cross product's order) and, for every rule, the
 * message "<file>:<line>: <what was expected>" of a file that breaks it. */
#include "unit.h"
#include <stdio.h>
#include <string.h>

#include "shapes.h"

static attn_shape_matrix m;
static char err[512];

static int parse(const char *text) { return attn_shapes_parse(text, "t.txt", &m, err, sizeof err); }

#define HEAD "dtype fp16\nhead_dim 64\nmask full\n"

START_TEST(good_file) {
    /* a shape line before the seqlen line: every seqlen value still comes first */
    ck_assert_msg(!parse("# a comment; [with] brackets\n"
                         "dtype    fp16 bf16   # trailing comment\n"
                         "\thead_dim 64 192x128\r\n"
                         "mask full causal\n"
                         "shape 3 5\n"
                         "shape 4 4\n"
                         "batch 2\nheads 8\nheads_k 8 2\nwindow -1:-1 16:0\nsoftcap 0 30.5\npage_size 0 64\n"
                         "seqlen 4 17\n"
                         "sequences 1x239 0x17\n"),
                  "%s", err);
    ck_assert_int_eq(m.axis[ATTN_SHAPES_DTYPE].n, 2);
    ck_assert_str_eq(m.axis[ATTN_SHAPES_DTYPE].value[1], "bf16");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_HEAD_DIM].value[1], "192x128");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_MASK].value[1], "causal");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_HEADS_K].value[1], "2");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_WINDOW].value[0], "-1:-1");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_SOFTCAP].value[1], "30.5");
    ck_assert_str_eq(m.axis[ATTN_SHAPES_PAGE_SIZE].value[1], "64");
    ck_assert_int_eq(m.batch, 2);
    ck_assert_int_eq(m.heads, 8);
    ck_assert_int_eq(m.tokens, 0);
    ck_assert_int_eq(m.hidden, 0);
    ck_assert_int_eq(m.n_shapes, 4);
    const char *names[] = {"s4", "s17", "q3k5", "q4k4"}; /* a shape line with Q = K keeps q<Q>k<K> */
    for (int i = 0; i < 4; i++) ck_assert_str_eq(m.shape[i].name, names[i]);
    ck_assert_int_eq(m.shape[2].seqlen_q, 3);
    ck_assert_int_eq(m.shape[2].seqlen_k, 5);
    ck_assert_int_eq(m.n_batches, 1);
    ck_assert_int_eq(m.packed[0].n, 2);
    ck_assert_str_eq(m.packed[0].text, "1x239+0x17");
    ck_assert_int_eq(m.packed[0].seqlen_q[1], 0);
    ck_assert_int_eq(m.packed[0].seqlen_k[1], 17);
}
END_TEST

START_TEST(cases_in_order) {
    ck_assert_msg(!parse("dtype fp16 bf16\nhead_dim 64 128\nmask full causal\nbatch 1\nheads 1\nseqlen 4\nshape 1 9\n"),
                  "%s", err);
    ck_assert_int_eq(attn_shapes_n_cases(&m), 16);
    int rows[16 * ATTN_SHAPES_CASE_AXES];
    ck_assert_int_eq(attn_shapes_cases(&m, rows, 16), 16);
    /* dtype slowest, the shape fastest, as cmake/shapes.cmake's loops gave them */
    for (int r = 0; r < 16; r++) {
        const int *c = rows + r * ATTN_SHAPES_CASE_AXES;
        ck_assert_int_eq(c[0], r / 8);
        ck_assert_int_eq(c[1], r / 4 % 2);
        ck_assert_int_eq(c[2], r / 2 % 2);
        ck_assert_int_eq(c[3], r % 2);
    }
    ck_assert_int_eq(attn_shapes_cases(&m, rows, 15), -1);
    /* packed batches only: no dense case */
    ck_assert_msg(!parse(HEAD "batch 1\nheads 1\nsequences 1x1\n"), "%s", err);
    ck_assert_int_eq(attn_shapes_n_cases(&m), 0);
    ck_assert_int_eq(attn_shapes_cases(&m, rows, 16), 0);
}
END_TEST

START_TEST(tokens_and_hidden) {
    ck_assert_msg(!parse(HEAD "tokens 1073741824\nhidden 2048\nseqlen 4\n"), "%s", err);
    ck_assert_int_eq(m.tokens, 1 << 30);
    ck_assert_int_eq(m.hidden, 2048);
    ck_assert_int_eq(m.batch, 0);
    ck_assert_int_eq(m.heads, 0);
}
END_TEST

/* Each malformed text and the start of its message. */
static const struct {
    const char *text, *expect;
} bad[] = {
    {"dtype fp32\n", "t.txt:1: dtype: expected fp16 or bf16, got 'fp32'"},
    {"mask full diagonal\n", "t.txt:1: mask: expected full or causal, got 'diagonal'"},
    {"\n\nseqlen 4 x7\n", "t.txt:3: seqlen: expected positive integers up to 16777216, got 'x7'"},
    {"seqlen 0\n", "t.txt:1: seqlen: expected positive integers up to 16777216, got '0'"},
    {"seqlen 016\n", "t.txt:1: seqlen: expected positive integers up to 16777216, got '016'"},
    {"seqlen 16777217\n", "t.txt:1: seqlen: expected positive integers up to 16777216, got '16777217'"},
    {"tokens 1073741825\n", "t.txt:1: tokens: expected positive integers up to 1073741824, got '1073741825'"},
    {"batch 2 3\n", "t.txt:1: batch: expected exactly one value"},
    {"heads\n", "t.txt:1: 'heads': expected at least one value"},
    {"shape 3\n", "t.txt:1: shape: expected two values, <seqlen_q> <seqlen_k>"},
    {"shape 3 16777217\n", "t.txt:1: shape: expected positive integers up to 16777216, got '16777217'"},
    {"head_dim 64 192x\n", "t.txt:1: head_dim: expected D or DxDV, got '192x'"},
    {"head_dim 64x64x64\n", "t.txt:1: head_dim: expected D or DxDV, got '64x64x64'"},
    {"head_dim 192x0\n", "t.txt:1: head_dim: expected positive integers up to 16777216, got '0'"},
    {"window -1:-1 16\n", "t.txt:1: window: expected L:R, each -1 or a bound >= 0, got '16'"},
    {"window -2:0\n", "t.txt:1: window: expected L:R, each -1 or a bound >= 0, got '-2:0'"},
    {"softcap 0 -30\n", "t.txt:1: softcap: expected a number >= 0, got '-30'"},
    {"softcap 30.\n", "t.txt:1: softcap: expected a number >= 0, got '30.'"},
    {"page_size 1.5\n", "t.txt:1: page_size: expected 0 or a page size, got '1.5'"},
    {"window 16777217:0\n", "t.txt:1: window: expected L:R, each -1 or a bound >= 0 up to 16777216, got '16777217:0'"},
    {"window -1:99999999999999999999\n", "t.txt:1: window: expected L:R, each -1 or a bound >= 0 up to 16777216, got"},
    {"page_size 0 16777217\n", "t.txt:1: page_size: expected 0 or a page size up to 16777216, got '16777217'"},
    {"softcap 1000000.5\n", "t.txt:1: softcap: expected a number >= 0 up to 1e6, got '1000000.5'"},
    {"heads_k 16777217\n", "t.txt:1: heads_k: expected positive integers up to 16777216, got '16777217'"},
    {"sequences 1x5 17\n", "t.txt:1: sequences: expected QxK per sequence, got '17'"},
    {"sequences 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1 1x1\n",
     "t.txt:1: sequences: at most 16 sequences in one batch"},
    {"sequences 16777217x1\n", "t.txt:1: sequences: expected lengths up to 16777216, got '16777217x1'"},
    {"sequence 4\n", "t.txt:1: unknown key 'sequence': expected dtype, head_dim, mask, batch, heads, tokens, hidden, "
                     "seqlen, heads_k, window, softcap, page_size, shape or sequences"},
    {"mask full\nmask causal\n", "t.txt:2: 'mask' given twice"},
    {"seqlen 4; 5\n", "t.txt:1: unexpected ';', '[' or ']': values are separated by spaces"},
    {"window 0:123456789012345678901234\n", "t.txt:1: window: '0:123456789012345678901234' is longer than 23"},
    {"head_dim 64\nmask full\nbatch 2\nheads 3\nseqlen 4\n", "t.txt: missing the 'dtype' line"},
    {HEAD "batch 2\nseqlen 4\n", "t.txt: 'batch' given without 'heads'"},
    {HEAD "hidden 2\nseqlen 4\n", "t.txt: 'hidden' given without 'tokens'"},
    {HEAD "seqlen 4\n", "t.txt: missing the 'heads' line (give batch and heads, or tokens and hidden)"},
    {HEAD "batch 2\nheads 3\n", "t.txt: no shapes: expected a 'seqlen', 'shape' or 'sequences' line"},
    {HEAD "batch 2\nheads 8\nheads_k 8 3\nseqlen 4\n", "t.txt: heads_k 3 does not divide heads 8"},
    {HEAD "tokens 64\nhidden 8\nheads_k 8\nseqlen 4\n", "t.txt: heads_k needs 'batch' and 'heads'"},
};

START_TEST(bad_file) {
    ck_assert_msg(parse(bad[_i].text), "'%s' parsed", bad[_i].text);
    ck_assert_msg(!strncmp(err, bad[_i].expect, strlen(bad[_i].expect)), "expected '%s', got '%s'", bad[_i].expect, err);
}
END_TEST

/* The CMake parser this one replaced joined a comment ending in '\\' with the next line (a
 * CMake list's escaped ';'), and the shape on it was lost. */
START_TEST(comment_ending_in_backslash) {
    ck_assert_msg(!parse(HEAD "batch 1\nheads 1\n# the long ones \\\nseqlen 4 8 # \\\nshape 3 5 # \\\nsequences 1x2\n"), "%s", err);
    ck_assert_int_eq(m.n_shapes, 3);
    ck_assert_int_eq(m.n_batches, 1);
}
END_TEST

START_TEST(limits) {
    char text[4096];
    int n = snprintf(text, sizeof text, HEAD "batch 1\nheads 1\nseqlen");
    for (int i = 1; i <= ATTN_SHAPES_MAX_VALUES + 1; i++) n += snprintf(text + n, sizeof text - n, " %d", i);
    ck_assert_msg(!parse(text), "%s", err); /* seqlen values are shapes, up to ATTN_SHAPES_MAX_SHAPES */
    n = snprintf(text, sizeof text, "heads_k");
    for (int i = 1; i <= ATTN_SHAPES_MAX_VALUES + 1; i++) n += snprintf(text + n, sizeof text - n, " 1");
    ck_assert(parse(text));
    ck_assert_str_eq(err, "t.txt:1: heads_k: at most 64 values");
}
END_TEST

START_TEST(read_file) {
    char path[64];
    attn_unit_temp_file(path, HEAD "batch 2\nheads 3\nseqlen 4\n");
    ck_assert_msg(!attn_shapes_read(path, &m, err, sizeof err), "%s", err);
    ck_assert_int_eq(m.n_shapes, 1);
    unlink(path);
    ck_assert(attn_shapes_read(path, &m, err, sizeof err));
    char expect[128];
    snprintf(expect, sizeof expect, "%s: shapes file not found", path);
    ck_assert_str_eq(err, expect);
    ck_assert(attn_shapes_read("/", &m, err, sizeof err));
    ck_assert_str_eq(err, "/: cannot read: Is a directory");
}
END_TEST

int main(void) {
    Suite *s = suite_create("shapes");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, comment_ending_in_backslash);
    tcase_add_test(tc, good_file);
    tcase_add_test(tc, cases_in_order);
    tcase_add_test(tc, tokens_and_hidden);
    tcase_add_loop_test(tc, bad_file, 0, (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, limits);
    tcase_add_test(tc, read_file);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
