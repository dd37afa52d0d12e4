"""The hf backend's sampler draws from vLLM's processed distribution, whichever way it gets there.

The reference distribution is computed here in float64 from the definitions (temperature, then
min-p, top-k and top-p, each on what the previous left), independently of `_sample`. Vocabularies of
3,000 tokens exercise both of its paths: a peaked distribution (the 1,024 candidates hold the nucleus)
and a flat one (they do not, so the whole vocabulary is filtered).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from thinc_bench.backends import SamplingParams
from thinc_bench.backends._hf_batch import CANDIDATES, Row, _sample

V = 3000
DRAWS = 3000


def reference(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    z = logits.astype(np.float64) / params.temperature
    keep = np.ones(len(z), dtype=bool)

    def probs() -> np.ndarray:
        e = np.where(keep, np.exp(z - z[keep].max()), 0.0)
        return e / e.sum()

    if params.min_p > 0:
        p = probs()
        keep &= p >= params.min_p * p.max()
    if params.top_k is not None:
        keep &= z >= np.sort(z[keep])[::-1][min(params.top_k, keep.sum()) - 1]
    if params.top_p < 1:
        p = probs()
        order = np.argsort(-p, kind="stable")
        before = np.cumsum(p[order]) - p[order]
        keep[order[before >= params.top_p]] = False
    return probs()


def _chi2_on_equal_mass_bins(counts: np.ndarray, p: np.ndarray, bins: int = 10) -> float:
    order = np.argsort(-p, kind="stable")
    edges = np.searchsorted(np.cumsum(p[order]), np.linspace(0, 1, bins + 1)[1:-1])
    groups = np.split(order, edges)
    observed = np.array([counts[g].sum() for g in groups])
    expected = np.array([p[g].sum() for g in groups]) * counts.sum()
    return float(((observed - expected) ** 2 / expected).sum())


PEAKED = -np.arange(V) / 60.0  # the top 1,024 hold all but e^-17 of the mass
FLAT = np.random.default_rng(0).normal(0, 0.05, V)  # the top 1,024 hold about a third


@pytest.mark.parametrize(
    ("name", "logits", "params"),
    [
        ("peaked top-p", PEAKED, SamplingParams(temperature=0.6, top_p=0.9)),
        ("peaked min-p", PEAKED, SamplingParams(temperature=1.0, min_p=0.05)),
        ("peaked top-k top-p", PEAKED, SamplingParams(temperature=1.3, top_k=50, top_p=0.8)),
        ("flat top-p", FLAT, SamplingParams(temperature=1.0, top_p=0.9)),
        ("flat, no filter", FLAT, SamplingParams(temperature=0.7)),
    ],
)
def test_draws_follow_the_reference_distribution_and_report_its_logprob(name, logits, params) -> None:
    assert V > CANDIDATES
    p = reference(logits, params)
    permutation = np.random.default_rng(1).permutation(V)  # the likely tokens are not the first ids
    flat = logits is FLAT
    logits, p = logits[permutation], p[permutation]
    row = Row([1], params, torch.Generator().manual_seed(7))
    tensor = torch.tensor(logits, dtype=torch.float32)
    counts = np.zeros(V)
    for _ in range(DRAWS // 3 if flat else DRAWS):  # the flat path sorts 3,000 ids a draw
        token, logprob = _sample(tensor, row)
        assert p[token] > 0, f"{name}: drew token {token}, which the filters drop"
        assert logprob == pytest.approx(np.log(p[token]), abs=2e-4)
        counts[token] += 1
    # 10 bins of equal reference mass: chi-square with 9 degrees of freedom, 27.9 at p = 0.001
    assert _chi2_on_equal_mass_bins(counts, p) < 27.9, name


def test_the_same_seed_draws_the_same_tokens_and_another_seed_differs() -> None:
    params = SamplingParams(temperature=0.6, top_p=0.95)
    tensor = torch.tensor(PEAKED, dtype=torch.float32)

    def draws(seed: int) -> list[int]:
        row = Row([1], params, torch.Generator().manual_seed(seed))
        return [_sample(tensor, row)[0] for _ in range(50)]

    assert draws(3) == draws(3) != draws(4)
