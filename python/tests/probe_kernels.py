"""Kernels for the bridge's host tests (no GPU, no torch: "raw" kernels that never touch the
device). record writes what it was given to $ATTN_PROBE_OUT, a line each, for test_bridge.c."""
import os

import attn_bridge as ab


@ab.kernel(name="probe_record", caps={"gqa", "varlen", "paged", "head_dim_v"}, dtypes=("bf16",),
           head_dim_pairs=((64, 64), (192, 128)), tensors="raw")
def record(p):
    with open(os.environ["ATTN_PROBE_OUT"], "w") as f:
        for key in sorted(p.fields):
            value = p.fields[key]
            f.write(f"field {key} {value:.6g}\n" if isinstance(value, float) else f"field {key} {value}\n")
        for name in sorted(p.specs):
            s = p.specs[name]
            f.write(f"spec {name} none\n" if s is None else
                    f"spec {name} {s.ptr} {','.join(map(str, s.shape))} {','.join(map(str, s.strides))} {s.dtype}\n")
        f.write(f"stream {p.stream_handle}\ndevice {p.device}\n")
        f.write(f"problem {p.dtype} {p.head_dim_v} {p.causal} {p.q_packed} {p.k_packed} {p.paged}\n")


@ab.kernel(name="probe_raises", head_dims=(64,), tensors="raw")
def raises(p):
    raise ValueError("probe failure at batch %d" % p.batch)


@ab.kernel(name="probe_unsupported", tensors="raw")
def unsupported(p):
    raise ab.Unsupported("probe says no")


@ab.kernel(name="probe_noop")
def noop(p):
    """Does nothing, through the whole torch path (tensor views, the stream current): what the
    bridge itself costs per call (tools/call_overhead.c)."""
