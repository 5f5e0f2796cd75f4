/* The programs' command lines: --help, and getopt_long's errors as one line that names the
 * argument (getopt's own message, "invalid option", names no program's option list). */
#ifndef ATTN_ARGS_H
#define ATTN_ARGS_H

#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* 1 when s asks for the usage: --help or -h */
static inline int attn_is_help(const char *s) { return !strcmp(s, "--help") || !strcmp(s, "-h"); }

/* The option string for getopt_long of a program whose options are all long ones: -h, and
 * ':' so that a missing value returns ':' (set opterr = 0 too). */
#define ATTN_GETOPT_SHORT ":h"

/* What getopt_long's '?' or ':' says, naming the argument: "unknown option '--x'" or
 * "option '--x' needs a value". */
static inline const char *attn_getopt_error(int c, char **argv, char *buf, size_t len) {
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    char short_opt[3] = {'-', (char)optopt, 0};
    if (optopt && strncmp(arg, "--", 2)) arg = short_opt; /* an unknown -x inside a group */
    snprintf(buf, len, c == ':' ? "option '%s' needs a value" : "unknown option '%s'", arg);
    return buf;
}

#endif
