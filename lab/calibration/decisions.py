"""One decision per constant, the line a report leads with: what to do with appendix B, how
precisely it was measured, whether the previous run agrees, what it changes in TB and nodes,
and the caveats of a production reading.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lab.calibration.capacity_model.disk_sizing import project_sizing
from lab.calibration.recommendations import MEASURES
from lab.constants import Constants
from lab.results.html import fmt

# the capacity figures a changed constant moves (§7); the other constants have no term there
CAPACITY_CONSTANTS = frozenset({"b_row_bytes", "lsm_space_amp", "replication_factor", "capacity_retention_days"})
IMPACT_DISK_BYTES_PER_NODE = 3.84e12      # the capacity notebook's default disk
SCYLLA_IN_LIMIT = 100                     # max_clustering_key_restrictions_per_query default (db/config.cc)
SHARED_MACHINE_CPUS = 4                   # at or below: the lab's shared VMs, not a production node


@dataclass(frozen=True, kw_only=True)
class Decision:
    constant: str
    action: str          # keep | change | would keep | would change | keep (inconclusive) | keep (policy) | keep (guarded)
    text: str            # the line a reviewer reads
    changed: bool


def _unit(c: Mapping[str, Any]) -> str:
    return str(c.get("unit") or "")


QUICK_CONFIRM = "once a full run confirms"


def decision(name: str, c: Mapping[str, Any], *, mode: str | None = None) -> Decision:
    """What to do with appendix B. A quick run decides nothing: its changes read "would change
    ... once a full run confirms", its keeps "would keep" (never an imperative)."""
    unit, cur, rec = _unit(c), c.get("current"), c.get("recommended")
    quick = mode == "quick"
    if c.get("inconclusive"):
        h = c.get("halves") or {}
        why = (f"inconclusive (first half of the run {fmt(h.get('first'))}, second half {fmt(h.get('second'))})"
               if (h and not h.get("agree", True)) or not c.get("inconclusive_reason") else c["inconclusive_reason"])
        return Decision(constant=name, action="keep (inconclusive)", changed=False,
                        text=f"keep {fmt(cur, unit=unit)}: {why}")
    if c.get("guarded"):
        new = c.get("suggested_for_new_tables")
        extra = f"; new tables could use {fmt(new, unit=unit)}" if new is not None else ""
        return Decision(constant=name, action="keep (guarded)", changed=False,
                        text=f"keep {fmt(cur, unit=unit)}: guarded, fixed for existing tables{extra}")
    if c.get("measured") is None:
        return Decision(constant=name, action="keep (policy)", changed=False,
                        text=f"keep {fmt(cur, unit=unit)}: a policy, observed not measured")
    measured = fmt(c.get("measured"), unit=unit)
    if c.get("changed"):
        if quick:
            return Decision(constant=name, action="would change", changed=True,
                            text=f"would change {fmt(cur)} → {fmt(rec, unit=unit)} {QUICK_CONFIRM} (measured {measured})")
        return Decision(constant=name, action="change", changed=True,
                        text=f"change {fmt(cur)} → {fmt(rec, unit=unit)} (measured {measured})")
    why = ("inside the measured interval" if c.get("rule") == "interval" else "the measurement recommends it")
    return Decision(constant=name, action="would keep" if quick else "keep", changed=False,
                    text=f"{'would keep' if quick else 'keep'} {fmt(cur, unit=unit)} ({why}; measured {measured})")


def precision_text(c: Mapping[str, Any]) -> str:
    p = c.get("precision")
    if p:
        got = p.get("achieved_rel_half_width")
        got = "n/a" if got is None else f"±{fmt(100 * got, 2)}%"
        why = {"reached": "reached", "budget": "time budget ran out", "limit": "step limit"}.get(p.get("status"), "?")
        return f"{got} (target ±{fmt(100 * p.get('target_rel_half_width', 0), 2)}%: {why}, {p.get('steps')} steps)"
    lo, hi, m = c.get("ci_low"), c.get("ci_high"), c.get("measured")
    if None not in (lo, hi, m) and m:
        return f"±{fmt(100 * (hi - lo) / 2 / abs(m), 2)}% (no target stated)"
    return "no interval"


def agreement_text(c: Mapping[str, Any], *, mode: str | None = None) -> str:
    a = c.get("agreement")
    if not a:
        return f"no previous {mode + ' ' if mode else ''}run here to compare with"
    return f"{a['status']} with run {a.get('previous_run', '?')}" + (f": {a['detail']}" if a.get("detail") else "")


MEASURED_CAPACITY_CONSTANTS = ("b_row_bytes", "lsm_space_amp")  # the §7 factors a notebook measures


def _sizing(constants: Any) -> Any:
    return project_sizing(constants=constants, usable_disk_bytes_per_node=IMPACT_DISK_BYTES_PER_NODE)


def impact(name: str, c: Mapping[str, Any], constants: Any = None) -> str:
    """What the recommendation changes in §7's resident TB and nodes (the starter tier of
    appendix B, 3.84 TB disks at 50 %)."""
    if name not in CAPACITY_CONSTANTS:
        return "none on TB or nodes (no term of §7)"
    if name not in MEASURED_CAPACITY_CONSTANTS or c.get("measured") is None:
        return "—"

    constants = constants or Constants.appendix_b()
    now = _sizing(constants.replace(**{name: c["current"]}))
    then = _sizing(constants.replace(**{name: c["recommended"]}))
    tier = f"at {fmt(constants.capacity_messages_per_day / 1e6)} M messages/day"
    conf = f" ({c.get('confidence', 'no')} confidence)"
    if not c.get("changed"):
        return f"none: {fmt(now.resident_tb)} TB resident, {now.nodes_needed} nodes {tier}"
    return (f"resident {fmt(now.resident_tb)} → {fmt(then.resident_tb)} TB, nodes {now.nodes_needed} → "
            f"{then.nodes_needed} {tier} (3.84 TB disks at 50%){conf}")


def caveats(name: str, c: Mapping[str, Any], env: Mapping[str, Any]) -> list[str]:
    """What a production reading of this recommendation must keep in mind."""
    if c.get("notebook") is None:
        return []
    out = []
    server, version, nodes = env.get("server"), env.get("server_version"), env.get("nodes")
    if server and server != "scylla":
        out.append(f"measured on {server} {version or ''} ({nodes} node{'s' if nodes != 1 else ''}); production is "
                   "ScyllaDB: confirm there".replace("  ", " "))
    machine = env.get("machine") or {}
    cpus = machine.get("cpus")
    load = (env.get("loadavg_at_start") or [None])[0]
    latency_based = name in ("batch_read_in_list_limit", "history_max_empty_bucket_scan", "batch_read_range_min_density")
    if latency_based and cpus and (cpus <= SHARED_MACHINE_CPUS or (load is not None and load > cpus / 2)):
        out.append(f"latencies from a {cpus}-core machine shared with the load generator"
                   + (f" (load average {fmt(load)} at the start)" if load is not None else "")
                   + ": their noise is in the intervals, production hardware changes the absolute values")
    if name == "batch_read_in_list_limit":
        rec = c.get("recommended")
        if isinstance(rec, (int, float)) and rec > SCYLLA_IN_LIMIT:
            out.append(f"ScyllaDB rejects IN lists over {SCYLLA_IN_LIMIT} by default "
                       "(max_clustering_key_restrictions_per_query): raise that setting on every node first")
        else:
            out.append(f"ScyllaDB's default limit is {SCYLLA_IN_LIMIT} (max_clustering_key_restrictions_per_query)")
    if name == "b_row_bytes":
        observed = c.get("observed") or {}
        profile = observed.get("profile", "chat_mix")
        out.append(f"per replica, for the `{profile}` mix with lz4: another mix is priced by the row model "
                   "(capacity notebook, my_mix); Scylla's SSTable format and compression differ")
    if name == "lsm_space_amp":
        out.append("simulated in compressed time (TTLs, gc_grace scaled) at the lab's volumes, for the profile's "
                   "retention mix; ScyllaDB's default tombstone_gc `repair` keeps expired data until a repair at "
                   "RF >= 2: more than measured here")
    if c.get("guarded"):
        out.append("immutable for existing tables (§27.2.4)")
    return out


def shared_caveats(per_constant: Mapping[str, list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    """(the caveats every constant with caveats has, said once; what is left per constant).
    One constant alone keeps its own."""
    lists = [v for v in per_constant.values() if v]
    if len(lists) < 2:
        return [], {n: list(v) for n, v in per_constant.items()}
    shared = [x for x in lists[0] if all(x in other for other in lists[1:])]
    return shared, {n: [x for x in v if x not in shared] for n, v in per_constant.items()}


def measured_first(cal: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The constants in the report's order: measured first (in the order of
    lab.calibration.recommendations.MEASURES: b_row first), then the observed ones, then the rest."""

    order = {m.constant: i for i, m in reversed(list(enumerate(MEASURES)))}
    return sorted((cal.get("constants") or {}).items(),
                  key=lambda kv: (kv[1].get("notebook") is None, kv[1].get("measured") is None,
                                  order.get(kv[0], len(order))))


def changes_line(cal: Mapping[str, Any]) -> str:
    """The console's line about appendix B, in the report's words: a full run's "recommended
    changes: b_row_bytes 600 -> 1,235 B", a quick run's "would change once a full run confirms:
    ..."; inconclusive constants named as kept."""
    mode = cal.get("mode")
    changed, inconclusive = [], []
    for name, c in measured_first(cal):
        if c.get("inconclusive"):
            inconclusive.append(name)
        elif c.get("changed"):
            changed.append(f"{name} {fmt(c.get('current'))} -> {fmt(c.get('recommended'), unit=_unit(c))}")
    head = f"would change {QUICK_CONFIRM}" if mode == "quick" else "recommended changes"
    text = f"{head}: {', '.join(changed) or 'none'}"
    if inconclusive:
        text += f"; inconclusive (kept): {', '.join(inconclusive)}"
    return text
