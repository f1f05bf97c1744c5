"""Ordinary least squares with the intervals a reviewer needs: coefficients, a prediction.

More: docs/measure-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lab.measure.stats import CONFIDENCE


@dataclass(frozen=True, kw_only=True)
class LinearFit:
    names: tuple[str, ...]
    coefficients: tuple[float, ...]
    std_errors: tuple[float, ...]
    ci_low: tuple[float, ...]
    ci_high: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]
    observations: int
    dof: int
    residual_sd: float
    r_squared: float | None
    confidence: float = CONFIDENCE

    def coefficient(self, name: str) -> float:
        return self.coefficients[self.names.index(name)]

    def _t(self) -> float:
        if self.dof < 1:
            return math.inf
        from scipy import stats

        return float(stats.t.ppf(0.5 + self.confidence / 2, self.dof))

    def predict(self, x: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
        """Fitted mean at ``x`` (a value per name, in order or by name), its confidence
        interval and the prediction interval of one new observation."""
        v = np.asarray([float(x[n]) for n in self.names] if isinstance(x, Mapping) else [float(a) for a in x])
        if len(v) != len(self.names):
            raise ValueError(f"expected {len(self.names)} values ({', '.join(self.names)}), got {len(v)}")
        mean = float(v @ np.asarray(self.coefficients))
        var_mean = max(float(v @ np.asarray(self.covariance) @ v), 0.0)
        t = self._t()
        half, half_new = t * math.sqrt(var_mean), t * math.sqrt(var_mean + self.residual_sd ** 2)
        return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half,
                "prediction_low": mean - half_new, "prediction_high": mean + half_new}

    def to_json(self) -> dict[str, Any]:
        return {"names": list(self.names), "coefficients": list(self.coefficients),
                "std_errors": list(self.std_errors), "ci_low": list(self.ci_low), "ci_high": list(self.ci_high),
                "covariance": [list(r) for r in self.covariance], "observations": self.observations,
                "dof": self.dof, "residual_sd": self.residual_sd, "r_squared": self.r_squared,
                "confidence": self.confidence}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LinearFit:
        return cls(names=tuple(data["names"]), coefficients=tuple(data["coefficients"]),
                   std_errors=tuple(data["std_errors"]), ci_low=tuple(data["ci_low"]), ci_high=tuple(data["ci_high"]),
                   covariance=tuple(tuple(r) for r in data["covariance"]), observations=int(data["observations"]),
                   dof=int(data["dof"]), residual_sd=float(data["residual_sd"]), r_squared=data.get("r_squared"),
                   confidence=float(data.get("confidence", CONFIDENCE)))


def fit_linear(x: Sequence[Sequence[float]] | np.ndarray, y: Sequence[float] | np.ndarray, names: Sequence[str], *,
               confidence: float = CONFIDENCE) -> LinearFit:
    """Least squares of ``y`` on the columns of ``x`` (named ``names``; no intercept is added).

    Raises ValueError when the columns are linearly dependent (a design that cannot separate
    them) or there are no more observations than coefficients."""
    X = np.asarray(x, dtype=float)
    Y = np.asarray(y, dtype=float)
    if X.ndim != 2 or X.shape[1] != len(names) or X.shape[0] != len(Y):
        raise ValueError(f"x must be n x {len(names)} and y of length n; got {X.shape} and {Y.shape}")
    n, k = X.shape
    if n <= k:
        raise ValueError(f"{n} observations cannot fit {k} coefficients with an error estimate")
    if np.linalg.matrix_rank(X) < k:
        raise ValueError(f"the columns {', '.join(names)} are linearly dependent: the design cannot separate them")
    beta, *_ = np.linalg.lstsq(X, Y, rcond=None)
    resid = Y - X @ beta
    dof = n - k
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.inv(X.T @ X)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    fit = LinearFit(names=tuple(names), coefficients=tuple(float(b) for b in beta), std_errors=tuple(float(s) for s in se),
                    ci_low=(), ci_high=(), covariance=tuple(tuple(float(c) for c in r) for r in cov), observations=n,
                    dof=dof, residual_sd=math.sqrt(s2), confidence=confidence,
                    r_squared=(1 - float(resid @ resid) / float(((Y - Y.mean()) ** 2).sum()))
                    if float(((Y - Y.mean()) ** 2).sum()) > 0 else None)
    t = fit._t()
    return LinearFit(**{**fit.__dict__, "ci_low": tuple(float(b - t * s) for b, s in zip(beta, se)),
                        "ci_high": tuple(float(b + t * s) for b, s in zip(beta, se))})
