/* Test cases in a supervised child process (supervise.h). */
#define _GNU_SOURCE
#include "supervise.h"

#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STARTED = -1 };

typedef struct { /* one message from child to parent */
    int32_t index, verdict; /* verdict STARTED: the case began */
} report;

static void send_report(int fd, int index, int verdict) {
    report m = {index, verdict};
    ssize_t n;
    do n = write(fd, &m, sizeof m);
    while (n < 0 && errno == EINTR);
}

/* The child: set up, then cases from `first` on until done or asked to stop. */
static void child_main(const attn_case_runner *r, int first, int fd) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the parent (CTest's timeout kills it) */
    if (getppid() == 1) _exit(1);
    int rc = r->init ? r->init(r->ctx) : 0;
    fflush(stdout);
    fflush(stderr);
    if (rc) _exit(rc);
    for (int i = first; i < r->n_cases; i++) {
        send_report(fd, i, STARTED);
        int stop = 0;
        attn_case_verdict v = r->run(i, r->ctx, &stop);
        fflush(stdout);
        fflush(stderr);
        send_report(fd, i, (int)v);
        if (stop) break;
    }
    _exit(0); /* no exit handlers: the driver releases the context with the process */
}

static void describe_status(int status, char *buf, size_t len) {
    if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

typedef struct {
    int current;   /* the case running now, or -1 */
    int next;      /* the first case without a verdict */
    int started;   /* some case started in this child */
    int timed_out; /* the current case was killed for its time */
} child_state;

/* Reads the child's reports until it closes the pipe or overruns a case's time. */
static void watch_child(const attn_case_runner *r, int fd, pid_t pid, attn_case_verdict *verdicts,
                        child_state *st, FILE *log) {
    double started_at = 0;
    for (;;) {
        int wait_ms = -1;
        if (st->current >= 0 && r->case_timeout_s > 0) {
            double left = started_at + r->case_timeout_s - attn_wall_s();
            wait_ms = left > 0 ? (int)(left * 1000) + 1 : 0;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, wait_ms);
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            kill(pid, SIGKILL);
            fprintf(log, "CASE %s FAILED hung: no verdict within %.0f s; its process was killed\n",
                    r->label(st->current, r->ctx), r->case_timeout_s);
            st->timed_out = 1;
            return;
        }
        report m;
        ssize_t n = read(fd, &m, sizeof m);
        if (n < 0 && errno == EINTR) continue;
        if (n != (ssize_t)sizeof m || m.index < 0 || m.index >= r->n_cases) return; /* closed */
        if (m.verdict == STARTED) {
            st->current = m.index, st->started = 1;
            started_at = attn_wall_s();
        } else {
            verdicts[m.index] = (attn_case_verdict)m.verdict;
            st->current = -1, st->next = m.index + 1;
        }
    }
}

int attn_run_cases(const attn_case_runner *r, attn_case_verdict *verdicts, FILE *log) {
    for (int i = 0; i < r->n_cases; i++) verdicts[i] = ATTN_CASE_NOT_RUN;
    int next = 0, first_child = 1;
    while (next < r->n_cases) {
        int fds[2];
        if (pipe(fds)) {
            fprintf(log, "cannot create a pipe: %s\n", strerror(errno));
            return 1;
        }
        fflush(stdout);
        fflush(stderr);
        fflush(log);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(log, "cannot fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid == 0) {
            close(fds[0]);
            child_main(r, next, fds[1]);
        }
        close(fds[1]);
        child_state st = {-1, next, 0, 0};
        watch_child(r, fds[0], pid, verdicts, &st, log);
        close(fds[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        char how[128];
        describe_status(status, how, sizeof how);
        if (st.current >= 0) { /* died or hung inside a case: that case failed */
            verdicts[st.current] = ATTN_CASE_FAILED;
            if (!st.timed_out)
                fprintf(log, "CASE %s FAILED crashed: its process %s while running it\n", r->label(st.current, r->ctx),
                        how);
            st.next = st.current + 1;
        } else if (!st.started) { /* ended before any case: its set-up refused */
            int code = WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1;
            if (first_child) return code;
            fprintf(log, "a new test process for case %s could not start (it %s); %d cases not run\n",
                    r->label(next, r->ctx), how, r->n_cases - next);
            return 0;
        }
        next = st.next;
        first_child = 0;
    }
    return 0;
}

int attn_run_cases_in_process(const attn_case_runner *r, attn_case_verdict *verdicts) {
    for (int i = 0; i < r->n_cases; i++) verdicts[i] = ATTN_CASE_NOT_RUN;
    int rc = r->init ? r->init(r->ctx) : 0;
    if (rc) return rc;
    for (int i = 0; i < r->n_cases; i++) {
        int stop = 0;
        verdicts[i] = r->run(i, r->ctx, &stop);
        if (stop) break;
    }
    return 0;
}
