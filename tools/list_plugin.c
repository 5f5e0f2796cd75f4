/* Prints the kernel names of one plugin, one per line, for CMake's configure step.
 * Exit 1 with the loader's reason on stderr when the plugin is unusable. */
#include <stdio.h>
#include <string.h>

#include "registry.h"

#define USAGE "usage: attn_list_plugin PLUGIN.so\n"

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf(USAGE "Prints the kernel names of one plugin, one per line (CMake's configure step runs it).\n"
               "Exit 0, 1 the plugin is unusable (the loader's reason on stderr), 2 bad arguments.\n");
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "attn_list_plugin: expected one plugin path, got %d arguments\n" USAGE, argc - 1);
        return 2;
    }
    if (argv[1][0] == '-') { /* a plugin path that starts with '-': ./-name.so */
        fprintf(stderr, "attn_list_plugin: unknown option '%s'\n" USAGE, argv[1]);
        return 2;
    }
    char err[1024];
    int n;
    const attn_kernel *k = attn_plugin_load(argv[1], &n, err, sizeof err);
    if (!k) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) printf("%s\n", k[i].name);
    return 0;
}
