/* The correctness suite: one process per test, each test a list of cases (the cross product
 * of dtypes, head dims, masks and shapes), one Check test case per check of a case, so a
 * failure names its case and its check.
 *
 *   attn_correctness --name correctness/simple/bf16/d128/causal --kernel simple
 *       [--plugin lib.so] --dtype bf16 --head-dim 128 --mask causal --shapes 4,17,1000,1x239
 *       --batch 2 --heads 3 --tolerance thresholds/tolerance.ini
 *   attn_correctness --list-checks      (the check table: name, group, summary)
 *
 * Prints one line per case, "CASE <dtype>/d<D>/<mask>/<shape> passed|FAILED <checks>|
 * KNOWN_DEVIATION <checks>|NOT_SUPPORTED|SKIPPED|NOT_RUN", a tally, and for each failed case the
 * command that reruns it alone (a known deviation: --known-deviations, harness/known_deviations.h).
 * Exit: 0 no case failed and one passed or was a known deviation; 1 a case failed or did not
 * run; 77 no GPU, or no case supported or runnable here (the reasons are printed); 2 bad
 * arguments or a harness error.
 *
 * The files: main.c (arguments, cases, the Check plumbing, the report), context.{h,c} (what
 * a check sees and the helpers it uses), checks_output.c, checks_contract.c, checks_packed.c
 * and checks_inputs.c (the checks), checks.def (the one table of the checks: adding a check
 * is a line there and its function). Problems come from harness/gpu_problem.h only.
 *
 * Isolation: a CUDA context does not survive fork(), so Check runs without forking
 * (CK_NOFORK) inside one child process that runs the cases (harness/supervise.h); a case that
 * crashes it, hangs past --case-timeout or leaves its CUDA context broken fails alone, and a
 * new child runs the cases after it. One process per case would cost a CUDA context each:
 * about 0.13 s, serialized by the driver across processes.
 * Seeds derive from the kernel, the case and the check (never from the grouping);
 * ATTN_SEED=<n> overrides them. CK_RUN_CASE=<check> runs one check. ATTN_CHECK_TIMES=1 prints
 * "TIMES <case>: <check>=<wall seconds> ..." after each case.
 *
 * State: everything a check reads or writes is in one check_ctx, passed to it. Check's test
 * functions take no argument, so they reach it through one pointer (current_ctx), set while
 * a case's Check suite runs; nothing else is file-static and mutable. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "args.h"
#include "attn_abi.h"
#include "context.h"
#include "device_memory.h"
#include "gpu_problem.h"
#include "harness.h"
#include "known_deviations.h"
#include "pairwise.h"
#include "problem.h"
#include "reference.h"
#include "shapes.h"
#include "registry.h"
#include "supervise.h"
#include "verdict.h"

/* --------------------------------------------------------------- the check table ---- */

typedef struct {
    const char *name, *group, *summary;
} check_info;

static const check_info CHECKS[] = {
#define ATTN_CHECK(name, group, summary) {#name, #group, summary},
#include "checks.def"
#undef ATTN_CHECK
};
enum { N_CHECKS = sizeof CHECKS / sizeof CHECKS[0] };
static const char DEFAULT_GROUP[] = "correctness"; /* what runs without --checks */

/* The context of the case whose checks run now (Check's tests take no argument). */
static check_ctx *current_ctx;

/* Records a check's outcome in c; a failure fails the Check test with c's message. */
static void finish(check_ctx *c, const char *check, outcome oc) {
    if (oc == CHECK_UNSUPPORTED) {
        c->n_unsupported++;
        return;
    }
    if (oc != CHECK_PASS) {
        size_t n = strlen(c->failed_checks);
        snprintf(c->failed_checks + n, sizeof c->failed_checks - n, "%s%s", n ? "," : "", check);
    }
    ck_assert_msg(oc == CHECK_PASS, "%s", c->msg);
}

/* Notes a check's wall seconds in c->check_times (ATTN_CHECK_TIMES=1). */
static void note_time(check_ctx *c, const char *check, double s) {
    size_t n = strlen(c->check_times);
    if (c->print_times) snprintf(c->check_times + n, sizeof c->check_times - n, " %s=%.3f", check, s);
}

#define ATTN_CHECK(name, group, summary)                                                        \
    START_TEST(test_##name) {                                                                   \
        const double t0 = attn_wall_s();                                                        \
        const outcome oc = check_##name(current_ctx);                                           \
        note_time(current_ctx, #name, attn_wall_s() - t0);                                      \
        finish(current_ctx, #name, oc);                                                         \
    }                                                                                           \
    END_TEST
#include "checks.def"
#undef ATTN_CHECK

static void list_checks(void) {
    for (int i = 0; i < N_CHECKS; i++) printf("%s %s %s\n", CHECKS[i].name, CHECKS[i].group, CHECKS[i].summary);
}

/* The checks of DEFAULT_GROUP, comma-separated, in the table's order. */
static void default_checks(char *out, size_t len) {
    size_t n = 0;
    out[0] = 0;
    for (int i = 0; i < N_CHECKS; i++)
        if (!strcmp(CHECKS[i].group, DEFAULT_GROUP) && n < len)
            n += snprintf(out + n, len - n, "%s%s", n ? "," : "", CHECKS[i].name);
}

/* 1 iff `name` is an element of the comma-separated `list` */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

/* Whether the comma-separated list names a check of the backward's groups (backward,
 * bwd_contract, bwd_launch): the case is then the backward's, asked of the kernel's bwd. */
static int backward_checks(const char *checks) {
    for (int i = 0; i < N_CHECKS; i++)
        if ((!strcmp(CHECKS[i].group, "backward") || !strncmp(CHECKS[i].group, "bwd_", 4)) &&
            listed(checks, CHECKS[i].name))
            return 1;
    return 0;
}

/* 1 when every check of the list is of group launch (compute-sanitizer's runs) */
static int launch_checks_only(const char *checks) {
    int any = 0;
    for (int i = 0; i < N_CHECKS; i++)
        if (listed(checks, CHECKS[i].name)) {
            if (strcmp(CHECKS[i].group, "launch")) return 0;
            any = 1;
        }
    return any;
}

/* 0, or the first unknown name of the list in `bad` */
static int checks_valid(const char *list, char *bad, size_t badlen) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int known = 0;
        for (int i = 0; i < N_CHECKS; i++) known |= !strcmp(CHECKS[i].name, tok);
        if (!known) {
            snprintf(bad, badlen, "%s", tok);
            return 1;
        }
    }
    return 0;
}

static Suite *make_suite(const char *name, const char *checks) {
    const TTest *tests[N_CHECKS] = {
#define ATTN_CHECK(name, group, summary) test_##name,
#include "checks.def"
#undef ATTN_CHECK
    };
    Suite *s = suite_create(name);
    for (int i = 0; i < N_CHECKS; i++) {
        if (!listed(checks, CHECKS[i].name)) continue;
        TCase *tc = tcase_create(CHECKS[i].name);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

/* ---------------------------------------------------------------------- cases ---- */

/* The axes: those of harness/axes.def (attn_axes, in its order), then the shapes. An axis's
 * option is --<attn_axes[x].option>, its getopt code AXIS_CODE + x. */
enum { AX_SHAPE = ATTN_SHAPES_N_AXES, N_AXES, MAXL = 64, AXIS_CODE = 256 };
enum { ELEM = 96 }; /* the longest list element: a packed batch "QxK+QxK+..." */

/* Where test_case holds each axis's value (axes.def: field, and field2 for a pair's second). */
static const struct {
    size_t at, at2;
} FIELD[ATTN_SHAPES_N_AXES] = {
#define ATTN_AXIS(key, NAME, option, cmake, kind, dflt, label, field, field2)                                    \
    {offsetof(test_case, field), offsetof(test_case, field2)},
#include "axes.def"
#undef ATTN_AXIS
};
_Static_assert(ATTN_F16 == 0 && ATTN_BF16 == 1, "attn_axis_value's dtype index is attn_dtype");

static const char *axis_option(int x) { return x == AX_SHAPE ? "shapes" : attn_axes[x].option; }

typedef struct {
    const char *name; /* CTest test name: messages */
    const char *kernel, *plugin, *tolerance, *checks;
    const char *known_path;  /* --known-deviations FILE, or NULL */
    attn_deviations known;   /* its entries: failures of a kernel we do not own, excused with a reason */
    const char *lists[N_AXES]; /* each axis's list, as given (or its default) */
    char values[N_AXES][MAXL][ELEM]; /* the lists' elements */
    char default_checks[256];
    char heads_text[16]; /* the default of an axis whose default is --heads */
    int in_process, pairwise, list, list_checks;
    int shard, shards; /* --shard K/N: only the cases i with i % N == K (N 1: all) */
    double case_timeout_s;
    test_case *cases;
    int n_cases;
    check_ctx ctx; /* what the checks see (its batch and heads from the command line) */
} suite;

/* The axes' options for the usage text: the required ones (optional 0) or the others. */
static void usage_axes(FILE *out, int optional) {
    for (int x = 0, col = optional ? 8 : 60; x < ATTN_SHAPES_N_AXES; x++) {
        if ((attn_axes[x].dflt != NULL) != optional) continue;
        char o[64];
        int n = snprintf(o, sizeof o, optional ? " [--%s %s[,...]]" : " --%s %s[,...]", attn_axes[x].option,
                         attn_axes[x].kind == ATTN_KIND_COUNT ? "HK" : attn_axis_form(attn_axes[x].kind));
        if (col + n > 100) fprintf(out, "\n        "), col = 8;
        col += fprintf(out, "%s", o);
    }
}

/* The usage text: on stdout for --help (exit 0), after the reason on stderr for a bad
 * command line (exit 2). */
static void usage_text(FILE *out) {
    fprintf(out, "usage: attn_correctness --name NAME --kernel K [--plugin LIB.so]");
    usage_axes(out, 0);
    fprintf(out, "\n         --shapes QxK|S[,...] --batch B --heads H\n        ");
    usage_axes(out, 1);
    fprintf(out, "\n         [--pairwise] [--shard K/N]\n"
                    "         --tolerance FILE.ini [--checks NAME,...] [--case-timeout SECONDS] [--in-process] [--list]\n"
                    "         [--known-deviations FILE]\n"
                    "       attn_correctness --list-checks\n"
                    "cases: the cross product of the lists (S = SxS; D = DxD; causal cases keep only a window's L;\n"
                    "        -1 is unbounded; defaults:");
    for (int x = 0; x < ATTN_SHAPES_N_AXES; x++)
        if (attn_axes[x].dflt) /* "": --heads */
            fprintf(out, " --%s %s", attn_axes[x].option, *attn_axes[x].dflt ? attn_axes[x].dflt : "H");
    fprintf(out, ");\n        --pairwise: the rows of a pairwise covering array of them instead;\n"
            "        --shard K/N: of those, the cases i with i %% N == K (a test split over N processes)\n"
            "packed cases: a shape QxK+QxK+... (sequences of their own lengths, 0 allowed) or a page\n"
            "        size P > 0 (K and V in a shuffled pool of P-row pages) runs only 'packed' and\n"
            "        'inputs_unchanged' (or 'launch' alone, when that is all --checks names)\n"
            "checks: the names --list-checks prints (name, group, summary); by default those of group\n"
            "        correctness; contract: the kernel contract; launch: one fwd, nothing judged (for\n"
            "        compute-sanitizer); packed: a packed case's\n"
            "--in-process: run the cases in this process (for tools that follow one process);\n"
            "        by default a child process runs them, replaced after a crash or a hang\n"
            "--known-deviations: a case that fails only checks an entry of FILE names for this kernel\n"
            "        is a known deviation, not a failure (harness/known_deviations.h; never a built-in)\n"
            "--list: print the cases and exit; --list-checks: print the checks and exit\n"
            "--help, -h: print this and exit\n");
}

static void usage(const char *why) {
    fprintf(stderr, "attn_correctness: %s\n", why);
    usage_text(stderr);
    exit(2);
}

static int positive_arg(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < 1 || v > (1L << 24)) {
        fprintf(stderr, "attn_correctness: %s: expected a positive integer, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

/* The elements of a comma-separated list into out[] (at most max, each under ELEM chars). */
static int split_list(const char *opt, const char *list, char out[][ELEM], int max) {
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= ELEM || n == max) {
            fprintf(stderr, "attn_correctness: %s: bad list '%s'\n", opt, list);
            exit(2);
        }
        memcpy(out[n], p, len);
        out[n++][len] = 0;
        p += len;
        if (!*p) return n;
    }
}

/* "A" or "A<sep>B" (B defaults to A) into two integers, each checked by `value`. */
static void parse_pair(const char *opt, const char *s, char sep, int (*value)(const char *, const char *), int *a,
                       int *b) {
    char first[32];
    size_t len = strcspn(s, (char[]){sep, 0});
    snprintf(first, sizeof first, "%.*s", (int)len, s);
    *a = value(opt, first);
    *b = s[len] ? value(opt, s + len + 1) : *a;
}

/* -1 (unbounded) or a window bound >= 0 */
static int window_arg(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < -1 || v > (1L << 24)) {
        fprintf(stderr, "attn_correctness: %s: expected -1 or a bound >= 0, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

/* A shape "QxK" (or "S"), or sequences "QxK+QxK+..." (a packed batch), into c; its label
 * part ("s17", "q1k239", "q1k239+s0") at l. Returns the label's end. */
static char *parse_shapes(test_case *c, const char *s, char *l, char *end) {
    char buf[96];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    c->seqlen_q = c->seqlen_k = 0;
    for (char *tok = strtok(buf, "+"); tok; tok = strtok(NULL, "+")) {
        if (n == MAX_SEQS) usage("--shapes: more than 16 sequences in one packed shape");
        int q, k;
        parse_pair("--shapes", tok, 'x', strchr(s, '+') ? window_arg : positive_arg, &q, &k);
        if (q < 0 || k < 0) usage("--shapes: a sequence length below 0");
        c->lens_q[n] = q, c->lens_k[n++] = k;
        c->seqlen_q = q > c->seqlen_q ? q : c->seqlen_q, c->seqlen_k = k > c->seqlen_k ? k : c->seqlen_k;
        l += snprintf(l, end - l, "%s", n > 1 ? "+" : "");
        l += q == k ? snprintf(l, end - l, "s%d", q) : snprintf(l, end - l, "q%dk%d", q, k);
    }
    c->nseq = n > 1 ? n : 0;
    if (c->seqlen_q < 1) c->seqlen_q = 1; /* the maxima of a packed batch: at least one row */
    if (c->seqlen_k < 1) c->seqlen_k = 1;
    return l;
}

/* Value v of axis x into its fields of c, or back. */
static void axis_store(test_case *c, int x, const attn_axis_value *v) {
    char *at = (char *)c + FIELD[x].at, *at2 = (char *)c + FIELD[x].at2;
    switch (attn_axes[x].kind) {
    case ATTN_KIND_DTYPE: *(attn_dtype *)at = (attn_dtype)v->i[0]; break;
    case ATTN_KIND_NUMBER: *(float *)at = (float)v->f; break;
    default: /* a pair (DxDV, L:R) fills two fields; a single value (a mask, a count) one */
        *(int *)at = v->i[0];
        if (at2 != at) *(int *)at2 = v->i[1];
    }
}

static attn_axis_value axis_load(const test_case *c, int x) {
    const char *at = (const char *)c + FIELD[x].at, *at2 = (const char *)c + FIELD[x].at2;
    attn_axis_value v = {{0, 0}, 0};
    switch (attn_axes[x].kind) {
    case ATTN_KIND_DTYPE: v.i[0] = (int)*(const attn_dtype *)at; break;
    case ATTN_KIND_NUMBER: v.f = *(const float *)at; break;
    default: v.i[0] = *(const int *)at, v.i[1] = *(const int *)at2;
    }
    return v;
}

/* Case c from the axis values chosen by row[]; its label names what is not off. */
static void make_case(suite *s, test_case *c, const int *row) {
    char(*v)[MAXL][ELEM] = s->values;
    attn_axis_value val[ATTN_SHAPES_N_AXES];
    for (int x = 0; x < ATTN_SHAPES_N_AXES; x++) {
        const char *text = v[x][row[x]], *why = attn_axis_parse(attn_axes[x].kind, text, &val[x]);
        if (why) {
            fprintf(stderr, "attn_correctness: --%s: %s, got '%s'\n", attn_axes[x].option, why, text);
            exit(2);
        }
    }
    if (val[ATTN_SHAPES_MASK].i[0] && val[ATTN_SHAPES_WINDOW].i[1] > 0) /* causal is a right bound of 0 */
        val[ATTN_SHAPES_WINDOW].i[1] = 0;
    char *l = c->label, *end = c->label + sizeof c->label;
    /* the label from the case's fields as stored, so that it (and --list) shows what the
     * checks will run, not what was parsed */
    for (int x = 0; x < ATTN_SHAPES_N_AXES; x++) axis_store(c, x, &val[x]);
    for (int x = 0; x < ATTN_SHAPES_N_AXES; x++) {
        const attn_axis_value stored = axis_load(c, x);
        l += attn_axis_label(&attn_axes[x], &stored, s->ctx.heads, l, (size_t)(end - l));
    }
    c->shape = v[AX_SHAPE][row[AX_SHAPE]];
    parse_shapes(c, c->shape, l, end);
    if (c->page_size > 0 && !c->nseq) { /* paged, one shape: --batch sequences of it */
        c->nseq = s->ctx.batch < MAX_SEQS ? s->ctx.batch : MAX_SEQS;
        for (int b = 1; b < c->nseq; b++) c->lens_q[b] = c->lens_q[0], c->lens_k[b] = c->lens_k[0];
    }
}

/* The problem of case c as the checks build it, pointers standing in (nothing reads them):
 * for validating it and asking the kernel whether it takes it. */
static attn_fwd_params case_shape(const suite *s, const test_case *c) {
    attn_fwd_params p;
    attn_params_clear(&p, s->ctx.heads);
    p.dtype = c->dtype, p.batch = s->ctx.batch, p.seqlen_q = c->seqlen_q, p.seqlen_k = c->seqlen_k;
    p.head_dim = c->head_dim, p.head_dim_v = c->head_dim_v, p.causal = c->causal, p.heads_k = c->heads_k;
    p.window_left = c->window_left, p.window_right = c->window_right, p.softcap = c->softcap;
    p.softmax_scale = 1.0f;
    const void *stand_in = c;
    p.q = p.k = p.v = stand_in, p.o = (void *)stand_in;
    /* stand-ins, valid ones (the output's are not 0): each check lays the tensors out */
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = 1;
    p.o_head_stride = p.o_batch_stride = 1;
    if (c->nseq) { /* what a packed case needs, for attn_kernel_lacks */
        static const attn_problem_desc none;
        attn_problem_desc d = none;
        attn_problem_set_batch(&d, c->nseq, c->page_size, c->lens_q, c->lens_k); /* as case_problem */
        p.batch = c->nseq;
        if (!attn_problem_q_dense(&d)) p.cu_seqlens_q = stand_in;
        if (attn_problem_seqused(&d)) p.seqused_k = stand_in;
        if (c->page_size > 0)
            p.block_table = stand_in, p.page_size = c->page_size;
        else if (!attn_problem_kv_cache(&d))
            p.cu_seqlens_k = stand_in;
    }
    return p;
}

static void validate_case(const suite *s, const test_case *c) {
    if (c->nseq) return; /* a packed case: gpu_problem validates its arrays before any launch */
    const attn_fwd_params p = case_shape(s, c);
    const attn_problem_host none = {NULL, NULL, NULL, NULL};
    char err[512];
    if (attn_problem_check(&p, &none, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: case %s: %s\n", c->label, err);
        exit(2);
    }
}

/* The cases: the cross product of the lists, in the order of the axes, or (--pairwise) the
 * rows of a pairwise covering array of them (attn_axis_rows). */
static void build_cases(suite *s) {
    int size[N_AXES], total = 1;
    for (int x = 0; x < N_AXES; x++) total *= size[x] = split_list(axis_option(x), s->lists[x], s->values[x], MAXL);
    int *rows = calloc((size_t)total * N_AXES, sizeof *rows);
    int n = rows ? attn_axis_rows(size, N_AXES, s->pairwise, rows, total) : -1;
    if (n < 0) {
        fprintf(stderr, "attn_correctness: the cases of the lists could not be enumerated (%d combinations)\n", total);
        exit(2);
    }
    s->cases = calloc((size_t)n, sizeof *s->cases);
    s->n_cases = 0;
    for (int r = s->shard; r < n; r += s->shards) {
        test_case *c = &s->cases[s->n_cases++];
        make_case(s, c, rows + (size_t)r * N_AXES);
        validate_case(s, c);
    }
    free(rows);
}

/* ---------------------------------------------------------------- arguments ---- */

/* One option into s; 0, or 1 for an unknown one. */
static int take_option(suite *s, int opt) {
    if (opt >= AXIS_CODE && opt < AXIS_CODE + N_AXES) {
        s->lists[opt - AXIS_CODE] = optarg;
        return 0;
    }
    char extra;
    switch (opt) {
    case 'n': s->name = optarg; break;
    case 'k': s->kernel = optarg; break;
    case 'p': s->plugin = optarg; break;
    case 'b': s->ctx.batch = positive_arg("--batch", optarg); break;
    case 'e': s->ctx.heads = positive_arg("--heads", optarg); break;
    case 'T': s->tolerance = optarg; break;
    case 'D': s->known_path = optarg; break;
    case 'c': s->checks = optarg; break;
    case 'W': s->case_timeout_s = positive_arg("--case-timeout", optarg); break;
    case 'I': s->in_process = 1; break;
    case 'P': s->pairwise = 1; break;
    case 'L': s->list = 1; break;
    case 'l': s->list_checks = 1; break;
    case 'H':
        if (sscanf(optarg, "%d/%d%c", &s->shard, &s->shards, &extra) != 2 || s->shards < 1 || s->shards > 64 ||
            s->shard < 0 || s->shard >= s->shards)
            usage("--shard: expected K/N with 0 <= K < N <= 64");
        break;
    default: return 1;
    }
    return 0;
}

/* The command line into s; exits 2 with the usage on anything malformed. --list-checks
 * prints the table and exits 0, needing nothing else. */
static void parse_args(int argc, char **argv, suite *s) {
    default_checks(s->default_checks, sizeof s->default_checks);
    s->checks = s->default_checks;
    s->case_timeout_s = 60;
    s->shard = 0, s->shards = 1;
    static const struct option opts[] = {
#define ATTN_AXIS(key, NAME, option, ...) {option, 1, 0, AXIS_CODE + ATTN_SHAPES_##NAME},
#include "axes.def"
#undef ATTN_AXIS
        {"shapes", 1, 0, AXIS_CODE + AX_SHAPE}, {"name", 1, 0, 'n'}, {"kernel", 1, 0, 'k'}, {"plugin", 1, 0, 'p'},
        {"batch", 1, 0, 'b'},      {"heads", 1, 0, 'e'},        {"tolerance", 1, 0, 'T'}, {"checks", 1, 0, 'c'},
        {"case-timeout", 1, 0, 'W'}, {"in-process", 0, 0, 'I'}, {"pairwise", 0, 0, 'P'},  {"list", 0, 0, 'L'},
        {"shard", 1, 0, 'H'},      {"list-checks", 0, 0, 'l'},  {"help", 0, 0, 'h'},        {"known-deviations", 1, 0, 'D'},
        {0, 0, 0, 0},
    };
    int c;
    char why[256];
    opterr = 0;
    while ((c = getopt_long(argc, argv, ATTN_GETOPT_SHORT, opts, NULL)) != -1) {
        if (c == 'h') {
            usage_text(stdout);
            exit(0);
        }
        if (take_option(s, c)) usage(attn_getopt_error(c, argv, why, sizeof why));
    }
    if (optind != argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        usage(why);
    }
    if (s->list_checks) {
        list_checks();
        exit(0);
    }
    const char *missing = !s->name ? "name" : !s->kernel ? "kernel" : !s->tolerance ? "tolerance"
                        : !s->lists[AX_SHAPE] ? "shapes" : !s->ctx.batch ? "batch" : !s->ctx.heads ? "heads" : NULL;
    for (int x = 0; x < ATTN_SHAPES_N_AXES && !missing; x++)
        if (!attn_axes[x].dflt && !s->lists[x]) missing = attn_axes[x].option;
    if (missing) {
        snprintf(why, sizeof why, "missing option --%s", missing);
        usage(why);
    }
    snprintf(s->heads_text, sizeof s->heads_text, "%d", s->ctx.heads);
    for (int x = 0; x < ATTN_SHAPES_N_AXES; x++) /* the defaults; "": --heads */
        if (!s->lists[x]) s->lists[x] = *attn_axes[x].dflt ? attn_axes[x].dflt : s->heads_text;
    build_cases(s);
    char bad[128];
    if (checks_valid(s->checks, bad, sizeof bad)) {
        fprintf(stderr, "attn_correctness: --checks: unknown check '%s'\n", bad);
        exit(2);
    }
}

/* --known-deviations: the file's entries, each naming a kernel that is not built in (ours are
 * fixed, not excused) and checks that exist; 0, or 1 with "<file>:<line>: <what>" in err. */
static int load_known(suite *s, char *err, size_t len) {
    if (attn_deviations_load(s->known_path, &s->known, err, len)) return 1;
    int n_builtin = 0;
    const attn_kernel *const *builtin = attn_builtin_kernels(&n_builtin);
    for (int i = 0; i < s->known.n; i++) {
        const attn_deviation *e = &s->known.v[i];
        char bad[128];
        for (int b = 0; b < n_builtin; b++)
            if (!strcmp(builtin[b]->name, e->kernel)) {
                snprintf(err, len, "%s:%d: '%s' is a built-in kernel: its failures are fixed, never listed as known",
                         s->known_path, e->line, e->kernel);
                return 1;
            }
        if (strcmp(e->checks, "*") && checks_valid(e->checks, bad, sizeof bad)) {
            snprintf(err, len, "%s:%d: unknown check '%s' (attn_correctness --list-checks)", s->known_path, e->line, bad);
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ running ---- */

/* The scale rows need tens of GB: with less free GPU memory than a check needs, the case is
 * skipped, saying so (a smaller GPU cannot run it; that is not a pass). The largest check
 * holds q, k, v, o and a copy of o in the dtype, and G, R in float (a packed batch also the
 * reference's float copies of one sequence's K and V); a backward one also dO, dQ, dK, dV in
 * the dtype, the float gradients, the twin's in the dtype and a workspace (a float dQ). */
static int enough_memory(const check_ctx *x, const test_case *c, int backward, char *why, size_t len) {
    const int dmax = c->head_dim > c->head_dim_v ? c->head_dim : c->head_dim_v;
    const double batch = c->nseq ? c->nseq : x->batch; /* packed: its sequences, none longer than the longest */
    double eq = batch * x->heads * c->seqlen_q * dmax;
    double ek = batch * c->heads_k * c->seqlen_k * dmax;
    double scratch = c->nseq ? 8.0 * x->heads * c->seqlen_k * dmax : 0; /* the reference's float K, V of a sequence */
    double need = 1.1 * (2 * (3 * eq + 2 * ek) + 8 * eq + scratch) + (256 << 20);
    if (backward) need += 1.1 * (2 * (2 * eq + 2 * ek) + 6 * (eq + 2 * ek) + 4 * eq);
    size_t free_b = 0, total_b = 0;
    attn_dev_trim(); /* what the harness's pool keeps is free for this case too */
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || (double)free_b >= need) return 1;
    snprintf(why, len, "this case needs about %.1f GiB of GPU memory; %.1f GiB of %.1f GiB are free",
             need / (1 << 30), free_b / 1073741824.0, total_b / 1073741824.0);
    return 0;
}

/* In the child, once: the GPU (77 without one), the stream, the reference. */
static int child_init(void *ctx) {
    check_ctx *x = &((suite *)ctx)->ctx;
    char err[1024];
    if (!attn_gpu_available(err, sizeof err)) {
        printf("SKIPPED: %s\n", err);
        return ATTN_EXIT_SKIP;
    }
    /* which GPU ran this test (with several, CTest's resource allocation picks it) */
    int dev = -1;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
        printf("GPU %d: %s, PCI %04x:%02x:%02x\n", dev, prop.name, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    cudaError_t e = cudaStreamCreate(&x->stream);
    if (e != cudaSuccess) {
        printf("FAILED: cannot create a CUDA stream: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (attn_ref_create(&x->ref, err, sizeof err)) {
        printf("FAILED: cannot create the reference: %s\n", err);
        return 1;
    }
    attn_cuda_state_read(&x->pristine, x->stream); /* before any call of the kernel's */
    return 0;
}

/* The checks of one case, as a Check suite run in this process; prints each failure. */
static attn_case_verdict run_checks(check_ctx *x, const char *checks, const attn_deviations *known, double t0) {
    const test_case *c = x->tc;
    x->n_unsupported = 0, x->failed_checks[0] = 0, x->unsupported[0] = 0;
    x->inputs_verified = 0, x->inputs_changed[0] = 0, x->check_times[0] = 0;
    x->verify_inputs = listed(checks, "inputs_unchanged"); /* the large and long tests don't list it */
    current_ctx = x;
    SRunner *sr = srunner_create(make_suite(c->label, checks));
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_SILENT);
    current_ctx = NULL;
    int failed = srunner_ntests_failed(sr);
    TestResult **tr = srunner_failures(sr);
    for (int k = 0; k < failed; k++) printf("%s\n", tr_msg(tr[k]));
    free(tr);
    srunner_free(sr);
    if (x->check_times[0]) printf("TIMES %s:%s\n", c->label, x->check_times);
    double s = attn_wall_s() - t0;
    const attn_deviation *e = failed ? attn_deviation_find(known, x->kernel->name, c->label, x->failed_checks) : NULL;
    if (e) {
        printf("CASE %s KNOWN_DEVIATION %s (%.2f s)\nKNOWN DEVIATION (line %d of the list): %s\n", c->label,
               x->failed_checks, s, e->line, e->why);
        return ATTN_CASE_KNOWN;
    }
    if (failed) {
        printf("CASE %s FAILED %s (%.2f s)\n", c->label, x->failed_checks[0] ? x->failed_checks : "(a Check error)", s);
        return ATTN_CASE_FAILED;
    }
    if (x->n_unsupported) {
        printf("CASE %s NOT_SUPPORTED (%.2f s)\nNOT SUPPORTED (%d checks): %s\n", c->label, s, x->n_unsupported,
               x->unsupported);
        return ATTN_CASE_UNSUPPORTED;
    }
    printf("CASE %s passed (%.2f s)\n", c->label, s);
    if ((e = attn_deviation_exact(known, x->kernel->name, c->label)))
        printf("KNOWN DEVIATION NOT SEEN (line %d of the list names this case): fixed upstream? then delete the "
               "entry\n", e->line);
    return ATTN_CASE_PASSED;
}

/* In the child: case i. A CUDA context left broken (a kernel fault is sticky) ends this
 * process, so that the next case starts in a new one. */
static attn_case_verdict run_case(int i, void *ctx, int *stop_child) {
    suite *s = ctx;
    check_ctx *x = &s->ctx;
    const test_case *c = &s->cases[i];
    x->tc = c;
    /* the same seeds in any grouping of cases: from the kernel and the case alone */
    snprintf(x->seed_name, sizeof x->seed_name, "correctness/%s/%s", s->kernel, c->label);
    double t0 = attn_wall_s();
    char why[512];
    attn_case_verdict v;
    const attn_fwd_params shape = case_shape(s, c);
    const int backward = backward_checks(s->checks);
    const attn_bwd_params bwd_shape = {.fwd = &shape};
    if (backward ? attn_kernel_lacks_bwd(x->kernel, &bwd_shape, why, sizeof why) != NULL
                 : attn_kernel_lacks(x->kernel, &shape, why, sizeof why) != NULL) { /* said before any launch */
        printf("CASE %s NOT_SUPPORTED (0.00 s)\nNOT SUPPORTED: %s\n", c->label, why);
        v = ATTN_CASE_UNSUPPORTED;
    } else if (!enough_memory(x, c, backward, why, sizeof why)) {
        printf("CASE %s SKIPPED: %s\n", c->label, why);
        v = ATTN_CASE_SKIPPED;
    } else {
        /* a packed case's own checks; the backward's, and 'launch' (compute-sanitizer's run of
         * varlen and paged layouts), take packed cases as they are */
        const int as_given = backward || launch_checks_only(s->checks);
        v = run_checks(x, c->nseq && !as_given ? "packed,inputs_unchanged" : s->checks, &s->known, t0);
    }
    cudaGetLastError(); /* clears an error that is not sticky; a sticky one stays */
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("the CUDA context is broken after case %s (%s): the next case starts in a new process\n", c->label,
               cudaGetErrorName(e));
        *stop_child = 1;
    }
    return v;
}

static const char *case_label(int i, void *ctx) { return ((const suite *)ctx)->cases[i].label; }

/* ------------------------------------------------------------------ the end ---- */

/* The tally, a line per case that never reported, how to rerun each failed case alone;
 * the exit status: 1 if any case failed or did not run, else 0 if any passed or was a known
 * deviation, else 77. */
static int report(const suite *s, const attn_case_verdict *v, const char *argv0) {
    int count[ATTN_CASE_NOT_RUN + 1] = {0};
    for (int i = 0; i < s->n_cases; i++) {
        count[v[i]]++;
        if (v[i] == ATTN_CASE_NOT_RUN) printf("CASE %s NOT_RUN\n", s->cases[i].label);
    }
    printf("%s: %d cases: %d passed, %d failed, %d not supported, %d skipped, %d not run", s->name, s->n_cases,
           count[ATTN_CASE_PASSED], count[ATTN_CASE_FAILED], count[ATTN_CASE_UNSUPPORTED], count[ATTN_CASE_SKIPPED],
           count[ATTN_CASE_NOT_RUN]);
    if (count[ATTN_CASE_KNOWN]) printf(", %d known deviations (%s)", count[ATTN_CASE_KNOWN], s->known_path);
    printf("\n");
    for (int i = 0; i < s->n_cases; i++) {
        const test_case *c = &s->cases[i];
        if (v[i] != ATTN_CASE_FAILED) continue;
        printf("rerun %s alone: %s --name %s --kernel %s%s%s", c->label, argv0, s->name, s->kernel,
               s->plugin ? " --plugin " : "", s->plugin ? s->plugin : "");
        for (int x = 0; x < ATTN_SHAPES_N_AXES; x++) {
            char value[64];
            const attn_axis_value v = axis_load(c, x);
            attn_axis_format(attn_axes[x].kind, &v, value, sizeof value);
            printf(" --%s=%s", attn_axes[x].option, value);
        }
        printf(" --shapes %s --batch %d --heads %d --tolerance %s --checks %s\n", c->shape, s->ctx.batch, s->ctx.heads,
               s->tolerance, s->checks);
    }
    if (count[ATTN_CASE_FAILED] || count[ATTN_CASE_NOT_RUN]) return 1;
    if (count[ATTN_CASE_PASSED] || count[ATTN_CASE_KNOWN]) return 0;
    printf("%s\n", count[ATTN_CASE_UNSUPPORTED] ? "NOT SUPPORTED: no case of this test (reasons above)"
                                                : "SKIPPED: every case of this test (reasons above)");
    return ATTN_EXIT_SKIP;
}

int main(int argc, char **argv) {
    suite *s = calloc(1, sizeof *s);
    if (!s) return 2;
    parse_args(argc, argv, s);
    char err[1024];
    if (attn_tolerance_load(s->tolerance, &s->ctx.tol, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
    s->ctx.kernel = attn_find_kernel(s->kernel, s->plugin, err, sizeof err);
    if (!s->ctx.kernel) {
        fprintf(stderr, "attn_correctness: %s\n", err);
        return 2;
    }
    if (s->known_path && load_known(s, err, sizeof err)) {
        fprintf(stderr, "attn_correctness: --known-deviations: %s\n", err);
        return 2;
    }
    if (s->list) { /* the cases, no GPU needed */
        for (int i = 0; i < s->n_cases; i++) printf("%s\n", s->cases[i].label);
        return 0;
    }
    const char *times = getenv("ATTN_CHECK_TIMES"); /* where a test's time goes, check by check */
    s->ctx.print_times = times && !strcmp(times, "1");
    attn_case_runner r = {child_init, run_case, case_label, s, s->n_cases, s->case_timeout_s};
    attn_case_verdict *v = calloc((size_t)s->n_cases, sizeof *v);
    int rc = s->in_process ? attn_run_cases_in_process(&r, v) : attn_run_cases(&r, v, stdout);
    if (rc) return rc; /* nothing ran: no GPU (77), or the set-up failed */
    rc = report(s, v, argv[0]);
    free(v);
    free(s->cases);
    attn_deviations_free(&s->known);
    free(s);
    return rc;
}
