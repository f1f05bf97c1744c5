"""b_row for any message mix: bytes per row as a linear function of what a row carries.

    b_row = overhead + a x payload bytes + b x media_metadata bytes + c x thumbnail bytes

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lab.errors import ValidationError
from lab.measure import LinearFit, fit_linear, mean_ci
from lab.workload import load_profile, media_for

REGRESSORS = ("payload_bytes", "media_metadata_bytes", "thumbnail_bytes")
COEFFICIENTS = ("overhead",) + REGRESSORS

# name -> (base profile, [messages] overrides): mixes the profiles alone cannot separate
# (in every profile, metadata and thumbnails come together on image/video rows).
DESIGN_MIXES: Mapping[str, tuple[str, Mapping[str, float]]] = {
    "text_long": ("text_only", {"text_bytes_median": 600.0}),
    "files_audio": ("chat_mix", {"text": 0.0, "image": 0.0, "video": 0.0, "audio": 0.5, "file": 0.5, "custom": 0.0,
                                 "caption_share": 0.0}),
    "photos_small_thumbs": ("chat_mix", {"text": 0.0, "image": 1.0, "video": 0.0, "audio": 0.0, "file": 0.0,
                                         "custom": 0.0, "caption_share": 0.0, "thumbnail_bytes_median": 1500.0}),
    "photos_large_thumbs": ("chat_mix", {"text": 0.0, "image": 1.0, "video": 0.0, "audio": 0.0, "file": 0.0,
                                         "custom": 0.0, "caption_share": 0.0, "thumbnail_bytes_median": 20000.0}),
}


def mix_profile(name: str, mixes: Mapping[str, tuple[str, Mapping[str, float]]] = DESIGN_MIXES,
                label: str = "design mix") -> Any:
    """The workload profile named ``name`` (``lab/workload/profiles``) or one of ``mixes``: a base
    profile with its message mix overridden (the design mixes by default)."""

    if name not in mixes:
        return load_profile(name)
    base, overrides = mixes[name]
    profile = load_profile(base)
    return dataclasses.replace(profile, name=name, description=f"{label} over {base}: {dict(overrides)}",
                               messages=dataclasses.replace(profile.messages, **overrides))


def per_row(messages: pd.DataFrame) -> pd.DataFrame:
    """Payload, media_metadata (without thumbnail) and thumbnail bytes of each row of a workload
    table, as the store receives the row (``lab.workload`` materialisation: E2EE rows carry no
    media metadata, text rows none)."""

    if len(messages) == 0:
        raise ValidationError("composition of an empty table")
    meta, thumb = [], []
    for row in messages.to_dict("records"):
        media = media_for(row)
        thumb.append(0 if media is None else len(media.thumbnail))
        meta.append(0 if media is None else len(dataclasses.replace(media, thumbnail=b"").encode()))
    return pd.DataFrame({"payload_bytes": messages["body_bytes"].to_numpy(float), "media_metadata_bytes": meta,
                         "thumbnail_bytes": thumb, "media": [m > 0 for m in meta]}, index=messages.index)


def composition(messages: pd.DataFrame) -> dict[str, float]:
    """Mean payload, media_metadata (without thumbnail) and thumbnail bytes per row of a
    workload table (:func:`per_row`), the share of rows with media, and the rows."""
    rows = per_row(messages)
    return {**{c: float(rows[c].sum()) / len(rows) for c in REGRESSORS}, "media_share": float(rows["media"].mean()),
            "rows": len(rows)}


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """The fit's prediction for a profile it did not see, against that profile's measurement."""

    profile: str
    measured_bytes: float
    measured_ci_low: float | None
    measured_ci_high: float | None
    predicted_bytes: float
    predicted_ci_low: float
    predicted_ci_high: float
    composition: Mapping[str, float]

    @property
    def error_bytes(self) -> float:
        return self.predicted_bytes - self.measured_bytes

    @property
    def relative_error(self) -> float:
        return self.error_bytes / self.measured_bytes if self.measured_bytes else math.nan

    @property
    def agrees(self) -> bool:
        """The two intervals' half-widths combined cover the difference (independent estimates); a
        measurement of too few repeats for an interval (NaN bounds) leaves the prediction's alone."""
        def half_width(low: float | None, high: float | None) -> float:
            # None: the bounds read back from a values.json, where NaN is written as null
            return 0.0 if low is None or high is None or math.isnan(high - low) else (high - low) / 2

        half = math.hypot(half_width(self.measured_ci_low, self.measured_ci_high),
                          half_width(self.predicted_ci_low, self.predicted_ci_high))
        return abs(self.error_bytes) <= half

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "composition": dict(self.composition), "error_bytes": self.error_bytes,
                "relative_error": self.relative_error, "agrees": self.agrees}


@dataclass(frozen=True, kw_only=True)
class RowModel:
    fit: LinearFit
    mixes: tuple[str, ...]            # the mixes fitted
    held_out: HeldOut | None

    def predict(self, mix: Mapping[str, float]) -> dict[str, float]:
        """b_row (B) of a mix given as mean bytes per row of each regressor (missing: 0),
        with its 95 % confidence interval and the prediction interval of one measurement."""
        unknown = sorted(set(mix) - set(REGRESSORS))
        if unknown:
            raise ValidationError(f"unknown mix keys {', '.join(unknown)}; a mix gives mean bytes per row of "
                                  f"{', '.join(REGRESSORS)}", keys=unknown)
        x = {"overhead": 1.0}
        for name in REGRESSORS:
            value = mix.get(name, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or math.isinf(value):
                raise ValidationError(f"mix {name} must be a number of bytes >= 0, got {value!r}", field=name,
                                      value=value)
            x[name] = float(value)
        return self.fit.predict(x)

    def to_json(self) -> dict[str, Any]:
        return {"fit": self.fit.to_json(), "mixes": list(self.mixes),
                "held_out": self.held_out.to_json() if self.held_out else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RowModel:
        h = data.get("held_out")
        held = HeldOut(**{k: h[k] for k in (f.name for f in dataclasses.fields(HeldOut))}) if h else None
        return cls(fit=LinearFit.from_json(data["fit"]), mixes=tuple(data.get("mixes", ())), held_out=held)


def fit_row_model(observations: pd.DataFrame, *, held_out: str | None) -> RowModel:
    """Fit on one row per measured repeat (columns ``mix``, the :data:`REGRESSORS` and
    ``b_row_bytes``), every mix except ``held_out``; check the fit on the held-out mix."""
    missing = sorted({"mix", "b_row_bytes", *REGRESSORS} - set(observations.columns))
    if missing:
        raise ValidationError(f"observations lack columns {', '.join(missing)}", columns=missing)
    train = observations[observations["mix"] != held_out]
    X = [[1.0, *(float(r[c]) for c in REGRESSORS)] for r in train.to_dict("records")]
    fit = fit_linear(X, train["b_row_bytes"].to_numpy(float), COEFFICIENTS)
    check = None
    test = observations[observations["mix"] == held_out] if held_out else observations.iloc[0:0]
    if len(test):
        mean, low, high = mean_ci(test["b_row_bytes"])
        comp = {c: float(test[c].mean()) for c in REGRESSORS}
        pred = fit.predict({"overhead": 1.0, **comp})
        check = HeldOut(profile=str(held_out), measured_bytes=mean, measured_ci_low=low, measured_ci_high=high,
                        predicted_bytes=pred["mean"], predicted_ci_low=pred["ci_low"],
                        predicted_ci_high=pred["ci_high"], composition=comp)
    return RowModel(fit=fit, mixes=tuple(dict.fromkeys(train["mix"])), held_out=check)
