"""Warp groups (sm_90a): four consecutive warps, 128 threads aligned to 128 in the block, that
execute `wgmma` and `setmaxnreg` together. A group missing a thread (diverged or exited) is a
`WarpDivergence` ("warp group not converged")."""

from __future__ import annotations

import numpy as np

from .errors import WarpDivergence


def warpgroup_index(st):
    wg = st._special.get("#wg")
    if wg is None:
        wg = st._special["#wg"] = st.block_in_batch * ((st.tpb + 127) // 128) + \
            st.thread_linear // 128
    return wg


def check_warpgroup(st, m, what):
    """Every warp group with an active thread must have all 128 threads active."""
    act = np.ones(st.T, bool) if m is None else m
    wg = warpgroup_index(st)
    cnt = np.bincount(wg[act], minlength=int(wg[-1]) + 1)
    bad = (cnt > 0) & (cnt != 128)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        first = int(np.flatnonzero(act & (wg == g))[0])
        why = f"the block has {st.tpb} threads, not a multiple of 128" \
            if st.tpb % 128 and cnt[g] == st.tpb % 128 else \
            f"{int(cnt[g])} of its 128 threads arrived (the rest diverged or exited)"
        raise st.error(WarpDivergence, f"{what}: warp group not converged: {why}", first)
    return np.unique(wg[act])
