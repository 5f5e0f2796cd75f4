/* The tuned-file parser (harness/tuned.c): a tuned file's bytes, exactly as many as given (no
 * NUL after them), read for flash2 with flash2's tunables and values as the configure step
 * passes them (kernels/flash2/space.cmake, from space.h); and the input's first line as a
 * tunables spec (attn_tuned_spec_parse, the text attn_shapes --tuned takes). Beyond memory and
 * UB errors: every error names the file and line; every configuration handed back is one of the
 * kernel's: fp16 or bf16, a head dim and a seqlen range that are not empty, each tunable's value
 * among those it takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tuned.h"

static const char FLASH2[] = "warps=4|8,row_tiles=1|2,block_n=32|64|128,stages=2|3,q_in_regs=0|1,min_blocks=1|2|3|4";
static const char FILE_NAME[] = "x.tuned.txt";

static void check_entry(void *user, const attn_tuned_entry *e) {
    const attn_tuned_spec *spec = user;
    if (!e->gpu || !e->dtype || (strcmp(e->dtype, "fp16") && strcmp(e->dtype, "bf16")))
        fuzz_fail("an entry with GPU %s and dtype %s", e->gpu ? e->gpu : "NULL", e->dtype ? e->dtype : "NULL");
    if (e->head_dim < 1 || (e->causal != 0 && e->causal != 1) || e->seqlen_lo < 1 || e->seqlen_hi < e->seqlen_lo)
        fuzz_fail("an entry with d%d causal %d range %d-%d", e->head_dim, e->causal, e->seqlen_lo, e->seqlen_hi);
    for (int i = 0; i < spec->n; i++) {
        const attn_tuned_tunable *u = &spec->tunable[i];
        int ok = u->n_allowed == 0;
        for (int j = 0; j < u->n_allowed; j++) ok |= u->allowed[j] == e->values[i];
        if (!ok) fuzz_fail("an entry with %s=%d, not a value it takes", u->name, e->values[i]);
    }
}

/* the first line as a spec (empty: a kernel without tunables): what it accepts has named tunables */
static void check_spec(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    char *text = fuzz_text(data, nl ? (size_t)(nl - data) : size), err[512];
    attn_tuned_spec spec;
    if (attn_tuned_spec_parse(text, &spec, err, sizeof err) == 0) {
        if (spec.n < 0 || spec.n > ATTN_TUNED_MAX_TUNABLES) fuzz_fail("a spec of %d tunables", spec.n);
        for (int i = 0; i < spec.n; i++)
            if (!spec.tunable[i].name[0] || spec.tunable[i].n_allowed < 0 || spec.tunable[i].n_allowed > ATTN_TUNED_MAX_ALLOWED)
                fuzz_fail("tunable #%d of a spec: '%s' with %d values", i, spec.tunable[i].name, spec.tunable[i].n_allowed);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static attn_tuned_spec spec;
    static int have_spec;
    char err[1024];
    if (!have_spec) {
        if (attn_tuned_spec_parse(FLASH2, &spec, err, sizeof err)) fuzz_fail("flash2's spec: %s", err);
        have_spec = 1;
    }
    /* data: exactly size bytes on libFuzzer's heap, so a read past them is ASan's */
    if (attn_tuned_parse((const char *)data, size, FILE_NAME, "flash2", &spec, check_entry, &spec, err, sizeof err) &&
        strncmp(err, FILE_NAME, strlen(FILE_NAME)))
        fuzz_fail("an error that does not name the file: %s", err);
    check_spec(data, size);
    return 0;
}
