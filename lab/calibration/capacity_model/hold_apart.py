"""The design alternative the space_amp notebook measures beside the design: the rows that never
expire (compliance_hold) in a table of their own, message_record holding only expiring rows.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lab.results.run_files import is_figure

HOLD_APART = "hold_apart"    # the capacity table's source of the what-if rows
HOLD_TABLE_SPACE_AMP = 1.0   # a table whose rows never expire keeps no expired data: its own overhead not measured


@dataclass(frozen=True, kw_only=True)
class HoldApart:
    """message_record's measured factor without the rows that never expire, their share, and the
    factor of both tables together (bytes-weighted, rows of one size)."""

    expiring_amp: float
    never_share: float
    stationary: bool

    @property
    def combined_amp(self) -> float:
        return (1 - self.never_share) * self.expiring_amp + self.never_share * HOLD_TABLE_SPACE_AMP

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> HoldApart | None:
        """From a space_amp notebook's values.json; None when it did not measure the expiring-only mix
        or no row never expires (then the two designs are one)."""
        amp, share = values.get("expiring_only_message_record_space_amp_steady"), values.get("never_expiring_share")
        if not is_figure(amp) or not is_figure(share, high=1.0) or share == 1.0:
            return None
        halves = values.get("expiring_only_halves")
        return cls(expiring_amp=float(amp), never_share=float(share),
                   stationary=isinstance(halves, Mapping) and halves.get("agree") is True)

    def to_json(self) -> dict[str, Any]:
        return {"expiring_amp": self.expiring_amp, "never_share": self.never_share, "stationary": self.stationary,
                "combined_amp": self.combined_amp, "hold_table_amp": HOLD_TABLE_SPACE_AMP}


def what_if_lines(h: HoldApart, rows: Sequence[Mapping[str, Any]], base: Sequence[Mapping[str, Any]], *,
                  one_table_amp: float, one_table_note: str = "") -> str:
    """The capacity conclusion's paragraph: each tier with the hold apart against the one table."""
    by_tier = {b["messages_per_day"]: b for b in base}
    steady = "" if h.stationary else " (**not stationary** in its run: a figure to confirm)"
    out = [f"\n\n**What-if: compliance_hold in a table of its own.** The space_amp run measured message_record "
           f"without the rows that never expire at {h.expiring_amp:.2f}{steady}; with their {h.never_share:.0%} in a "
           f"table that keeps no expired data (factor {h.combined_amp:.2f} for both together, against "
           f"{one_table_amp:.2f} in the design's one table" + (f": {one_table_note}" if one_table_note else "") + "):",
           ""]
    for r in rows:
        b = by_tier.get(r["messages_per_day"])
        than = f" vs {b['resident_tb']:.1f} TB over {b['nodes_needed']} nodes" if b is not None else ""
        out.append(f"- {r['messages_per_day']:,.0f} messages/day: {r['resident_tb']:.1f} TB over "
                   f"**{r['nodes_needed']} nodes**{than}.")
    out.append("\nThe decision is the design's: a second table (its own reads for held messages) against the disk "
               "it saves; the hold table's own compaction overhead is not measured here (taken as 1.0).")
    return "\n".join(out)
