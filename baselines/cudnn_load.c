/* The cuDNN baseline's library: libcudnn found and loaded with dlopen (cudnn_sdpa.h says
 * where it looks), its entry points, its version, the handle; and cuDNN's messages. */
#define _GNU_SOURCE /* dladdr, dlinfo, realpath */
#include "cudnn_sdpa_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

static const char *status_name(const attn_cudnn *c, cudnn_status st) {
    const char *s = c->f.GetErrorString ? c->f.GetErrorString(st) : NULL;
    return s ? s : "CUDNN_STATUS_?";
}

void sdpa_last_error(const attn_cudnn *c, char *buf, size_t len) {
    buf[0] = 0;
    if (!c->f.GetLastErrorString) return;
    c->f.GetLastErrorString(buf, len);
    buf[len - 1] = 0;
    for (char *s = buf; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

/* "<function> (<what>[, <attribute>]): <status name> (<code>) <last error text>" */
void sdpa_msg(const attn_cudnn *c, char *why, size_t whylen, cudnn_status st,
              const char *fn, const char *what, const char *attr) {
    char last[4096];
    sdpa_last_error(c, last, sizeof last);
    put(why, whylen, "%s (%s%s%s): %s (%d)%s%s", fn, what, attr ? ", " : "", attr ? attr : "",
        status_name(c, st), (int)st, last[0] ? " " : "", last);
}

/* ---- library loading ------------------------------------------------------------------ */

static int sym(void *lib, const char *name, void *fnptr, int required, char *why, size_t whylen) {
    void *s = dlsym(lib, name);
    if (!s && required) {
        const char *e = dlerror();
        put(why, whylen, "libcudnn: symbol %s not found: %s", name, e ? e : "?");
        return -1;
    }
    memcpy(fnptr, &s, sizeof s); /* object pointer -> function pointer, as POSIX allows */
    return 0;
}

/* The default search: libcudnn.so.9, libcudnn.so, then beside the CUDA runtime; the name
 * that loaded goes to requested; on failure every name tried, with dlerror's reason, goes
 * to why. */
static void *load_default_library(char *requested, size_t rlen, char *why, size_t whylen) {
    char errs[1536] = "";
    size_t el = 0;
    void *lib = NULL;
    static const char *const names[2] = {"libcudnn.so.9", "libcudnn.so"};
    for (int i = 0; i < 2 && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) snprintf(requested, rlen, "%s", names[i]);
        else {
            const char *e = dlerror();
            int k = snprintf(errs + el, sizeof errs - el, "%s%s not found: %s", el ? "; " : "",
                             names[i], e ? e : "?");
            if (k > 0) el = el + (size_t)k < sizeof errs ? el + (size_t)k : sizeof errs - 1;
        }
    }
    if (!lib) { /* next to the CUDA runtime this process uses (toolkit installs) */
        Dl_info info;
        void *rt = dlsym(RTLD_DEFAULT, "cudaMalloc");
        if (rt && dladdr(rt, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
            char path[1024];
            const char *slash = strrchr(info.dli_fname, '/');
            int len = (int)(slash - info.dli_fname);
            snprintf(path, sizeof path, "%.*s/libcudnn.so.9", len, info.dli_fname);
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) snprintf(requested, rlen, "%s", path);
            else {
                const char *e = dlerror();
                snprintf(errs + el, sizeof errs - el, "; %s: %s", path, e ? e : "?");
            }
        }
    }
    if (!lib) put(why, whylen, "%s", errs);
    return lib;
}

/* The build's default library: the CMake cache option ATTN_CUDNN_LIB, empty when unset. */
#ifdef ATTN_CUDNN_DEFAULT_LIB
static const char build_default_lib[] = ATTN_CUDNN_DEFAULT_LIB;
#else
static const char build_default_lib[] = "";
#endif

static const char CHOSEN_BY_ENV[] = "ATTN_CUDNN_LIB (environment)";
static const char CHOSEN_BY_CMAKE[] = "ATTN_CUDNN_LIB (CMake option, build default)";
static const char CHOSEN_BY_SEARCH[] = "default search";

/* libcudnn: $ATTN_CUDNN_LIB when set (and then only it), else the build's default (and then
 * only it), else the default places. requested and chosen_by say which. */
static void *load_library(char *requested, size_t rlen, const char **chosen_by, char *why, size_t whylen) {
    const char *env = getenv("ATTN_CUDNN_LIB");
    const char *name = env && *env ? env : build_default_lib;
    requested[0] = 0;
    if (!*name) {
        *chosen_by = CHOSEN_BY_SEARCH;
        return load_default_library(requested, rlen, why, whylen);
    }
    *chosen_by = env && *env ? CHOSEN_BY_ENV : CHOSEN_BY_CMAKE;
    snprintf(requested, rlen, "%s", name);
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        put(why, whylen, "%s not found (chosen by %s): %s%s", name, *chosen_by, e ? e : "?",
            env && *env ? "" : " (unset the CMake option, or set $ATTN_CUDNN_LIB, to load another)");
    }
    return lib;
}

/* The file a loaded library came from, symbolic links resolved; "" when unknown. */
static void library_path(void *lib, char *path, size_t len) {
    path[0] = 0;
    const char *name = NULL;
    struct link_map *lm = NULL;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) name = lm->l_name;
    Dl_info info;
    void *s = dlsym(lib, "cudnnGetVersion");
    if (!name && s && dladdr(s, &info) && info.dli_fname) name = info.dli_fname;
    if (!name) return;
    char resolved[PATH_MAX];
    const char *src = realpath(name, resolved) ? resolved : name;
    size_t n = strlen(src);
    if (n >= len) n = len - 1; /* cut, never overflowed */
    memcpy(path, src, n);
    path[n] = 0;
}

/* Every entry point this file calls; only cudnnGetLastErrorString may be missing. */
static int load_symbols(void *lib, cudnn_fns *f, char *why, size_t whylen) {
    if (sym(lib, "cudnnGetVersion", &f->GetVersion, 1, why, whylen) ||
        sym(lib, "cudnnCreate", &f->Create, 1, why, whylen) ||
        sym(lib, "cudnnDestroy", &f->Destroy, 1, why, whylen) ||
        sym(lib, "cudnnSetStream", &f->SetStream, 1, why, whylen) ||
        sym(lib, "cudnnGetErrorString", &f->GetErrorString, 1, why, whylen) ||
        sym(lib, "cudnnGetLastErrorString", &f->GetLastErrorString, 0, why, whylen) ||
        sym(lib, "cudnnBackendCreateDescriptor", &f->CreateDescriptor, 1, why, whylen) ||
        sym(lib, "cudnnBackendDestroyDescriptor", &f->DestroyDescriptor, 1, why, whylen) ||
        sym(lib, "cudnnBackendSetAttribute", &f->SetAttribute, 1, why, whylen) ||
        sym(lib, "cudnnBackendGetAttribute", &f->GetAttribute, 1, why, whylen) ||
        sym(lib, "cudnnBackendFinalize", &f->Finalize, 1, why, whylen) ||
        sym(lib, "cudnnBackendExecute", &f->Execute, 1, why, whylen))
        return -1;
    return 0;
}

int sdpa_open_library(attn_cudnn **out, char *why, size_t whylen) {
    *out = NULL;
    char requested[1024];
    const char *chosen_by = CHOSEN_BY_SEARCH;
    void *lib = load_library(requested, sizeof requested, &chosen_by, why, whylen);
    if (!lib) return -1;

    attn_cudnn *c = calloc(1, sizeof *c);
    if (!c) {
        dlclose(lib);
        put(why, whylen, "out of host memory");
        return -1;
    }
    c->lib = lib;
    snprintf(c->requested, sizeof c->requested, "%s", requested);
    c->chosen_by = chosen_by;
    cudnn_fns *f = &c->f;
    if (load_symbols(lib, f, why, whylen)) {
        dlclose(lib);
        free(c);
        return -1;
    }
    c->version = (long)f->GetVersion();
    if (c->version < 90000 || c->version >= 100000) {
        put(why, whylen, "cuDNN version %ld: this code speaks the cuDNN 9 backend ABI only", c->version);
        dlclose(lib);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int attn_cudnn_open(attn_cudnn **out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_open: out is NULL");
        return -1;
    }
    attn_cudnn *c = NULL;
    if (sdpa_open_library(&c, why, whylen)) return -1;
    cudnn_status st = c->f.Create(&c->handle);
    if (st != CUDNN_STATUS_SUCCESS || !c->handle) {
        char msg[2048];
        sdpa_msg(c, msg, sizeof msg, st, "cudnnCreate", "handle", NULL);
        put(why, whylen, "cuDNN %ld loaded, but %s", c->version, msg);
        c->handle = NULL;
        attn_cudnn_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

long attn_cudnn_version(const attn_cudnn *c) { return c ? c->version : 0; }

void attn_cudnn_get_library(const attn_cudnn *c, attn_cudnn_lib_info *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->chosen_by = c ? c->chosen_by : "";
    if (!c) return;
    out->version = c->version;
    snprintf(out->requested, sizeof out->requested, "%s", c->requested);
    library_path(c->lib, out->path, sizeof out->path);
}

int attn_cudnn_library_info(attn_cudnn_lib_info *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!out) {
        put(why, whylen, "attn_cudnn_library_info: out is NULL");
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->chosen_by = CHOSEN_BY_SEARCH;
    void *lib = load_library(out->requested, sizeof out->requested, &out->chosen_by, why, whylen);
    if (!lib) return -1;
    library_path(lib, out->path, sizeof out->path);
    size_t (*get_version)(void) = NULL;
    if (sym(lib, "cudnnGetVersion", &get_version, 1, why, whylen)) {
        dlclose(lib);
        return -1;
    }
    out->version = (long)get_version();
    dlclose(lib);
    return 0;
}

void attn_cudnn_close(attn_cudnn *c) {
    if (!c) return;
    if (c->aux) cudaLibraryUnload(c->aux);
    if (c->kcache) c->f.DestroyDescriptor(c->kcache); /* before the graph it was made from */
    if (c->kcache_graph) c->f.DestroyDescriptor(c->kcache_graph);
    if (c->handle) c->f.Destroy(c->handle);
    if (c->pool) cudaMemPoolDestroy(c->pool);
    if (c->lib) dlclose(c->lib);
    free(c);
}
