/* The thresholds and tolerance loaders refuse, with file and line, what they cannot hold:
 * what inih would read other than as written (a long line cut, a long section name cut, an
 * indented line joined to the value above, a NUL byte), a section or key given twice (inih
 * hands both over and the last one won), a section with no key (dropped unseen), class
 * numbers that do not fit in an int (sscanf wrapped them), and a handler's error hidden by a
 * later line's. Written through files, as the programs load them. */
#include "unit.h"
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "thresholds.h"
#include "verdict.h"

static char path[64];

/* text[0..len) (NULs and all) to a new file under /tmp */
static const char *write_bytes(const char *text, size_t len) {
    strcpy(path, "/tmp/attn_unit_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

#define GPU "[gpu]\nname = Test GPU\n"
#define PEAKS "[peaks]\nfp16_tflops = 700\nbf16_tflops = 710\nbandwidth_gbs = 3000\n"
#define HEAD GPU PEAKS /* 6 lines */
#define OUTPUT "[output]\nmax_factor = 2\natol_steps = 2\nmean_factor = 1.5\nmean_eps_steps = 0.01\n"
#define LSE "[lse]\natol = 1e-3\nrtol = 1e-4\n"
#define GRADIENTS "[gradients]\nmax_factor = 3\natol_steps = 2\nmean_factor = 1.5\nmean_eps_steps = 0.01\n"

/* text[0..len) loaded as a thresholds file (tolerance 0) or a tolerance file must be refused
 * with `expect` (%s: the file's path) in the message. */
static void refused(int tolerance, const char *text, size_t len, const char *expect) {
    char err[1024] = "", want[1024];
    write_bytes(text, len);
    snprintf(want, sizeof want, expect, path);
    attn_thresholds t;
    attn_tolerance tol;
    int rc = tolerance ? attn_tolerance_load(path, &tol, err, sizeof err) : attn_thresholds_load(path, &t, err, sizeof err);
    unlink(path);
    if (!rc && !tolerance) attn_thresholds_free(&t);
    ck_assert_msg(rc != 0, "loaded, expected '%s'", want);
    ck_assert_msg(strstr(err, want) != NULL, "expected '%s' in '%s'", want, err);
}
#define THRESHOLDS_ERROR(body, expect) refused(0, HEAD body, sizeof(HEAD body) - 1, expect)
#define TOLERANCE_ERROR(text, expect) refused(1, text, sizeof(text) - 1, expect)

/* text loaded as a thresholds file, or the test fails */
static void load_ok(const char *text, attn_thresholds *t) {
    char err[1024] = "";
    int rc = attn_thresholds_load(write_bytes(text, strlen(text)), t, err, sizeof err);
    unlink(path);
    ck_assert_msg(rc == 0, "%s", err);
}

START_TEST(duplicate_key) {
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\nmin_roofline = 0.6\n",
                     "%s:10: key 'min_roofline' given twice in section [k * * * 1-8] (lines 9 and 10)");
    THRESHOLDS_ERROR("[peaks]\n", "%s:7: section [peaks] given twice (lines 3 and 7)");
    TOLERANCE_ERROR(OUTPUT "max_factor = 3\n" LSE,
                    "%s:6: key 'max_factor' given twice in section [output] (lines 2 and 6)");
    TOLERANCE_ERROR(OUTPUT LSE "[output]\nmax_factor = 3\n", "%s:9: section [output] given twice (lines 1 and 9)");
}
END_TEST

START_TEST(duplicate_section) {
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n[k * * full 1-8]\nmin_speedup_reference = 1\n"
                     "min_roofline = 0.5\n[k * * * 1-8]\nmin_speedup_reference = 2\nmin_roofline = 0.5\n",
                     "%s:13: section [k * * * 1-8] given twice (lines 7 and 13)");
}
END_TEST

/* inih keeps 49 characters of a section name: [my_hopper_plugin_v3 bf16 d64 decode 1-131072
 * q1-16] was read as q1-1. 49 characters are read whole. */
START_TEST(long_section_name) {
    THRESHOLDS_ERROR("[my_hopper_plugin_v3 bf16 d64 decode 1-131072 q1-16]\nmin_roofline = 0.5\n",
                     "%s:7: section name [my_hopper_plugin_v3 bf16 d64 decode 1-131072 q1-16] has 50 characters: "
                     "inih keeps 49 (it would read [my_hopper_plugin_v3 bf16 d64 decode 1-131072 q1-1])");
    ck_assert_int_eq(strlen("my_hopper_plugin_v3 bf16 d64 decode 1-131072 q1-9"), 49);
    attn_thresholds t;
    load_ok(HEAD "[my_hopper_plugin_v3 bf16 d64 decode 1-131072 q1-9]\nmin_roofline = 0.5\n", &t);
    ck_assert_int_eq(t.classes[0].q_hi, 9);
    attn_thresholds_free(&t);
}
END_TEST

/* inih reads 198 characters of a line and the rest as the next line: here a comment, so the
 * GPU's name and a minimum were cut without a word. 198 characters are read whole. */
START_TEST(long_line) {
    char text[1024], name[300];
    memset(name, 'A', 192), name[192] = 0;
    int n = snprintf(text, sizeof text, "[gpu]\nname = %s;%060d\n" PEAKS, name, 0);
    refused(0, text, (size_t)n, "%s:2: a line of 260 characters: inih reads at most 198");
    n = snprintf(text, sizeof text, HEAD "[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5%0191d;9\n", 0);
    refused(0, text, (size_t)n, "%s:9: a line of 211 characters: inih reads at most 198");
    n = snprintf(text, sizeof text, OUTPUT LSE "; %0240d\n", 0);
    refused(1, text, (size_t)n, "%s:9: a line of 242 characters: inih reads at most 198");
    memset(name, 'A', 191), name[191] = 0; /* 'name = ' and 191 characters: 198 */
    snprintf(text, sizeof text, "[gpu]\nname = %s\n" PEAKS "[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
             name);
    attn_thresholds t;
    load_ok(text, &t);
    ck_assert_str_eq(t.gpu_name, name);
    attn_thresholds_free(&t);
}
END_TEST

/* An indented line after a key is more of its value to inih (the GPU was named 'extra'). */
START_TEST(continuation_line) {
    refused(0, GPU "  extra\n" PEAKS, sizeof(GPU "  extra\n" PEAKS) - 1,
            "%s:3: an indented line: inih reads it as more of the value of 'name' (line 2)");
    TOLERANCE_ERROR(OUTPUT "  atol_steps = 3\n" LSE,
                    "%s:6: an indented line: inih reads it as more of the value of 'mean_eps_steps' (line 5)");
    attn_thresholds t; /* indented lines that inih reads as written */
    load_ok("  [gpu]\n  name = Test GPU\n\t; a comment\n" PEAKS "[k * * * 1-8]\nmin_speedup_reference = 1\n"
            "min_roofline = 0.5\n", &t);
    ck_assert_str_eq(t.gpu_name, "Test GPU");
    attn_thresholds_free(&t);
}
END_TEST

START_TEST(nul_byte) {
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\0 0\n", "%s:9: a NUL byte");
    TOLERANCE_ERROR(OUTPUT LSE "; \0\n", "%s:9: a NUL byte");
}
END_TEST

/* sscanf's %d wrapped these (1-4294969344 read as 1-2048, d99999999999 as 1215752191) */
START_TEST(class_number_overflow) {
    THRESHOLDS_ERROR("[k * * * 1-4294969344]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:8: section [k * * * 1-4294969344]: 4294969344 does not fit in an int");
    THRESHOLDS_ERROR("[k * d99999999999 * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:8: section [k * d99999999999 * 1-8]: 99999999999 does not fit in an int");
    THRESHOLDS_ERROR("[k * * decode 1-8 q2-2147483648]\nmin_roofline = 0.5\n",
                     "%s:8: section [k * * decode 1-8 q2-2147483648]: 2147483648 does not fit in an int");
    char text[512], err[512];
    snprintf(text, sizeof text, "%s[k * d64 decode 1-2147483647 q2147483647]\nmin_roofline = 0.5\n", HEAD);
    attn_thresholds t;
    ck_assert_msg(attn_thresholds_load(write_bytes(text, strlen(text)), &t, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_int_eq(t.classes[0].s_hi, INT_MAX);
    ck_assert_int_eq(t.classes[0].q_lo, INT_MAX);
    attn_thresholds_free(&t);
}
END_TEST

/* sscanf took a sign, or a space, before a number */
START_TEST(class_number_form) {
    THRESHOLDS_ERROR("[k * d+64 * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:8: section [k * d+64 * 1-8]: expected [<kernel>");
    THRESHOLDS_ERROR("[k * * * +1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:8: section [k * * * +1-8]: expected [<kernel>");
    THRESHOLDS_ERROR("[k * * * 1--8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:8: section [k * * * 1--8]: expected [<kernel>");
    THRESHOLDS_ERROR("[k * * decode 1-8 q-3]\nmin_roofline = 0.5\n", "%s:8: section [k * * decode 1-8 q-3]: expected [<kernel>");
}
END_TEST

/* A class with no key was dropped without a word; an empty GPU name was taken. */
START_TEST(empty_section_and_name) {
    THRESHOLDS_ERROR("[k * * * 1-8]\n; nothing\n[k * * * 9-16]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n",
                     "%s:7: section [k * * * 1-8] has no keys");
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n[k * * * 9-16]\n",
                     "%s:10: section [k * * * 9-16] has no keys");
    refused(0, "[gpu]\nname =\n" PEAKS, sizeof("[gpu]\nname =\n" PEAKS) - 1, "%s:2: [gpu] name: expected the GPU's name");
}
END_TEST

/* The first error is the one reported: a later line's no longer overwrites its message. */
START_TEST(first_error_reported) {
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_roofline = 0\ncolour = red\n", "%s:8: [k * * * 1-8] min_roofline: expected a positive number");
    TOLERANCE_ERROR("[output]\nmax_factor = two\ncolour = red\n", "%s:2: [output] max_factor: expected a non-negative number");
    TOLERANCE_ERROR(OUTPUT LSE "[x]\ny = 1\n", "%s:10: unknown key 'y' in section [x]");
}
END_TEST

/* NaN, inf, negative (-0 too) are refused; tolerance factors may be 0. */
START_TEST(tolerance_numbers) {
    TOLERANCE_ERROR("[output]\nmax_factor = -0\n", "%s:2: [output] max_factor: expected a non-negative number, got '-0'");
    TOLERANCE_ERROR("[output]\nmax_factor = nan\n", "%s:2: [output] max_factor: expected a non-negative number");
    TOLERANCE_ERROR("[output]\nmax_factor = inf\n", "%s:2: [output] max_factor: expected a non-negative number");
    TOLERANCE_ERROR("[output]\nmax_factor = 1e999\n", "%s:2: [output] max_factor: expected a non-negative number");
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = nan\n", "%s:8: [k * * * 1-8] min_speedup_reference: expected a positive number");
    THRESHOLDS_ERROR("[k * * * 1-8]\nmin_speedup_reference = -inf\n", "%s:8: [k * * * 1-8] min_speedup_reference: expected a positive number");
}
END_TEST

/* The buffer entry points (for the fuzz targets) read what the files do. */
START_TEST(from_memory) {
    char text[512], err[512];
    int n = snprintf(text, sizeof text, "%s[k * * * 1-8]\nmin_speedup_reference = 1\nmin_roofline = 0.5\n", HEAD);
    attn_thresholds t;
    ck_assert_msg(attn_thresholds_parse(text, (size_t)n, "mem.ini", &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(t.nclasses, 1);
    ck_assert_str_eq(t.path, "mem.ini");
    attn_thresholds_free(&t);
    ck_assert_int_ne(attn_thresholds_parse(text, (size_t)n - 3, "mem.ini", &t, err, sizeof err), 0); /* 'min_roofline = 0' */
    ck_assert_str_eq(err, "mem.ini:9: [k * * * 1-8] min_roofline: expected a positive number, got '0'");
    attn_tolerance tol;
    const char good[] = GRADIENTS OUTPUT LSE;
    ck_assert_msg(attn_tolerance_parse(good, sizeof good - 1, "tol.ini", &tol, err, sizeof err) == 0, "%s", err);
    ck_assert_double_eq(tol.lse_rtol, 1e-4);
    ck_assert_int_ne(attn_tolerance_parse(good, sizeof good - 3, "tol.ini", &tol, err, sizeof err), 0);
    ck_assert_str_eq(err, "tol.ini:13: [lse] rtol: expected a non-negative number, got '1e-'");
}
END_TEST

int main(void) {
    Suite *s = suite_create("ini_loaders");
    TCase *c = tcase_create("refused");
    tcase_add_test(c, duplicate_key);
    tcase_add_test(c, duplicate_section);
    tcase_add_test(c, long_section_name);
    tcase_add_test(c, long_line);
    tcase_add_test(c, continuation_line);
    tcase_add_test(c, nul_byte);
    tcase_add_test(c, class_number_overflow);
    tcase_add_test(c, class_number_form);
    tcase_add_test(c, empty_section_and_name);
    tcase_add_test(c, first_error_reported);
    tcase_add_test(c, tolerance_numbers);
    tcase_add_test(c, from_memory);
    suite_add_tcase(s, c);
    return attn_unit_run(s);
}
