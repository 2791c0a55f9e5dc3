#!/usr/bin/env python3
"""Golden keep sets of the published DRRQR loop (rrqr.py, anchor-original.md §2.5), from an implementation
independent of reference/rrqr.cpp: plain Python (stdlib only), textbook Householder QR.

The published algorithm on M [m, d] (m <= 5000, so no row subsampling), k kept columns, f = 1.5:
  1. M is rounded to float32 (rrqr.py casts to float32); the arithmetic here is double, as in the
     reference's faithful mode (the input rounding is the part that changes answers, not the QR's).
  2. QR with column pivoting (Businger-Golub, LAPACK geqp3 order: the largest trailing column norm,
     first maximum in the working order, swapped into place). pi = its permutation.
  3. At most 20 times: A = R[:k,:k], B = R[:k,k:], C = R[k:,k:]; stop if min|A_ii| < 1e-9;
     W = A^-1 B, omega_i = 1/(||row_i A^-1|| + 1e-12), gamma_j = ||C[:,j]||,
     rho_ij = sqrt(W_ij^2 + (gamma_j/omega_i)^2); stop if max rho <= f; else swap pi[i] <-> pi[k+j] at
     the first row-major argmax and re-factorise M[:, pi] by QR WITHOUT pivoting.
  4. keep = pi[:k].
Every case records margins, and the script refuses a case whose answer could flip under rounding:
every decision (QRCP pivot among the first k steps, argmax pair, rho against f) must win by a relative
1e-6. Why 1e-6: the C++ side evaluates the same quantities through another QR (Eigen's QRCP downdates
column norms, relative error up to ~sqrt(eps) = 1.5e-8), so 1e-6 leaves a factor ~60.

Usage: tools/faithful_drrqr_golden.py [--out tests/data/rrqr_golden]   (writes one JSON per case)
"""
import argparse, json, math, os, random, struct

F = 1.5
MAX_SWAPS = 20
SINGULAR = 1e-9
MARGIN = 1e-6


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def cols_of(M):
    return [list(c) for c in zip(*M)]


def householder_r(cols, m):
    """R [n, n] (upper triangular, zero rows appended when m < n) of the matrix with these columns."""
    A = [list(c) for c in cols]
    n = len(A)
    R = [[0.0] * n for _ in range(n)]
    for j in range(min(m, n)):
        x = A[j][j:]
        alpha = math.sqrt(sum(v * v for v in x))
        if alpha == 0.0:
            for c in range(j, n):
                R[j][c] = A[c][j]
            continue
        beta = -alpha if x[0] >= 0 else alpha
        v = x[:]
        v[0] -= beta
        vv = sum(t * t for t in v)
        for c in range(j, n):
            col = A[c]
            s = sum(v[i] * col[j + i] for i in range(len(v))) * 2.0 / vv
            for i in range(len(v)):
                col[j + i] -= s * v[i]
        for c in range(j, n):
            R[j][c] = A[c][j]
    return R


def qrcp(cols, m):
    """Businger-Golub QRCP with fresh trailing norms; returns (perm, decisions) where decisions[t] is the
    relative gap between the winning and the runner-up trailing norm at step t."""
    A = [list(c) for c in cols]
    n = len(A)
    perm = list(range(n))
    gaps = []
    for j in range(min(m, n)):
        norms = [math.sqrt(sum(v * v for v in A[c][j:])) for c in range(j, n)]
        best = max(range(len(norms)), key=lambda t: (norms[t], -t))
        rest = [norms[t] for t in range(len(norms)) if t != best]
        top = norms[best]
        gaps.append((top - max(rest)) / top if rest and top > 0 else (1.0 if top > 0 else 0.0))
        p = j + best
        A[j], A[p] = A[p], A[j]
        perm[j], perm[p] = perm[p], perm[j]
        x = A[j][j:]
        alpha = math.sqrt(sum(v * v for v in x))
        if alpha == 0.0:
            continue
        beta = -alpha if x[0] >= 0 else alpha
        v = x[:]
        v[0] -= beta
        vv = sum(t * t for t in v)
        for c in range(j, n):
            col = A[c]
            s = sum(v[i] * col[j + i] for i in range(len(v))) * 2.0 / vv
            for i in range(len(v)):
                col[j + i] -= s * v[i]
    return perm, gaps


def upper_solve(R, k, b):
    """x with R[:k,:k] x = b."""
    x = [0.0] * k
    for i in reversed(range(k)):
        s = b[i] - sum(R[i][t] * x[t] for t in range(i + 1, k))
        x[i] = s / R[i][i]
    return x


def rho_matrix(R, k):
    n = len(R)
    W = [upper_solve(R, k, [R[i][k + j] for i in range(k)]) for j in range(n - k)]  # W[j] = column j
    ainv_cols = [upper_solve(R, k, [1.0 if i == e else 0.0 for i in range(k)]) for e in range(k)]
    inv_omega = [math.sqrt(sum(ainv_cols[e][i] ** 2 for e in range(k))) + 1e-12 for i in range(k)]
    gamma = [math.sqrt(sum(R[i][k + j] ** 2 for i in range(k, n))) for j in range(n - k)]
    return [[math.sqrt(W[j][i] ** 2 + (inv_omega[i] * gamma[j]) ** 2) for j in range(n - k)] for i in range(k)]


def faithful_drrqr(M, k, f=F):
    m, n = len(M), len(M[0])
    cols = [[f32(v) for v in c] for c in cols_of(M)]
    pi, gaps = qrcp(cols, m)
    qrcp_keep = sorted(pi[:k])
    margins = {"qrcp_pivot_gap": min(gaps[:k]) if k <= len(gaps) else 0.0}
    R = householder_r([cols[c] for c in pi], m)
    trace, stop = [], "k == n"
    argmax_gaps, f_gaps = [], []
    if k < n:
        stop = "max swaps"
        while len(trace) < MAX_SWAPS:
            if min(abs(R[i][i]) for i in range(k)) < SINGULAR:
                stop = "singular"
                break
            rho = rho_matrix(R, k)
            flat = [(rho[i][j], i, j) for i in range(k) for j in range(n - k)]
            best, bi, bj = flat[0]
            for v, i, j in flat:
                if v > best:
                    best, bi, bj = v, i, j
            f_gaps.append(abs(best - f) / f)
            if best <= f:
                stop = "certified"
                break
            # the runner-up that would change the answer: any other pair (another column in or out)
            others = [v for v, i, j in flat if (i, j) != (bi, bj)]
            if others:
                argmax_gaps.append((best - max(others)) / best)
            trace.append({"out": pi[bi], "in": pi[k + bj], "i": bi, "j": bj, "rho": best})
            pi[bi], pi[k + bj] = pi[k + bj], pi[bi]
            R = householder_r([cols[c] for c in pi], m)
    margins["argmax_gap"] = min(argmax_gaps) if argmax_gaps else 1.0
    margins["rho_vs_f_gap"] = min(f_gaps) if f_gaps else 1.0
    return {"keep": sorted(pi[:k]), "keep_pivot_order": pi[:k], "qrcp_keep": qrcp_keep, "swaps": len(trace),
            "stop": stop, "trace": trace, "margins": margins}


# ---- matrices with meaning --------------------------------------------------------------------------

def kahan(n, c, shrink):
    """Kahan's matrix diag(1, s, .., s^(n-1)) (I - c * strict upper ones), column j scaled by
    (1 - shrink)^j so QRCP's exact ties (every trailing column has the same norm) break towards no
    pivoting by a margin that float32 rounding (6e-8) cannot undo."""
    s = math.sqrt(1.0 - c * c)
    K = [[0.0] * n for _ in range(n)]
    for i in range(n):
        K[i][i] = s ** i
        for j in range(i + 1, n):
            K[i][j] = -c * s ** i
    for j in range(n):
        for i in range(n):
            K[i][j] *= (1.0 - shrink) ** j
    return K


def integer_product(rng, m, r, n, lo=-4, hi=4):
    U = [[rng.randint(lo, hi) for _ in range(r)] for _ in range(m)]
    V = [[rng.randint(lo, hi) for _ in range(n)] for _ in range(r)]
    return [[float(sum(U[i][t] * V[t][j] for t in range(r))) for j in range(n)] for i in range(m)]


def gaussian(rng, m, n):
    return [[rng.gauss(0.0, 1.0) for _ in range(n)] for _ in range(m)]


def cases():
    out = []
    # 1. Kahan 12 x 12, k = 8: QRCP keeps the first 8 columns (no pivoting) although the last columns
    #    carry the small singular values' complement; the swaps move late columns in (j > 0).
    out.append(("kahan_12_k8", "Kahan c=0.285, 12x12, columns scaled by 0.999^j; QRCP does not pivot, "
                "the published swaps bring trailing columns in", kahan(12, 0.285, 1e-3), 8))
    # 2. Cancellation: channel 0 = 10 e0 is the longest, so QRCP takes it first, then channel 1 = 9.9 e0 + e1;
    #    channel 2 = -9.9 e0 + 0.95 e1 is discarded although |det [c1 c2]| ~ 1.9 |det [c0 c1]|: the swap
    #    brings channel 2 in from deep in the discarded block (j = 3), not from its first slot.
    #    Other channels: smaller orthogonal directions; every entry carries 1e-3 Gaussian noise.
    rng = random.Random(11)
    C = [[1e-3 * rng.gauss(0.0, 1.0) for _ in range(8)] for _ in range(20)]
    for j, i, v in [(0, 0, 10.0), (1, 0, 9.9), (1, 1, 1.0), (2, 0, -9.9), (2, 1, 0.95), (3, 2, 0.98), (4, 3, 0.5),
                    (5, 4, 0.4), (6, 5, 0.3), (6, 0, 0.2), (7, 6, 0.1)]:
        C[i][j] += v
    out.append(("cancellation_20x8_k4", "20x8: channels 1, 2 nearly opposite along the longest channel 0; "
                "QRCP keeps 0, 1 and the published swap replaces 0 by 2 (discarded slot j = 3)", C, 4))
    # 3. Near-duplicate channels: columns 5 and 6 are copies of one direction, 6 longer by a relative
    #    2e-4; the argmax pair prefers the longer copy although the shorter comes first in row-major order.
    rng = random.Random(18)
    G = gaussian(rng, 20, 8)
    for i in range(20):
        G[i][5] = 3.0 * G[i][0] + 2.5 * G[i][1]
        G[i][6] = G[i][5] * (1.0 + 2e-4) + 1e-3 * G[i][7]
    for i in range(20):
        for j in range(5):
            G[i][j] *= 0.5 ** j  # decreasing channel scales: QRCP's order is not the answer
    out.append(("near_duplicate_20x8_k4", "20x8 Gaussian with two near-duplicate channels (5, 6: ratio "
                "1 + 2e-4) built from channels 0, 1; channel scales halve", G, 4))
    # 4. Rank-deficient, integer-valued (exact in float32): 20 x 8 of rank 5, k = 5.
    rng = random.Random(5)
    out.append(("rank5_integer_20x8_k5", "20x8 integer matrix U V^T of rank 5 (entries exact in float32), "
                "k = rank", integer_product(rng, 20, 5, 8), 5))
    # 5. Dead channels: 6 independent live channels + 2 all-zero ones, k = 7 > live rank: QRCP takes the
    #    live ones, the 7th pivot has |R_77| = 0 exactly, the singular stop ends the loop with no swap.
    rng = random.Random(7)
    D = [[float(rng.randint(-9, 9)) for _ in range(8)] for _ in range(20)]
    for i in range(20):
        D[i][2] = 0.0
        D[i][6] = 0.0
    out.append(("dead_channels_20x8_k7", "20x8 integer matrix with channels 2 and 6 all zero (dead), k = 7: "
                "singular stop", D, 7))
    # 6. Graded spectrum 1 .. 1e-6 on a 20 x 8 Gaussian basis, k = 3.
    rng = random.Random(3)
    Gs = gaussian(rng, 20, 8)
    for i in range(20):
        for j in range(8):
            Gs[i][j] *= 10.0 ** (-6.0 * ((j * 5) % 8) / 7.0)  # scales in a scrambled order
    Mix = gaussian(random.Random(4), 8, 8)
    Gm = [[sum(Gs[i][t] * Mix[t][j] * (0.3 if t == j else 1.0) for t in range(8)) for j in range(8)]
          for i in range(20)]
    out.append(("graded_mixed_20x8_k3", "20x8: Gaussian columns graded 1..1e-6 then mixed by a Gaussian 8x8",
                Gm, 3))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                                  "rrqr_golden"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, what, M, k in cases():
        g = faithful_drrqr(M, k)
        mg = g["margins"]
        ok = (mg["argmax_gap"] > MARGIN and mg["rho_vs_f_gap"] > MARGIN and
              (mg["qrcp_pivot_gap"] > MARGIN or g["stop"] == "singular"))
        print(f"{name}: keep {g['keep']} (QRCP {g['qrcp_keep']}), swaps {g['swaps']} "
              f"[{', '.join('%d<->%d j=%d' % (t['out'], t['in'], t['j']) for t in g['trace'])}], stop {g['stop']}, "
              f"margins {mg}{'' if ok else '  REJECTED: a decision is within 1e-6'}")
        if not ok:
            raise SystemExit(1)
        doc = {"name": name, "what": what, "generator": "tools/faithful_drrqr_golden.py", "f": F,
               "max_swaps": MAX_SWAPS, "singular": SINGULAR, "m": len(M), "n": len(M[0]), "k": k,
               "matrix": M, **g}
        with open(os.path.join(a.out, name + ".json"), "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
