"""One fwd (or bwd) call of a Python kernel: the harness's fields -> a Problem -> the kernel ->
a status.

Called by python/bridge.c with a dict of attn_fwd_params' fields (pointers as integers; for
bwd, attn_bwd_params' beside them), the stream handle and the device. Nothing here waits for the GPU: tensors are views made from
pointers (__cuda_array_interface__), the stream an ExternalStream.
"""
import sys
import traceback

from . import ATTN_OK, ATTN_PYTHON_ERROR, ATTN_UNSUPPORTED, DTYPES, Unsupported, resolve

_TYPESTR = {"fp16": "<f2", "bf16": "<i2", "f32": "<f4", "i32": "<i4", "u8": "|u1"}  # bf16: int16, then viewed
_ITEMSIZE = {"fp16": 2, "bf16": 2, "f32": 4, "i32": 4, "u8": 1}


class TensorSpec:
    """A tensor of the harness's: device pointer, shape and strides in elements, element type."""
    __slots__ = ("ptr", "shape", "strides", "dtype")

    def __init__(self, ptr, shape, strides, dtype):
        self.ptr, self.shape, self.strides, self.dtype = ptr, tuple(shape), tuple(strides), dtype

    def key(self):
        return (self.ptr, self.shape, self.strides, self.dtype)

    def __repr__(self):
        return f"TensorSpec(ptr=0x{self.ptr:x}, shape={self.shape}, strides={self.strides}, dtype={self.dtype})"


class _CudaArray:
    """Enough of __cuda_array_interface__ (version 2: no stream, so the consumer does not sync)."""

    def __init__(self, spec):
        size = _ITEMSIZE[spec.dtype]
        self.__cuda_array_interface__ = {
            "shape": spec.shape, "typestr": _TYPESTR[spec.dtype], "data": (spec.ptr, False),
            "strides": tuple(s * size for s in spec.strides), "version": 2}


def specs_of(f):
    """The tensors of the problem described by the fields f (attn_abi.h's layouts, in
    FlashAttention's axis order), None for those not set. A backward's fields (those of
    attn_bwd_params beside the forward's) add dout (as O), dq (as Q), dk (as K), dv (as V), each
    with its own strides, and the workspace (uint8)."""
    dt = "bf16" if f["dtype"] == DTYPES["bf16"] else "fp16"
    B, H, HK, D = f["batch"], f["heads"], f["heads_k"], f["head_dim"]
    DV = f["head_dim_v"] or D
    q_packed, k_packed, paged = bool(f["cu_seqlens_q"]), bool(f["cu_seqlens_k"]), bool(f["block_table"])

    def rows(ptr, strides, side, heads, cols):
        """side "q": Q's rows (packed by cu_seqlens_q); "k": K's (packed, or paged)."""
        b, h, r = (f[strides + "_batch_stride"], f[strides + "_head_stride"], f[strides + "_row_stride"])
        if side == "k" and paged:
            return TensorSpec(f[ptr], (f["num_pages"], f["page_size"], heads, cols), (b, r, h, 1), dt)
        if q_packed if side == "q" else k_packed:
            return TensorSpec(f[ptr], (f["total_" + side], heads, cols), (r, h, 1), dt)
        return TensorSpec(f[ptr], (B, f["seqlen_" + side], heads, cols), (b, r, h, 1), dt)

    s = {"q": rows("q", "q", "q", H, D), "o": rows("o", "o", "q", H, DV),
         "k": rows("k", "k", "k", HK, D), "v": rows("v", "v", "k", HK, DV)}
    if f["lse"]:
        total = f["total_q"]
        s["lse"] = (TensorSpec(f["lse"], (H, total), (total, 1), "f32") if q_packed else
                    TensorSpec(f["lse"], (B, H, f["seqlen_q"]), (H * f["seqlen_q"], f["seqlen_q"], 1), "f32"))
    else:
        s["lse"] = None
    s["cu_seqlens_q"] = TensorSpec(f["cu_seqlens_q"], (B + 1,), (1,), "i32") if q_packed else None
    s["cu_seqlens_k"] = TensorSpec(f["cu_seqlens_k"], (B + 1,), (1,), "i32") if k_packed else None
    s["block_table"] = (TensorSpec(f["block_table"], (B, f["block_table_stride"]), (f["block_table_stride"], 1), "i32")
                        if paged else None)
    s["seqused_k"] = TensorSpec(f["seqused_k"], (B,), (1,), "i32") if f["seqused_k"] else None
    if "dout" in f:
        s.update(dout=rows("dout", "do", "q", H, DV), dq=rows("dq", "dq", "q", H, D),
                 dk=rows("dk", "dk", "k", HK, D), dv=rows("dv", "dv", "k", HK, DV))
        s["workspace"] = (TensorSpec(f["workspace"], (f["workspace_bytes"],), (1,), "u8")
                          if f["workspace"] and f["workspace_bytes"] else None)
    return s


class Problem:
    """One attention problem (see python/README.md for every attribute)."""

    def __init__(self, f, stream_handle, device):
        self.fields = f  # attn_fwd_params as the harness gave it
        self.dtype = "bf16" if f["dtype"] == DTYPES["bf16"] else "fp16"
        for name in ("batch", "heads", "heads_k", "seqlen_q", "seqlen_k", "head_dim", "window_left",
                     "window_right", "page_size", "num_pages", "block_table_stride", "total_q", "total_k"):
            setattr(self, name, f[name])
        self.head_dim_v = f["head_dim_v"] or f["head_dim"]
        self.causal = bool(f["causal"])
        self.softmax_scale, self.softcap = f["softmax_scale"], f["softcap"]
        self.q_packed, self.k_packed = bool(f["cu_seqlens_q"]), bool(f["cu_seqlens_k"])
        self.paged = bool(f["block_table"])
        self.stream_handle, self.device = stream_handle, device
        self.backward = "dout" in f  # a bwd call (or its workspace query)
        if self.backward:
            self.deterministic, self.workspace_bytes = bool(f["deterministic"]), f["workspace_bytes"]
        self.specs = specs_of(f)
        self.stream = None  # torch kernels: the ExternalStream, current during the call


class Runner:
    """Calls one declared kernel (and its backward); the plugin holds one per kernel for the
    life of the process."""

    def __init__(self, fn, decl):
        self.fn, self.decl = fn, decl
        self.torch = None
        self._streams, self._views = {}, {}

    def __call__(self, fields, stream_handle, device):
        """attn_kernel.fwd: the kernel's status."""
        return self._status(lambda: self._call(self.fn, self._store, Problem(fields, stream_handle, device)))

    def bwd(self, fields, stream_handle, device):
        """attn_kernel.bwd; fields: attn_fwd_params' and attn_bwd_params' in one dict."""
        def run():
            p = Problem(fields, stream_handle, device)
            need = self.workspace(fields, raising=True)
            if p.workspace_bytes < need:
                raise ValueError(f"the harness gave {p.workspace_bytes} workspace bytes; the kernel's "
                                 f"workspace(p) asks {need}")
            self._call(self.decl.backward.fn, self._store_grads, p)
        return self._status(run)

    def workspace(self, fields, raising=False):
        """attn_kernel.bwd_workspace: the declared workspace(p) of p's scalars, an int >= 0.
        The plugin's call gets 0 on an error (traceback on stderr); bwd then raises it again,
        failing the case."""
        try:
            size = self.decl.backward.workspace
            n = 0 if size is None else size(Problem(fields, 0, -1))
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise TypeError(f"workspace(p) returned {n!r}; need an int >= 0 (bytes)")
            return n
        except BaseException:
            if raising:
                raise
            print(f"python kernel '{self.decl.name}': workspace(p) raised:", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()
            return 0

    def _status(self, run):
        try:
            run()
            return ATTN_OK
        except Unsupported as e:
            print(f"python kernel '{self.decl.name}': not supported: {e}", file=sys.stderr)
            return ATTN_UNSUPPORTED
        except BaseException:  # the traceback goes to the test's log; the case fails
            print(f"python kernel '{self.decl.name}' raised:", file=sys.stderr)
            traceback.print_exc()
            return ATTN_PYTHON_ERROR
        finally:
            sys.stdout.flush()
            sys.stderr.flush()

    def _call(self, fn, store, p):
        if self.decl.tensors == "raw":
            store(p, fn(p))
            return
        if self.torch is None:
            import torch
            self.torch = torch
        torch = self.torch
        stream = self._streams.get((p.stream_handle, p.device))
        if stream is None:
            stream = torch.cuda.ExternalStream(p.stream_handle, device=torch.device("cuda", p.device))
            self._streams[(p.stream_handle, p.device)] = stream
        p.stream = stream
        with torch.cuda.device(p.device), torch.cuda.stream(stream):
            p.torch_dtype = torch.bfloat16 if p.dtype == "bf16" else torch.float16
            for name, spec in p.specs.items():
                setattr(p, name, None if spec is None else self._view(spec))
            store(p, fn(p))

    def _view(self, spec):
        """A torch tensor over spec's memory, no copy (cached: the same spec, the same view)."""
        view = self._views.get(spec.key())
        if view is None:
            torch = self.torch
            view = torch.as_tensor(_CudaArray(spec), device=torch.device("cuda", torch.cuda.current_device()))
            if spec.dtype == "bf16":
                view = view.view(torch.bfloat16)
            if len(self._views) >= 256:
                self._views.clear()
            self._views[spec.key()] = view
        return view

    @staticmethod
    def _store(p, out):
        """A kernel may return O, or (O, LSE): copied into the harness's buffers."""
        if out is None:
            return
        o, lse = out if isinstance(out, tuple) else (out, None)
        if isinstance(out, tuple) and len(out) != 2:
            raise TypeError(f"a kernel returns None, O or (O, LSE); got a tuple of {len(out)}")
        if getattr(p, "o", None) is None:
            raise TypeError("a raw kernel writes its outputs and returns None")
        if tuple(o.shape) != tuple(p.o.shape):
            raise ValueError(f"the returned O has shape {tuple(o.shape)}; the problem's O is {tuple(p.o.shape)}")
        p.o.copy_(o)
        if p.lse is not None:
            if lse is None:
                raise ValueError("the LSE was requested (p.lse is set) but the kernel returned none")
            if tuple(lse.shape) != tuple(p.lse.shape):
                raise ValueError(f"the returned LSE has shape {tuple(lse.shape)}; the problem's is {tuple(p.lse.shape)}")
            p.lse.copy_(lse)

    @staticmethod
    def _store_grads(p, out):
        """A backward may return (dQ, dK, dV): copied into the harness's buffers."""
        if out is None:
            return
        if not isinstance(out, tuple) or len(out) != 3:
            raise TypeError(f"a backward returns None or (dQ, dK, dV); got {type(out).__name__}"
                            + (f" of {len(out)}" if isinstance(out, tuple) else ""))
        if getattr(p, "dq", None) is None:
            raise TypeError("a raw backward writes its gradients and returns None")
        for name, grad in zip(("dq", "dk", "dv"), out):
            want = getattr(p, name)
            if tuple(grad.shape) != tuple(want.shape):
                raise ValueError(f"the returned {name} has shape {tuple(grad.shape)}; the problem's is "
                                 f"{tuple(want.shape)}")
            want.copy_(grad)


def load(spec, name):
    """The Runner for spec, checked against the name the plugin was built for."""
    fn, decl, _ = resolve(spec)
    if decl.name != name:
        raise RuntimeError(f"'{spec}' now declares the kernel '{decl.name}', but this plugin was built for "
                           f"'{name}': rebuild (the configure step reads the declaration)")
    return Runner(fn, decl)
