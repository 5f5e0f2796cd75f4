"""The Python side of the bridge that runs kernels written in Python through the harness.

A kernel is a Python callable declared with @kernel; CMake's ATTN_PYTHON_KERNELS names it as
"module:function". The configure step reads its declaration (`python -m attn_bridge declare
SPEC`, below) and builds a plugin for it (python/bridge.c) that embeds CPython: the harness
loads that plugin like any C kernel, and each fwd call comes here (Runner.__call__) with the
problem's fields, the harness's stream and device. The callable gets a Problem whose tensors
are zero-copy views of the harness's buffers, on the harness's stream. A kernel may attach a
backward (@fwd.backward(...)): the plugin then exports attn_kernel.bwd, and each bwd call comes
to Runner.bwd with attn_bwd_params' fields beside the forward problem's.
"""
import functools
import importlib
import os
import re
import sys
import traceback

# abi/attn_abi.h's ATTN_CAP_* bits and attn_dtype values, by the names a declaration uses
CAPS = {"gqa": 1, "window": 2, "softcap": 4, "head_dim_v": 8, "varlen": 16, "paged": 32, "seqused_k": 64}
BWD_DETERMINISTIC = 1 << 31  # ATTN_BWD_DETERMINISTIC in attn_kernel.bwd_caps
DTYPES = {"fp16": 0, "bf16": 1}
ATTN_OK, ATTN_UNSUPPORTED, ATTN_PYTHON_ERROR = 0, 1, 3  # 3: any other value is an error
TENSOR_KINDS = ("torch", "raw")


class Unsupported(Exception):
    """Raised by a kernel for a problem it cannot take: the case is "not supported"."""


class DeclarationError(ValueError):
    pass


class Declaration:
    """What a kernel takes: the ABI's kernel entry (attn_kernel) in Python terms."""

    def __init__(self, name, caps=(), dtypes=("fp16", "bf16"), head_dims=None, head_dim_pairs=None,
                 tensors="torch"):
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]+", name):
            raise DeclarationError(f"name {name!r}: need [a-z0-9_]+")
        caps = frozenset(caps)
        unknown = sorted(caps - set(CAPS))
        if unknown:
            raise DeclarationError(f"kernel '{name}': unknown caps {unknown} (known: {sorted(CAPS)})")
        dtypes = tuple(dtypes)
        if not dtypes or set(dtypes) - set(DTYPES) or len(set(dtypes)) != len(dtypes):
            raise DeclarationError(f"kernel '{name}': dtypes {dtypes!r}: need a non-empty subset of fp16, bf16")
        if head_dims is not None and head_dim_pairs is not None:
            raise DeclarationError(f"kernel '{name}': give head_dims or head_dim_pairs, not both")
        if head_dims is not None:
            head_dims = tuple(head_dims)
            if not head_dims or not all(_positive_int(d) for d in head_dims):
                raise DeclarationError(f"kernel '{name}': head_dims {head_dims!r}: need integers >= 1 (None: any)")
        if head_dim_pairs is not None:
            head_dim_pairs = tuple(tuple(pair) for pair in head_dim_pairs)
            for pair in head_dim_pairs:
                if len(pair) != 2 or not all(_positive_int(d) for d in pair):
                    raise DeclarationError(f"kernel '{name}': head_dim_pairs entry {pair!r}: need (d, dv), each >= 1")
                if pair[0] != pair[1] and "head_dim_v" not in caps:
                    raise DeclarationError(f"kernel '{name}': head_dim_pairs lists {pair[0]}x{pair[1]} "
                                           f"but 'head_dim_v' is not in its caps")
            if not head_dim_pairs:
                raise DeclarationError(f"kernel '{name}': head_dim_pairs is empty (None: any)")
        if tensors not in TENSOR_KINDS:
            raise DeclarationError(f"kernel '{name}': tensors {tensors!r}: need one of {TENSOR_KINDS}")
        self.name, self.caps, self.dtypes = name, caps, dtypes
        self.head_dims, self.head_dim_pairs, self.tensors = head_dims, head_dim_pairs, tensors
        self.backward = None  # a BackwardDeclaration once @fwd.backward(...) attached one

    def cmake_lines(self):
        """The declaration as the configure step reads it: key=value lines."""
        b = self.backward
        return [f"name={self.name}",
                f"caps={sum(CAPS[c] for c in self.caps)}",
                f"dtypes={sum(1 << DTYPES[d] for d in self.dtypes)}",
                "head_dims=" + ",".join(str(d) for d in self.head_dims or ()),
                "head_dim_pairs=" + ",".join(f"{d},{dv}" for d, dv in self.head_dim_pairs or ()),
                f"bwd={int(b is not None)}",
                f"bwd_caps={b.abi_caps() if b else 0}",
                f"bwd_workspace={int(b is not None and b.workspace is not None)}"]


class BackwardDeclaration:
    """A kernel's backward: attn_kernel.bwd, bwd_caps and bwd_workspace in Python terms. caps
    defaults to the forward's (less paged: ABI version 5 has no paged backward); dtypes and
    head dims are the forward's."""

    def __init__(self, fwd_decl, fn, caps=None, deterministic=False, workspace=None):
        name = fwd_decl.name
        if fwd_decl.backward is not None:
            raise DeclarationError(f"kernel '{name}': a backward is already attached")
        if not callable(fn):
            raise DeclarationError(f"kernel '{name}': the backward {fn!r} is not callable")
        caps = fwd_decl.caps - {"paged"} if caps is None else frozenset(caps)
        unknown = sorted(caps - set(CAPS))
        if unknown:
            raise DeclarationError(f"kernel '{name}': backward caps: unknown {unknown} (known: {sorted(CAPS)})")
        if "paged" in caps:
            raise DeclarationError(f"kernel '{name}': backward caps: 'paged' has no backward in ABI version 5")
        if not isinstance(deterministic, bool):
            raise DeclarationError(f"kernel '{name}': backward deterministic={deterministic!r}: need True or False")
        if workspace is not None and not callable(workspace):
            raise DeclarationError(f"kernel '{name}': backward workspace={workspace!r}: need a callable "
                                   f"p -> bytes, or None (no scratch)")
        self.fn, self.caps, self.deterministic, self.workspace = fn, caps, deterministic, workspace

    def abi_caps(self):
        return sum(CAPS[c] for c in self.caps) | (BWD_DETERMINISTIC if self.deterministic else 0)


def _positive_int(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def kernel(name, caps=(), dtypes=("fp16", "bf16"), head_dims=None, head_dim_pairs=None, tensors="torch"):
    """Declares fn as a harness kernel. caps: a subset of CAPS' names; head_dims: the head dims
    it takes (None: any) or head_dim_pairs: its (head_dim, head_dim_v) pairs; tensors: "torch"
    (torch tensors, the stream current) or "raw" (Problem.specs and Problem.stream_handle
    only, for a kernel that launches through another framework)."""
    decl = Declaration(name, caps, dtypes, head_dims, head_dim_pairs, tensors)

    def attach(fn):
        fn.attn_kernel = decl
        fn.backward = functools.partial(_attach_backward, decl)
        return fn
    return attach


def _attach_backward(decl, caps=None, deterministic=False, workspace=None):
    """@fwd.backward(caps=None, deterministic=False, workspace=None) on bwd(p): bwd becomes
    the kernel's backward. caps: the CAPS names it takes (None: the forward's); deterministic:
    it honours p.deterministic (bit-identical gradients over calls); workspace: None, or
    p -> the scratch bytes it needs (scalars only: called before any buffer exists)."""
    if callable(caps):
        raise DeclarationError(f"kernel '{decl.name}': the backward decorator needs its parentheses: "
                               f"@fwd.backward() or @fwd.backward(caps=...)")

    def attach(fn):
        decl.backward = BackwardDeclaration(decl, fn, caps, deterministic, workspace)
        return fn
    return attach


def resolve(spec):
    """"module:function" -> (callable, Declaration, module root). Raises SpecError for a spec
    that names nothing usable; the module's own import errors propagate."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise SpecError(f"'{spec}': expected module:function")
    module_name, attr = spec.split(":")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", module_name) or \
            not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", attr):
        raise SpecError(f"'{spec}': expected module:function (dotted Python names)")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if fn is None:
        raise SpecError(f"'{spec}': module {module_name} ({getattr(module, '__file__', '?')}) has no {attr}")
    decl = getattr(fn, "attn_kernel", None)
    if not isinstance(decl, Declaration):
        raise SpecError(f"'{spec}': {attr} is not declared with @attn_bridge.kernel(...)")
    return fn, decl, _module_root(module)


class SpecError(ValueError):
    pass


def _module_root(module):
    """The sys.path entry module was imported from (so that the plugin can import it again)."""
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    root = os.path.dirname(os.path.abspath(path))
    depth = module.__name__.count(".") + (os.path.basename(path) == "__init__.py")
    for _ in range(depth):
        root = os.path.dirname(root)
    return root


from .runtime import Problem, Runner, TensorSpec, load  # noqa: E402  (uses the names above)
