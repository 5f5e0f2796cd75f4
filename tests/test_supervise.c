/* The case supervisor: a crash, a hang or a broken context fails one case, and the cases
 * after it run in a new process; a set-up that refuses ends the run with its status. */
#include "unit.h"
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "supervise.h"

typedef struct {
    const char *plan; /* one letter per case: p pass, f fail, u unsupported, c crash, h hang, s stop after */
    int init_status;
    pid_t pids[16];   /* which process ran each case (children write them to pid_file) */
    char pid_file[64];
} script;

static int init_case(void *ctx) { return ((script *)ctx)->init_status; }

static const char *label_case(int i, void *ctx) {
    (void)ctx;
    static char buf[16];
    snprintf(buf, sizeof buf, "case%d", i);
    return buf;
}

/* Records which process ran case i (a line "i pid" in the pid file). */
static void note_pid(script *s, int i) {
    FILE *f = fopen(s->pid_file, "a");
    fprintf(f, "%d %d\n", i, (int)getpid());
    fclose(f);
}

static attn_case_verdict run_case(int i, void *ctx, int *stop) {
    script *s = ctx;
    note_pid(s, i);
    switch (s->plan[i]) {
    case 'f': return ATTN_CASE_FAILED;
    case 'u': return ATTN_CASE_UNSUPPORTED;
    case 'c': raise(SIGSEGV); return ATTN_CASE_PASSED;
    case 'h': pause(); return ATTN_CASE_PASSED;
    case 's': *stop = 1; return ATTN_CASE_PASSED;
    default: return ATTN_CASE_PASSED;
    }
}

/* Runs the script; pids[i] = the process that ran case i (0: none). */
static int run_script(script *s, attn_case_verdict *v, double timeout, FILE *log) {
    strcpy(s->pid_file, "/tmp/attn_unit_pids_XXXXXX");
    close(mkstemp(s->pid_file));
    attn_case_runner r = {init_case, run_case, label_case, s, (int)strlen(s->plan), timeout};
    int rc = attn_run_cases(&r, v, log);
    memset(s->pids, 0, sizeof s->pids);
    FILE *f = fopen(s->pid_file, "r");
    int i, pid;
    while (fscanf(f, "%d %d", &i, &pid) == 2) s->pids[i] = pid;
    fclose(f);
    unlink(s->pid_file);
    return rc;
}

static FILE *quiet(void) { return fopen("/dev/null", "w"); }

START_TEST(verdicts_in_one_child) {
    script s = {.plan = "pfup", .init_status = 0};
    attn_case_verdict v[4];
    FILE *log = quiet();
    ck_assert_int_eq(run_script(&s, v, 10, log), 0);
    ck_assert_int_eq(v[0], ATTN_CASE_PASSED);
    ck_assert_int_eq(v[1], ATTN_CASE_FAILED);
    ck_assert_int_eq(v[2], ATTN_CASE_UNSUPPORTED);
    ck_assert_int_eq(v[3], ATTN_CASE_PASSED);
    ck_assert_int_ne(s.pids[0], getpid()); /* in a child, */
    ck_assert_int_eq(s.pids[0], s.pids[3]); /* one child for all */
    fclose(log);
}
END_TEST

START_TEST(crash_fails_one_case_and_the_rest_run) {
    script s = {.plan = "pcpp", .init_status = 0};
    attn_case_verdict v[4];
    FILE *log = quiet();
    ck_assert_int_eq(run_script(&s, v, 10, log), 0);
    ck_assert_int_eq(v[0], ATTN_CASE_PASSED);
    ck_assert_int_eq(v[1], ATTN_CASE_FAILED);
    ck_assert_int_eq(v[2], ATTN_CASE_PASSED);
    ck_assert_int_eq(v[3], ATTN_CASE_PASSED);
    ck_assert_int_eq(s.pids[0], s.pids[1]);
    ck_assert_int_ne(s.pids[1], s.pids[2]); /* a new process after the crash */
    fclose(log);
}
END_TEST

START_TEST(hang_is_killed_at_the_case_timeout) {
    script s = {.plan = "hp", .init_status = 0};
    attn_case_verdict v[2];
    FILE *log = quiet();
    ck_assert_int_eq(run_script(&s, v, 0.5, log), 0);
    ck_assert_int_eq(v[0], ATTN_CASE_FAILED);
    ck_assert_int_eq(v[1], ATTN_CASE_PASSED);
    fclose(log);
}
END_TEST

START_TEST(stop_child_starts_a_fresh_process) {
    script s = {.plan = "psp", .init_status = 0};
    attn_case_verdict v[3];
    FILE *log = quiet();
    ck_assert_int_eq(run_script(&s, v, 10, log), 0);
    ck_assert_int_eq(v[1], ATTN_CASE_PASSED); /* its own verdict stands */
    ck_assert_int_eq(v[2], ATTN_CASE_PASSED);
    ck_assert_int_eq(s.pids[0], s.pids[1]);
    ck_assert_int_ne(s.pids[1], s.pids[2]);
    fclose(log);
}
END_TEST

START_TEST(init_status_ends_the_run) {
    script s = {.plan = "pp", .init_status = 77};
    attn_case_verdict v[2];
    FILE *log = quiet();
    ck_assert_int_eq(run_script(&s, v, 10, log), 77);
    ck_assert_int_eq(v[0], ATTN_CASE_NOT_RUN);
    ck_assert_int_eq(s.pids[0], 0);
    fclose(log);
}
END_TEST

START_TEST(crash_message_names_the_case) {
    script s = {.plan = "c", .init_status = 0};
    attn_case_verdict v[1];
    char path[64];
    FILE *log = fopen(attn_unit_temp_file(path, ""), "w");
    run_script(&s, v, 10, log);
    fclose(log);
    char text[512] = {0};
    FILE *f = fopen(path, "r");
    ck_assert_uint_gt(fread(text, 1, sizeof text - 1, f), 0);
    fclose(f);
    unlink(path);
    ck_assert_msg(strstr(text, "CASE case0 FAILED crashed") && strstr(text, "signal 11"), "log: %s", text);
}
END_TEST

int main(void) {
    Suite *s = suite_create("supervise");
    TCase *tc = tcase_create("cases");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, verdicts_in_one_child);
    tcase_add_test(tc, crash_fails_one_case_and_the_rest_run);
    tcase_add_test(tc, hang_is_killed_at_the_case_timeout);
    tcase_add_test(tc, stop_child_starts_a_fresh_process);
    tcase_add_test(tc, init_status_ends_the_run);
    tcase_add_test(tc, crash_message_names_the_case);
    suite_add_tcase(s, tc);
    return attn_unit_run(s);
}
