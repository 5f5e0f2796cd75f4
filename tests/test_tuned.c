/* The tuned-file parser's buffer API (harness/tuned.h), as attn_shapes --tuned and the fuzz
 * target call it; the file cases under tests/tuned/ run it through the configure step's path. */
#include "unit.h"
#include <stdio.h>
#include <string.h>

#include "tuned.h"

#define GOOD                                                                                                 \
    "# tuned on the H100 \\\r\n"                                                                            \
    "gpu NVIDIA Test GPU\r\n"                                                                                \
    "k fp16 d128 full 513-1024 b=2 a=4  # 1.05x\n"                                                           \
    "other bf16 d64 causal 1-128 tile=-3\n"                                                                  \
    "\n"                                                                                                     \
    "k bf16 d64 causal 1-2147483647 a=8 b=-1\n"

typedef struct {
    int n;
    char rows[4][128];
} seen;

static void collect(void *user, const attn_tuned_entry *e) {
    seen *s = user;
    ck_assert_int_lt(s->n, 4);
    snprintf(s->rows[s->n++], sizeof s->rows[0], "%s|%s|%d|%d|%d|%d|%d,%d", e->gpu, e->dtype, e->head_dim, e->causal,
             e->seqlen_lo, e->seqlen_hi, e->values[0], e->values[1]);
}

static attn_tuned_spec spec_of(const char *text) {
    attn_tuned_spec spec;
    char err[256];
    ck_assert_msg(attn_tuned_spec_parse(text, &spec, err, sizeof err) == 0, "%s", err);
    return spec;
}

START_TEST(good_file) {
    attn_tuned_spec spec = spec_of("a=4|8,b");
    seen s = {0};
    char err[256];
    ck_assert_msg(attn_tuned_parse(GOOD, sizeof GOOD - 1, "x.tuned.txt", "k", &spec, collect, &s, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_int_eq(s.n, 2);
    ck_assert_str_eq(s.rows[0], "NVIDIA Test GPU|fp16|128|0|513|1024|4,2");
    ck_assert_str_eq(s.rows[1], "NVIDIA Test GPU|bf16|64|1|1|2147483647|8,-1");
    ck_assert_int_eq(attn_tuned_parse(GOOD, sizeof GOOD - 1, "x", "none", &spec, NULL, NULL, err, sizeof err), 0);
}
END_TEST

static void expect_error(const char *text, size_t len, const char *spec_text, const char *expect) {
    attn_tuned_spec spec = spec_of(spec_text);
    seen s = {0};
    char err[512] = "";
    ck_assert_int_ne(attn_tuned_parse(text, len, "x.tuned.txt", "k", &spec, collect, &s, err, sizeof err), 0);
    ck_assert_msg(strstr(err, expect) == err, "expected '%s' at the start of '%s'", expect, err);
    ck_assert_int_eq(s.n, 0);
}
#define EXPECT_ERROR(text, spec, expect) expect_error(text, sizeof text - 1, spec, expect)

START_TEST(refused) {
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=4\0\n", "a", "x.tuned.txt:2: a NUL byte: not a text file");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=1\n", "a=0", "x.tuned.txt:2: k: a=1 is not one of 0");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=-2147483649\n", "a", "x.tuned.txt:2: a=-2147483649 does not fit in an int");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=01\n", "a", "x.tuned.txt:2: expected <tunable>=<integer>, got 'a=01'");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=1 a=1\n", "a", "x.tuned.txt:2: tunable 'a' given twice");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 b=1\n", "a,b", "x.tuned.txt:2: k: tunable 'a' missing (it takes: a;b)");
    EXPECT_ERROR("gpu G\ngpu H\n", "a", "x.tuned.txt:2: a second 'gpu' line (one GPU per file)");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2 a=1 ; b=2\n", "a", "x.tuned.txt:2: unexpected ';', '[' or ']'");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2\n", "a", "x.tuned.txt:2: expected '<kernel> <fp16|bf16> d<D>");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2-3 a=1\n", "a", "x.tuned.txt:2: expected '<kernel> <fp16|bf16> d<D>");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 0-2 a=1\n", "a", "x.tuned.txt:2: expected '<kernel> <fp16|bf16> d<D>");
    EXPECT_ERROR("gpu G\nk fp16 d64 full 1-2\va=1\n", "a", "x.tuned.txt:2: expected '<kernel> <fp16|bf16> d<D>");
}
END_TEST

/* Entries before the first error are handed over; none after it. */
START_TEST(stops_at_the_first_error) {
    const char text[] = "gpu G\nk fp16 d64 full 1-2 a=1\nk fp16 d64 full 3-2 a=1\nk fp16 d64 full 5-6 a=1\n";
    attn_tuned_spec spec = spec_of("a");
    seen s = {0};
    char err[256];
    ck_assert_int_ne(attn_tuned_parse(text, sizeof text - 1, "f", "k", &spec, collect, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "f:3: seqlen range 3-2: lo > hi");
    ck_assert_int_eq(s.n, 1);
}
END_TEST

START_TEST(spec) {
    attn_tuned_spec spec = spec_of("warps=4|8,row_tiles,block_n=-32|0|128");
    ck_assert_int_eq(spec.n, 3);
    ck_assert_str_eq(spec.tunable[1].name, "row_tiles");
    ck_assert_int_eq(spec.tunable[1].n_allowed, 0);
    ck_assert_int_eq(spec.tunable[2].allowed[0], -32);
    ck_assert_int_eq(spec.tunable[2].n_allowed, 3);
    const char *bad[] = {"a=4|x", "a,a", "A", "a=", "a=4|", "a=08", "a=2147483648", ",a",
                         "a_name_of_thirty_two_characters_",
                         "a=1|2|3|4|5|6|7|8|9|10|11|12|13|14|15|16|17|18|19|20|21|22|23|24|25|26|27|28|29|30|31|32|33",
                         "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"};
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(attn_tuned_spec_parse(bad[i], &spec, err, sizeof err) != 0, "'%s' taken", bad[i]);
    ck_assert_int_eq(attn_tuned_spec_parse("", &spec, err, sizeof err), 0);
    ck_assert_int_eq(spec.n, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("tuned");
    TCase *c = tcase_create("parser");
    tcase_add_test(c, good_file);
    tcase_add_test(c, refused);
    tcase_add_test(c, stops_at_the_first_error);
    tcase_add_test(c, spec);
    suite_add_tcase(s, c);
    return attn_unit_run(s);
}
