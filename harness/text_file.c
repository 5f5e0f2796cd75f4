#include "text_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int attn_text_file_read(const char *path, char **text, size_t *len) {
    *text = NULL, *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return errno ? errno : EIO;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int e = buf ? 0 : ENOMEM;
    while (!e) {
        if (n + 1 == cap) {
            char *bigger = cap < ((size_t)-1) / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                e = ENOMEM;
                break;
            }
            buf = bigger, cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (!got) {
            if (ferror(f)) e = errno ? errno : EIO;
            break;
        }
    }
    fclose(f);
    if (e) {
        free(buf);
        return e;
    }
    buf[n] = 0;
    *text = buf, *len = n;
    return 0;
}
