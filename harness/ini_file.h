/* INI files (thresholds/<gpu>.ini, thresholds/tolerance.ini) read with inih, Debian's libinih,
 * and held to what inih reads as written: every line whole, every section name whole, each
 * section and each key once. The loaders (thresholds.c, verdict.c) check the values. */
#ifndef ATTN_INI_FILE_H
#define ATTN_INI_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* inih keeps this many characters of a section name (its MAX_SECTION, 50, with the NUL) and
 * silently drops the rest; scripts/set_thresholds.py refuses to write a longer one. */
enum { ATTN_INI_MAX_SECTION = 49 };

/* One 'key = value' of section `section`, for the file's owner to check: 1, or 0 with what
 * was wrong in why (the line is added). */
typedef int (*attn_ini_key_fn)(void *user, const char *section, const char *key, const char *value,
                               char *why, size_t whylen);

/* Parses text[0..len) with inih ('[section]', 'key = value' or 'key: value', ';' and '#'
 * comments, a ';' after a space ends a value), calling `key` for each value. Refuses, at its
 * line: a line longer than inih's line buffer (198 characters in Debian's build), a section
 * name longer than ATTN_INI_MAX_SECTION, an indented line after a key (inih would read it as
 * more of that key's value), a NUL byte, a section or a key given twice (naming both lines),
 * a section with no key, and what inih cannot parse. Returns 0, or 1 with
 * "<file>:<line>: <what>" in err. */
int attn_ini_parse(const char *text, size_t len, const char *file, attn_ini_key_fn key, void *user, char *err,
                   size_t errlen);

/* The same on the file at `path`; `what` names it when it cannot be read ("<path>: cannot open
 * <what>"). */
int attn_ini_load(const char *path, const char *what, attn_ini_key_fn key, void *user, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
