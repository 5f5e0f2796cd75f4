/* The plugin loader's checks of a kernel table (kernels/plugin.c) and what a kernel takes
 * (kernels/capability.c), on tables built from the input; no GPU. The input is text, a line each:
 *   abi N                 the ABI version attn_plugin_kernels reports (default ATTN_ABI_VERSION);
 *                         1 and 2 serve the table in their own entry layouts
 *   count N               the count it reports (default: the kernel lines; never more than them,
 *                         as a table shorter than its count is the plugin's own undefined behaviour)
 *   kernel NAME|NULL [nofwd] [caps N] [dtypes N] [head_dims NULL|D...] [pairs NULL|D DV...]
 *   tuning N|NULL [nofacts] [nofwd_config] [noconfig_for] [nodefault_for] [notunables]
 *   tunable NAME|NULL COUNT [novalues]
 *   problem KEY VALUE...  keys dtype, head_dim, head_dim_v, heads, heads_k, window L R, causal,
 *                         softcap, varlen, paged, seqused: a problem every loaded kernel is asked about
 * (numbers in C's forms: 12, 0x7f, -1). Anything else is skipped, so that every input makes a
 * table. The table is served by libfuzz_plugin_table.so (fuzz/plugin_table.c), loaded by
 * attn_plugin_load as a user's plugin is. Beyond memory and UB errors: every entry of a loaded
 * table passes attn_kernel_entry_check, with a name of its own; every error names the plugin;
 * a kernel's reason for not taking a problem is the buffer given and names the kernel. */
#define _GNU_SOURCE /* strtok_r, readlink */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "registry.h"

/* MAX_PAIRS: past the loader's 256, so that its refusal of a longer list is reached */
enum { MAX_KERNELS = 64, MAX_DIMS = 64, MAX_PAIRS = 300, MAX_TUNABLES = 16, MAX_PROBLEMS = 16 };

typedef int (*fwd_fn)(const attn_fwd_params *p, cudaStream_t stream);
typedef struct { /* the version-1 entry (tests/abi_v1/attn_abi.h) */
    const char *name;
    fwd_fn fwd;
} kernel_v1;
typedef struct { /* the version-2 entry (tests/abi_v2/attn_abi.h) */
    const char *name;
    fwd_fn fwd;
    uint32_t caps, dtypes;
    const int *head_dims;
} kernel_v2;

typedef struct {
    attn_kernel k[MAX_KERNELS];
    kernel_v1 v1[MAX_KERNELS];
    kernel_v2 v2[MAX_KERNELS];
    int dims[MAX_KERNELS][MAX_DIMS + 1];
    int pairs[MAX_KERNELS][2 * MAX_PAIRS + 2]; /* two 0s after the last value: a pair never reads past */
    int n, count, abi, has_count;
    attn_tuning tuning;
    int has_tuning;
    attn_tunable tunables[MAX_TUNABLES];
    int values[64];
    int n_tunables;
    attn_fwd_params problem[MAX_PROBLEMS];
    int n_problems;
} table;

static struct {
    char path[4096];
    const attn_kernel **kernels;
    int *count, *abi;
    const attn_tuning **tuning;
} plugin;

static int fwd(const attn_fwd_params *p, cudaStream_t s) { return (void)p, (void)s, ATTN_UNSUPPORTED; }
static int facts(const int *v, attn_dtype dt, int d, attn_config_facts *out) {
    return (void)v, (void)dt, (void)d, (void)out, ATTN_UNSUPPORTED;
}
static int fwd_config(const attn_fwd_params *p, const int *v, cudaStream_t s) {
    return (void)p, (void)v, (void)s, ATTN_UNSUPPORTED;
}
static int config_for(const attn_fwd_params *p, int *v, int *tuned) {
    return (void)p, (void)v, (void)tuned, ATTN_UNSUPPORTED;
}
static int default_for(const attn_fwd_params *p, int *v) { return (void)p, (void)v, ATTN_UNSUPPORTED; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *slash = n > 0 ? (exe[n] = 0, strrchr(exe, '/')) : NULL;
    if (!slash) fprintf(stderr, "fuzz_plugin: cannot read /proc/self/exe\n"), exit(2);
    snprintf(plugin.path, sizeof plugin.path, "%.*s/libfuzz_plugin_table.so", (int)(slash - exe), exe);
    void *lib = dlopen(plugin.path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) fprintf(stderr, "fuzz_plugin: %s\n", dlerror()), exit(2);
    plugin.kernels = dlsym(lib, "fuzz_plugin_kernels");
    plugin.count = dlsym(lib, "fuzz_plugin_count");
    plugin.abi = dlsym(lib, "fuzz_plugin_abi");
    plugin.tuning = dlsym(lib, "fuzz_plugin_tuning");
    if (!plugin.kernels || !plugin.count || !plugin.abi || !plugin.tuning)
        fprintf(stderr, "fuzz_plugin: %s lacks the fuzz_plugin_* variables\n", plugin.path), exit(2);
    return 0;
}

/* the next word's number (0 when there is none or it is not one), within int */
static int number(char **save) {
    const char *w = strtok_r(NULL, " \t", save);
    long long x = w ? strtoll(w, NULL, 0) : 0;
    return x < INT_MIN ? INT_MIN : x > INT_MAX ? INT_MAX : (int)x;
}

static const char *name_word(char **save) {
    const char *w = strtok_r(NULL, " \t", save);
    return w && strcmp(w, "NULL") ? w : NULL; /* points into the input's text, as a plugin's names point into it */
}

/* a kernel line: its numbers go to the list last named (head_dims or pairs), 0-terminated */
static void parse_kernel(table *t, char **save) {
    if (t->n == MAX_KERNELS) return;
    int i = t->n++, nd = 0, np = 0;
    const int **list = NULL;
    attn_kernel *k = &t->k[i];
    *k = (attn_kernel){.name = name_word(save), .fwd = fwd};
    for (const char *w; (w = strtok_r(NULL, " \t", save));) {
        long x = strtol(w, NULL, 0);
        if (!strcmp(w, "nofwd")) k->fwd = NULL;
        else if (!strcmp(w, "caps")) k->caps = (uint32_t)number(save);
        else if (!strcmp(w, "dtypes")) k->dtypes = (uint32_t)number(save);
        else if (!strcmp(w, "head_dims")) list = &k->head_dims, k->head_dims = t->dims[i];
        else if (!strcmp(w, "pairs")) list = &k->head_dim_pairs, k->head_dim_pairs = t->pairs[i];
        else if (!strcmp(w, "NULL") && list) *list = NULL;
        else if (x < INT_MIN || x > INT_MAX || !x || !list || !*list) continue;
        else if (list == &k->head_dims && nd < MAX_DIMS) t->dims[i][nd++] = (int)x;
        else if (list == &k->head_dim_pairs && np < 2 * MAX_PAIRS) t->pairs[i][np++] = (int)x;
    }
    t->dims[i][nd] = 0;
    t->pairs[i][np] = t->pairs[i][np + 1] = 0;
    t->v1[i] = (kernel_v1){k->name, k->fwd};
    t->v2[i] = (kernel_v2){k->name, k->fwd, k->caps, k->dtypes, k->head_dims};
}

static void parse_tuning(table *t, char *first, char **save) {
    t->has_tuning = strcmp(first ? first : "NULL", "NULL") != 0;
    t->tuning = (attn_tuning){.count = first ? (int)strtol(first, NULL, 0) : 0, .tunables = t->tunables,
                              .facts = facts, .fwd_config = fwd_config, .config_for = config_for,
                              .default_for = default_for};
    for (const char *w; (w = strtok_r(NULL, " \t", save));) {
        if (!strcmp(w, "nofacts")) t->tuning.facts = NULL;
        else if (!strcmp(w, "nofwd_config")) t->tuning.fwd_config = NULL;
        else if (!strcmp(w, "noconfig_for")) t->tuning.config_for = NULL;
        else if (!strcmp(w, "nodefault_for")) t->tuning.default_for = NULL;
        else if (!strcmp(w, "notunables")) t->tuning.tunables = NULL;
    }
}

static void parse_tunable(table *t, char **save) {
    if (t->n_tunables == MAX_TUNABLES) return;
    attn_tunable *u = &t->tunables[t->n_tunables++];
    u->name = name_word(save);
    u->count = number(save);
    const char *w = strtok_r(NULL, " \t", save);
    u->values = w && !strcmp(w, "novalues") ? NULL : t->values;
}

static void parse_problem(table *t, char **save) {
    static const int32_t device_array[1]; /* never read: attn_kernel_lacks looks at NULL or not */
    if (t->n_problems == MAX_PROBLEMS) return;
    attn_fwd_params *p = &t->problem[t->n_problems++];
    memset(p, 0, sizeof *p);
    p->batch = 1, p->heads = p->heads_k = 8, p->seqlen_q = p->seqlen_k = 128, p->head_dim = 128;
    p->window_left = p->window_right = -1;
    for (const char *w; (w = strtok_r(NULL, " \t", save));) {
        if (!strcmp(w, "dtype")) p->dtype = (attn_dtype)number(save);
        else if (!strcmp(w, "head_dim")) p->head_dim = number(save);
        else if (!strcmp(w, "head_dim_v")) p->head_dim_v = number(save);
        else if (!strcmp(w, "heads")) p->heads = number(save);
        else if (!strcmp(w, "heads_k")) p->heads_k = number(save);
        else if (!strcmp(w, "window")) p->window_left = number(save), p->window_right = number(save);
        else if (!strcmp(w, "causal")) p->causal = number(save);
        else if (!strcmp(w, "softcap")) p->softcap = (float)number(save);
        else if (!strcmp(w, "varlen")) p->cu_seqlens_q = p->cu_seqlens_k = device_array;
        else if (!strcmp(w, "paged")) p->block_table = device_array, p->page_size = 16;
        else if (!strcmp(w, "seqused")) p->seqused_k = device_array;
    }
}

static void parse(table *t, char *text) {
    t->abi = ATTN_ABI_VERSION;
    char *line_save, *save;
    for (char *line = strtok_r(text, "\n", &line_save); line; line = strtok_r(NULL, "\n", &line_save)) {
        const char *key = strtok_r(line, " \t", &save);
        if (!key) continue;
        if (!strcmp(key, "abi")) t->abi = number(&save);
        else if (!strcmp(key, "count")) t->count = number(&save), t->has_count = 1;
        else if (!strcmp(key, "kernel")) parse_kernel(t, &save);
        else if (!strcmp(key, "tuning")) parse_tuning(t, strtok_r(NULL, " \t", &save), &save);
        else if (!strcmp(key, "tunable")) parse_tunable(t, &save);
        else if (!strcmp(key, "problem")) parse_problem(t, &save);
    }
    if (!t->has_count || t->count > t->n) t->count = t->n;
    /* a count in range must not run past the tunables given (the plugin's own UB otherwise) */
    if (t->tuning.count > t->n_tunables && t->tuning.count <= ATTN_TUNE_MAX_TUNABLES) t->tuning.count = t->n_tunables;
}

/* what the loader promises of a table it returns */
static void check_loaded(const attn_kernel *k, int n) {
    char why[512];
    for (int i = 0; i < n; i++) {
        if (attn_kernel_entry_check(&k[i], i, why, sizeof why)) fuzz_fail("kernel #%d loaded, yet: %s", i, why);
        for (int j = 0; j < i; j++)
            if (!strcmp(k[i].name, k[j].name)) fuzz_fail("kernel name '%s' loaded twice", k[i].name);
    }
}

static void ask(const attn_kernel *k, const attn_fwd_params *p) {
    char buf[512], head[160];
    const char *why = attn_kernel_lacks(k, p, buf, sizeof buf);
    snprintf(head, sizeof head, "kernel '%s' does not take ", k->name);
    if (why && (why != buf || strncmp(buf, head, strlen(head)))) fuzz_fail("a reason not in the buffer or not naming the kernel: %s", why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static table t;
    char *text = fuzz_text(data, size), err[1024], head[4200];
    memset(&t, 0, sizeof t);
    parse(&t, text);
    *plugin.kernels = t.abi == 1 ? (const attn_kernel *)(const void *)t.v1
                    : t.abi == 2 ? (const attn_kernel *)(const void *)t.v2
                                 : t.k;
    *plugin.count = t.count;
    *plugin.abi = t.abi;
    *plugin.tuning = t.has_tuning ? &t.tuning : NULL;
    if (t.n == 0 && !t.has_count) *plugin.kernels = NULL; /* a plugin with no table at all */

    int n = 0;
    const attn_kernel *k = attn_plugin_load(plugin.path, &n, err, sizeof err);
    snprintf(head, sizeof head, "plugin %s: ", plugin.path);
    if (!k && strncmp(err, head, strlen(head))) fuzz_fail("an error that does not name the plugin: %s", err);
    if (k) {
        check_loaded(k, n);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < t.n_problems; j++) ask(&k[i], &t.problem[j]);
            const attn_tuning *tu = attn_plugin_find_tuning(plugin.path, k[i].name, err, sizeof err);
            if (!tu && err[0] && strncmp(err, head, strlen(head))) fuzz_fail("an error that does not name the plugin: %s", err);
        }
        if (k != t.k) free((void *)k); /* an older table, converted: the loader keeps it for the process */
    }
    free(text);
    return 0;
}
