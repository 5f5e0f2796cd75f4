/* Finding a kernel by name: among the built-in kernels (registry.def) or in a plugin
 * shared library that exports attn_plugin_kernels(). */
#ifndef ATTN_REGISTRY_H
#define ATTN_REGISTRY_H

#include <stddef.h>
#include "attn_abi.h"

/* The built-in kernels; *count receives their number. */
const attn_kernel *const *attn_builtin_kernels(int *count);

/* Loads a plugin (dlopen) and returns its kernel table. ABI versions 1 to 5 load, each table
 * read with its own version's layout: a version-1 table (entries {name, fwd}) comes back as
 * version-5 entries with caps 0, dtypes 0 and head_dims NULL, so that the kernels are given
 * only version-1 problems (attn_kernel_lacks); a version-2 table with its fields and
 * head_dim_pairs NULL; a version-3 or 4 table with its fields and no backward. On failure returns NULL with "plugin <path>: <reason>" in err: cannot
 * be loaded, lacks attn_plugin_kernels, another ABI version (the message names the versions
 * this harness takes), no kernels, or an entry that attn_kernel_entry_check refuses, or a
 * name twice. The library, and a converted table, stay for the life of the process. */
const attn_kernel *attn_plugin_load(const char *path, int *count, char *err, size_t errlen);

/* The kernel called `name`: in the plugin at plugin_path if that is non-NULL, else among
 * the built-ins. NULL with the reason in err when there is none. */
const attn_kernel *attn_find_kernel(const char *name, const char *plugin_path, char *err,
                                    size_t errlen);

/* The tunables of kernel k (attn_abi.h, attn_tuning): a built-in's ATTN_TUNING entry, or the
 * plugin's attn_plugin_tuning export when plugin_path is given. NULL when k is not tunable
 * (err "") or its table is malformed (err says how). */
const attn_tuning *attn_find_tuning(const attn_kernel *k, const char *plugin_path, char *err,
                                    size_t errlen);
/* The plugin's side of attn_find_tuning (plugin.c). */
const attn_tuning *attn_plugin_find_tuning(const char *path, const char *name, char *err,
                                           size_t errlen);

/* 1 iff name matches [a-z0-9_]+ */
int attn_kernel_name_valid(const char *name);

/* NULL when kernel entry k (#index of its table) is usable, else err holding the reason: an
 * invalid name, no fwd, or a malformed head_dim_pairs (empty, a value < 1, the 0 inside a
 * pair, no 0 within 256 pairs, or a pair dv != d without ATTN_CAP_HEAD_DIM_V), or
 * bwd_workspace or bwd_caps without a bwd. */
const char *attn_kernel_entry_check(const attn_kernel *k, int index, char *err, size_t errlen);

/* Whether kernel k takes problem p (capability.c): NULL when it does, else buf holding a
 * one-line reason that names what is missing, e.g. "kernel 'x' does not take grouped KV
 * heads (heads_k 2 < heads 8): ATTN_CAP_GQA not in its caps". Checked: the rules of
 * attn_abi.h that decide what p needs (heads_k from 1 to heads dividing it, no causal with
 * window_right > 0, no cu_seqlens_k with block_table: no kernel takes a problem that breaks
 * one, "an invalid problem"), p's dtype against k->dtypes, the pair (head_dim, head_dim_v)
 * against k->head_dim_pairs when set, else head_dim (and head_dim_v when set and different)
 * against k->head_dims, and each ATTN_CAP_* bit p needs against k->caps (a causal problem
 * with window_right 0 and window_left -1 is plain causal and needs no ATTN_CAP_WINDOW).
 * Reads only p's scalars and which pointers are NULL: never the device arrays. */
const char *attn_kernel_lacks(const attn_kernel *k, const attn_fwd_params *p, char *buf,
                              size_t len);
/* The same for the backward (attn_bwd_params): NULL when k's bwd takes bp, else the reason:
 * no bwd, a paged problem (none has a backward), deterministic asked of a kernel without
 * ATTN_BWD_DETERMINISTIC, then bp->fwd against the forward's dtypes and head dims and the
 * ATTN_CAP_* bits of k->bwd_caps. */
const char *attn_kernel_lacks_bwd(const attn_kernel *k, const attn_bwd_params *bp, char *buf,
                                  size_t len);

#endif
