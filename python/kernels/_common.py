"""What the adapters in this folder share: the ABI's mask (abi/attn_abi.h) built on the device,
the packed-batch bookkeeping, and the fix-up of query rows that see no key.

Everything here only enqueues work on the current stream: no .item(), no host copies of device
data. Host-side decisions use the problem's scalars only.
"""
import collections

import torch

NEG_INF = float("-inf")


def window_of(p):
    """(left, right) of the ABI's window with causal folded in (-1: unbounded): causal is a
    window whose right edge is the bottom-right diagonal."""
    return p.window_left, (0 if p.causal else p.window_right)


def is_masked(p):
    left, right = window_of(p)
    return left >= 0 or right >= 0


def visible(left, right, seqlen_q, seqlen_k, device):
    """(seqlen_q, seqlen_k) bool, True where key j is visible to query i for a dense problem
    (the same for every sequence): d = j - (i + seqlen_k - seqlen_q), -left <= d <= right,
    with (left, right) from window_of."""
    i = torch.arange(seqlen_q, device=device).unsqueeze(1)
    j = torch.arange(seqlen_k, device=device).unsqueeze(0)
    d = j - (i + (seqlen_k - seqlen_q))
    vis = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if left >= 0:
        vis &= d >= -left
    if right >= 0:
        vis &= d <= right
    return vis


def dense_empty_rows(p):
    """How many leading query rows of a dense problem see no key. Row i's keys are
    [i + off - left, i + off + right] with off = seqlen_k - seqlen_q, clipped to [0, seqlen_k):
    the left edge never empties a row (i + off - left <= seqlen_k - 1), the right edge empties
    the rows with i + off + right < 0."""
    _, right = window_of(p)
    if right < 0:
        return 0
    return max(0, min(p.seqlen_q, p.seqlen_q - p.seqlen_k - right))


def zero_empty_rows_dense(p, o_bshd, lse_bhs):
    """Rows that see no key: O zeros and LSE -inf (backends differ: NaN, +inf, garbage)."""
    n = dense_empty_rows(p)
    if n:
        o_bshd[:, :n].zero_()
        if lse_bhs is not None:
            lse_bhs[:, :, :n].fill_(NEG_INF)


def additive_bias(vis, dtype):
    """A float bias (0 visible, -inf masked) over a buffer whose rows are padded to 16
    elements: the memory-efficient and cuDNN kernels want aligned bias rows."""
    sq, sk = vis.shape
    buf = torch.zeros(sq, (sk + 15) // 16 * 16, dtype=dtype, device=vis.device)
    bias = buf[:, :sk]
    bias.masked_fill_(~vis, NEG_INF)
    return bias


class DenseMaskCache:
    """Masks of dense problems depend on host scalars only, so they are kept (bounded) rather
    than rebuilt in every timed call. Never filled while the stream is being captured into a
    CUDA graph: the fill would only run at a replay."""

    def __init__(self, make, entries=16, max_elements=1 << 26):
        self.make, self.entries, self.max_elements = make, entries, max_elements
        self.store = collections.OrderedDict()

    def get(self, key, elements):
        hit = self.store.get(key)
        if hit is not None:
            self.store.move_to_end(key)
            return hit
        value = self.make(*key)
        capturing = torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
        if elements <= self.max_elements and not capturing:
            self.store[key] = value
            if len(self.store) > self.entries:
                self.store.popitem(last=False)
        return value


def dense_cu_seqlens(batch, seqlen, device):
    """cu_seqlens of a dense batch (every sequence seqlen rows), built on the device."""
    return torch.arange(0, (batch + 1) * seqlen, seqlen, dtype=torch.int32, device=device)


def as_packed(x, cu_seqlens, batch, seqlen):
    """(rows, heads, d) and its cu_seqlens: x itself when packed, else the dense (batch,
    seqlen, heads, d) tensor viewed (or, for padded batches, copied) as packed rows."""
    if cu_seqlens is not None:
        return x, cu_seqlens
    return x.reshape(batch * seqlen, x.shape[2], x.shape[3]), dense_cu_seqlens(batch, seqlen, x.device)


def doc_ids(cu_seqlens, total):
    """Sequence index of each packed row: searchsorted on the device (repeat_interleave
    without output_size would read the lengths back to the host)."""
    rows = torch.arange(total, dtype=torch.int32, device=cu_seqlens.device)
    return torch.searchsorted(cu_seqlens[1:].contiguous(), rows, right=True).to(torch.int32)

