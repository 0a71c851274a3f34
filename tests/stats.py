"""Chi-square helpers shared by the sampling tests (no scipy on this machine)."""
import math

import numpy as np

MIN_EXPECTED = 5.0  # chi_square pools the cells expected fewer times than this


def chi2_sf(x, df):
    """P(chi-square with df degrees of freedom > x): the regularized upper incomplete gamma Q(df/2, x/2)."""
    a, x = df / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    log_prefactor = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:  # series for P
        term = total = 1.0 / a
        n = a
        while abs(term) > 1e-16 * abs(total):
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    # continued fraction for Q (modified Lentz)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return math.exp(log_prefactor) * h


def chi2_critical(alpha, df):
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > alpha else (lo, mid)
    return hi


def chi_square(counts, probs):
    """(statistic, degrees of freedom, p-value) of observed counts against exact probabilities; the cells
    expected fewer than MIN_EXPECTED times are pooled (and the pool joins the smallest cell if still small).
    An outcome of probability 0 that was observed gives an infinite statistic."""
    n = counts.sum()
    expected = probs * n
    if (counts[probs == 0] > 0).any():
        return math.inf, 0, 0.0
    small = expected < MIN_EXPECTED
    obs, exp = list(counts[~small].astype(float)), list(expected[~small])
    pool_o, pool_e = float(counts[small].sum()), float(expected[small].sum())
    if pool_e > 0:
        if pool_e < MIN_EXPECTED and exp:
            i = int(np.argmin(exp))
            obs[i] += pool_o
            exp[i] += pool_e
        else:
            obs.append(pool_o)
            exp.append(pool_e)
    obs, exp = np.array(obs), np.array(exp)
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = len(exp) - 1
    return stat, df, chi2_sf(stat, df)
