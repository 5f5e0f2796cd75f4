/* attn_tune's command line (main.c lists the options) into its context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tune.h"

#define USAGE "usage: attn_tune --kernel NAME [--plugin LIB] --dtypes fp16,bf16 --head-dims 64,128 " \
    "--masks full,causal --seqlens S,S,... --tokens N --hidden N --tolerance FILE --results-dir DIR " \
    "--tuned-dir DIR [--source-dir DIR] [--work-dir DIR] [--exhaustive-max N] [--trials N] [--seed N] " \
    "[--case-timeout S] [--built-only]\n"

static void usage(const char *why) {
    fprintf(stderr, "attn_tune: %s\n" USAGE, why);
    exit(2);
}

/* --help: the usage line, then what the options do */
_Noreturn static void help(void) {
    printf(USAGE "A tunable kernel's best configuration per shape class of the benchmark matrix (the dtypes, head\n"
           "dims, masks and seqlens; --tokens / seqlen sequences of --hidden / head dim heads), proven correct\n"
           "(--tolerance) and confirmed faster than the default; writes <results-dir>/<gpu>/tune/ and\n"
           "<tuned-dir>/<gpu>.tuned.txt (suites/tune/main.c says how).\n"
           "  --exhaustive-max N  search exhaustively up to N configurations (default 64), else\n"
           "  --trials N          a Latin hypercube then TPE up to N trials (default 40), from --seed (default 1)\n"
           "  --case-timeout S    a configuration's correctness run is stopped after S seconds (default 60)\n"
           "  --built-only        tune over the configurations this build holds\n"
           "  --work-dir DIR      where the children's work file goes (default a new folder in /tmp)\n"
           "  --source-dir DIR    the git checkout whose commit the results name (default .)\n"
           "Exit 0 done, 1 a phase failed, 2 bad arguments or configurations missing from the build,\n"
           "77 no GPU or no tunables.\n");
    exit(0);
}

static int positive(const char *opt, const char *s, int max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < 1 || v > max) {
        char why[256];
        snprintf(why, sizeof why, "%s: expected a positive integer up to %d, got '%s'", opt, max, s);
        usage(why);
    }
    return (int)v;
}

/* "a,b,c" into up to MAX_LIST items through one(a, opt, item, out index) */
static int parse_csv(tune_args *a, const char *opt, const char *s,
                     void (*one)(tune_args *a, const char *opt, const char *item, int i)) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n == MAX_LIST) usage("too many values in a list");
        one(a, opt, tok, n++);
    }
    if (n == 0) usage("an empty list");
    return n;
}
static void one_dtype(tune_args *a, const char *opt, const char *s, int i) {
    if (attn_dtype_parse(s, &a->dtypes[i])) {
        char why[128];
        snprintf(why, sizeof why, "%s: expected fp16 or bf16, got '%s'", opt, s);
        usage(why);
    }
}
static void one_dim(tune_args *a, const char *opt, const char *s, int i) { a->dims[i] = positive(opt, s, 1024); }
static void one_seqlen(tune_args *a, const char *opt, const char *s, int i) {
    a->seqlens[i] = positive(opt, s, 1 << 24);
}
static void one_mask(tune_args *a, const char *opt, const char *s, int i) {
    if (strcmp(s, "full") && strcmp(s, "causal")) {
        char why[128];
        snprintf(why, sizeof why, "%s: expected full or causal, got '%s'", opt, s);
        usage(why);
    }
    a->masks[i] = !strcmp(s, "causal");
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void tune_parse_args(tuner *tu, int argc, char **argv) {
    static const struct option opts[] = {
        {"kernel", 1, 0, 'k'},      {"plugin", 1, 0, 'p'},        {"dtypes", 1, 0, 'd'},   {"head-dims", 1, 0, 'D'},
        {"masks", 1, 0, 'm'},       {"seqlens", 1, 0, 's'},       {"tokens", 1, 0, 't'},   {"hidden", 1, 0, 'H'},
        {"tolerance", 1, 0, 'o'},   {"results-dir", 1, 0, 'r'},   {"tuned-dir", 1, 0, 'u'}, {"source-dir", 1, 0, 'S'},
        {"work-dir", 1, 0, 'w'},    {"exhaustive-max", 1, 0, 'x'}, {"trials", 1, 0, 'n'},  {"seed", 1, 0, 'e'},
        {"case-timeout", 1, 0, 'c'}, {"built-only", 0, 0, 'b'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    tune_args *a = &tu->a;
    *a = (tune_args){.exhaustive_max = 64, .trials = 40, .seed = 1, .case_timeout_s = 60, .source_dir = "."};
    int c;
    char why[256];
    opterr = 0;
    while ((c = getopt_long(argc, argv, ATTN_GETOPT_SHORT, opts, NULL)) != -1) {
        switch (c) {
        case 'k': a->kernel_name = optarg; break;
        case 'p': a->plugin = optarg; break;
        case 'd': a->n_dtypes = parse_csv(a, "--dtypes", optarg, one_dtype); break;
        case 'D': a->n_dims = parse_csv(a, "--head-dims", optarg, one_dim); break;
        case 'm': a->n_masks = parse_csv(a, "--masks", optarg, one_mask); break;
        case 's': a->n_seqlens = parse_csv(a, "--seqlens", optarg, one_seqlen); break;
        case 't': a->tokens = positive("--tokens", optarg, 1 << 30); break;
        case 'H': a->hidden = positive("--hidden", optarg, 1 << 30); break;
        case 'o': a->tolerance = optarg; break;
        case 'r': a->results_dir = optarg; break;
        case 'u': a->tuned_dir = optarg; break;
        case 'S': a->source_dir = optarg; break;
        case 'w': a->work_dir = optarg; break;
        case 'x': a->exhaustive_max = positive("--exhaustive-max", optarg, 1 << 24); break;
        case 'n': a->trials = positive("--trials", optarg, 1 << 20); break;
        case 'e': a->seed = (unsigned long long)positive("--seed", optarg, 1 << 30); break;
        case 'c': a->case_timeout_s = positive("--case-timeout", optarg, 86400); break;
        case 'b': a->built_only = 1; break;
        case 'h': help();
        default: usage(attn_getopt_error(c, argv, why, sizeof why));
        }
    }
    if (optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        usage(why);
    }
    if (!a->kernel_name || !a->n_dtypes || !a->n_dims || !a->n_masks || !a->n_seqlens || !a->tokens || !a->hidden ||
        !a->tolerance || !a->results_dir || !a->tuned_dir)
        usage("missing a required option");
    qsort(a->seqlens, (size_t)a->n_seqlens, sizeof a->seqlens[0], cmp_int);
    for (int i = 0; i < a->n_dtypes; i++)
        for (int j = 0; j < a->n_dims; j++) tu->groups[tu->n_groups++] = (group){a->dtypes[i], a->dims[j]};
}
