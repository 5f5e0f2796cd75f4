/* Prints the kernel names of one plugin, one per line, for CMake's configure step.
 * Exit 1 with the loader's reason on stderr when the plugin is unusable. */
#include <stdio.h>

#include "registry.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <plugin.so>\n", argv[0]);
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
