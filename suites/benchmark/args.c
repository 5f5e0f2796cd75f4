/* attn_benchmark's command line (main.c lists the options) into its context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bench.h"

/* The usage text: on stdout for --help (exit 0), after the reason on stderr (exit 2). */
static void usage_text(FILE *out) {
    fprintf(out, "usage: attn_benchmark --name N --kernel K [--plugin L] [--pass fwd|bwd|fwd_bwd] "
            "--dtype fp16|bf16 --head-dim D --mask full|causal --seqlen S --tokens T --hidden H "
            "--thresholds-dir DIR --tolerance FILE [--fragments DIR]\n"
            "   or: ... --mask M --workload decode|varlen|window --heads H --heads-k HK (--pass fwd only)\n"
            "       [--batch B --shape QxK] [--sequences QxK+QxK+...] [--page-size P] [--window L:R]\n"
            "One benchmark of the benchmark matrix (suites/benchmark/main.c says what it does). Exit 0 pass,\n"
            "1 fail, 77 skipped or not supported, 2 bad arguments or a harness error.\n");
}

static void usage(const char *why) {
    fprintf(stderr, "attn_benchmark: %s\n", why);
    usage_text(stderr);
    exit(2);
}

/* "QxK" into *q, *k (each >= 0); 0, or -1 when malformed */
static int parse_qk(const char *s, int *q, int *k) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != 'x') return -1;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || (*end && *end != '+') || a < 0 || b < 0 || a > (1L << 24) || b > (1L << 24)) return -1;
    *q = (int)a, *k = (int)b;
    return 0;
}

/* --sequences "QxK+QxK+..." into bm->lens_q, bm->lens_k */
static void parse_sequences(bench *bm, const char *s) {
    bm->nseq = 0;
    for (const char *t = s; t && *t; t = strchr(t, '+') ? strchr(t, '+') + 1 : NULL) {
        if (bm->nseq == MAX_BENCH_SEQS) usage("--sequences: more than 256 sequences");
        if (parse_qk(t, &bm->lens_q[bm->nseq], &bm->lens_k[bm->nseq])) usage("--sequences: expected QxK+QxK+...");
        bm->nseq++;
    }
    if (!bm->nseq) usage("--sequences: expected QxK+QxK+...");
}

static int positive(const char *opt, const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > (1L << 30)) {
        fprintf(stderr, "attn_benchmark: %s: expected a positive integer, got '%s'\n", opt, s);
        exit(2);
    }
    return (int)v;
}

/* Version 2's workloads: their options checked against the workload, into bm */
static void parse_workload(bench *bm, const char *shape, const char *sequences, const char *window) {
    bm->workload = attn_workload_parse(bm->workload_name);
    if (bm->workload <= ATTN_WORKLOAD_CAUSAL) usage("--workload: expected decode, varlen or window");
    if (bm->seqlen || bm->tokens || bm->hidden || !bm->heads || !bm->heads_k || bm->heads % bm->heads_k)
        usage("a workload takes --heads and --heads-k (dividing it), not --seqlen, --tokens or --hidden");
    const int varlen = bm->workload == ATTN_WORKLOAD_VARLEN;
    if (varlen != (sequences != NULL) || varlen == (shape != NULL))
        usage("varlen takes --sequences; decode and window take --shape QxK");
    if ((bm->workload == ATTN_WORKLOAD_DECODE) != (bm->page_size > 0))
        usage("decode, and only decode, takes --page-size");
    if ((bm->workload == ATTN_WORKLOAD_WINDOW) != (window != NULL))
        usage("window, and only window, takes --window L:R");
    if (window && (sscanf(window, "%d:%d", &bm->window_left, &bm->window_right) != 2 || bm->window_left < -1 ||
                   bm->window_right < -1 || (bm->window_left < 0 && bm->window_right < 0)))
        usage("--window: expected L:R, each -1 (unbounded) or >= 0, not both -1");
    if (bm->causal && bm->window_right > 0) bm->window_right = 0; /* causal is a right bound of 0 */
    if (sequences) {
        parse_sequences(bm, sequences);
    } else {
        if (!bm->batch || bm->batch > MAX_BENCH_SEQS) usage("--batch: expected 1 to 256 sequences");
        int q, k;
        if (parse_qk(shape, &q, &k) || strchr(shape, '+') || q < 1 || k < 1) usage("--shape: expected QxK, both >= 1");
        bm->nseq = bm->batch;
        for (int b = 0; b < bm->nseq; b++) bm->lens_q[b] = q, bm->lens_k[b] = k;
    }
}

/* Reads and checks the command line into bm; a bad one exits 2 with the usage. */
void bench_parse_args(bench *bm, int argc, char **argv) {
    static const struct option opts[] = {
        {"name", 1, 0, 'n'}, {"kernel", 1, 0, 'k'}, {"plugin", 1, 0, 'p'}, {"dtype", 1, 0, 't'},
        {"head-dim", 1, 0, 'd'}, {"mask", 1, 0, 'm'}, {"seqlen", 1, 0, 's'}, {"tokens", 1, 0, 'T'},
        {"hidden", 1, 0, 'H'}, {"thresholds-dir", 1, 0, 'D'}, {"tolerance", 1, 0, 'o'},
        {"fragments", 1, 0, 'f'}, {"workload", 1, 0, 'w'}, {"batch", 1, 0, 'b'}, {"heads", 1, 0, 'e'},
        {"heads-k", 1, 0, 'K'}, {"shape", 1, 0, 'S'}, {"sequences", 1, 0, 'Q'}, {"page-size", 1, 0, 'P'},
        {"window", 1, 0, 'W'}, {"pass", 1, 0, 'A'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *shape = NULL, *sequences = NULL, *window = NULL;
    bm->window_left = bm->window_right = -1;
    int c;
    char why[256];
    opterr = 0;
    while ((c = getopt_long(argc, argv, ATTN_GETOPT_SHORT, opts, NULL)) != -1) {
        switch (c) {
        case 'n': bm->name = optarg; break;
        case 'k': bm->kernel_name = optarg; break;
        case 'p': bm->plugin = optarg; break;
        case 't': bm->dtype_name = optarg; break;
        case 'd': bm->head_dim = positive("--head-dim", optarg); break;
        case 'm': bm->mask_name = optarg; break;
        case 's': bm->seqlen = positive("--seqlen", optarg); break;
        case 'T': bm->tokens = positive("--tokens", optarg); break;
        case 'H': bm->hidden = positive("--hidden", optarg); break;
        case 'D': bm->thresholds_dir = optarg; break;
        case 'o': bm->tolerance_path = optarg; break;
        case 'f': bm->fragments = optarg; break;
        case 'w': bm->workload_name = optarg; break;
        case 'b': bm->batch = positive("--batch", optarg); break;
        case 'e': bm->heads = positive("--heads", optarg); break;
        case 'K': bm->heads_k = positive("--heads-k", optarg); break;
        case 'S': shape = optarg; break;
        case 'Q': sequences = optarg; break;
        case 'P': bm->page_size = positive("--page-size", optarg); break;
        case 'W': window = optarg; break;
        case 'A':
            if ((bm->pass = attn_pass_parse(optarg)) < 0) {
                snprintf(why, sizeof why, "--pass: expected fwd, bwd or fwd_bwd, got '%s'", optarg);
                usage(why);
            }
            break;
        case 'h': usage_text(stdout); exit(0);
        default: usage(attn_getopt_error(c, argv, why, sizeof why));
        }
    }
    if (optind != argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        usage(why);
    }
    if (!bm->name || !bm->kernel_name || !bm->dtype_name || !bm->mask_name || !bm->head_dim ||
        !bm->thresholds_dir || !bm->tolerance_path)
        usage("missing a required option (--name, --kernel, --dtype, --mask, --head-dim, --thresholds-dir, "
              "--tolerance)");
    if (attn_dtype_parse(bm->dtype_name, &bm->dtype)) usage("--dtype: expected fp16 or bf16");
    if (strcmp(bm->mask_name, "full") && strcmp(bm->mask_name, "causal")) usage("--mask: expected full or causal");
    bm->causal = !strcmp(bm->mask_name, "causal");
    bm->workload = bm->causal ? ATTN_WORKLOAD_CAUSAL : ATTN_WORKLOAD_FULL;
    if (!bm->workload_name) { /* the dense matrix */
        if (!bm->seqlen || !bm->tokens || !bm->hidden || bm->batch || bm->heads || bm->heads_k || shape || sequences ||
            bm->page_size || window)
            usage("the dense matrix takes --seqlen, --tokens and --hidden, and none of version 2's options");
        if (bm->hidden % bm->head_dim) usage("--hidden must be a multiple of --head-dim");
        bm->workload_name = bm->mask_name;
        return;
    }
    if (bm->pass != ATTN_PASS_FWD) usage("--pass bwd and fwd_bwd take the dense matrix only, not --workload");
    parse_workload(bm, shape, sequences, window);
}
