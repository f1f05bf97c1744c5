"""The store's tables against the design's own DDL text (§2), not only against the store's specs.

docs/design/message-store-design.zh.md is the design document, kept verbatim in the repository.
Its six CREATE TABLE statements are parsed here (columns and types, partition key, clustering
order, compaction, default_time_to_live, gc_grace_seconds; the server defaults where the text
says nothing) and compared with ``table_specs`` of appendix B's constants, which is what
``create_schema`` creates and ``check_schema`` holds the server to (tests/node). A difference
is either a bug or a deliberate deviation, which docs/design-deviations.md must list.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.constants import Constants
from lab.store import TABLE_NAMES, table_specs

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design" / "message-store-design.zh.md"
SERVER_DEFAULT_GC_GRACE_SECONDS = 864000
_CREATE = re.compile(r"CREATE TABLE (\w+) \((.*?)\n\)(.*?);", re.S)
_PRIMARY_KEY = re.compile(r"PRIMARY KEY \(\((.*?)\)(.*?)\)\s*$")


def _norm(cql_type: str) -> str:
    return cql_type.replace(" ", "").lower()


def _split_options(text: str) -> dict[str, str]:
    """The WITH clause's options by name (comments dropped; compaction maps kept whole)."""
    text = re.sub(r"--[^\n]*", "", text)
    text = re.sub(r"^\s*WITH\s+", "", text.strip())
    return {m.group(1).lower(): m.group(2).strip()
            for m in re.finditer(r"(CLUSTERING ORDER BY|compaction|gc_grace_seconds|default_time_to_live)\s*=?\s*"
                                 r"(\{.*?\}|\(.*?\)|\d+)", text, re.S)}


def design_tables() -> dict[str, dict]:
    """Every CREATE TABLE of the design text, parsed."""
    tables = {}
    for name, body, with_clause in _CREATE.findall(DESIGN.read_text(encoding="utf-8")):
        columns, primary = [], None
        for line in body.splitlines():
            line = re.sub(r"--.*", "", line).strip().rstrip(",")
            if not line:
                continue
            if line.startswith("PRIMARY KEY"):
                primary = _PRIMARY_KEY.match(line)
                continue
            column, cql_type = line.split(None, 1)
            columns.append((column, _norm(cql_type)))
        assert primary is not None, f"{name}: no PRIMARY KEY in the design text"
        partition = tuple(c.strip() for c in primary.group(1).split(","))
        clustering_columns = tuple(c.strip() for c in primary.group(2).split(",") if c.strip())
        options = _split_options(with_clause)
        order = dict.fromkeys(clustering_columns, "ASC")
        if "clustering order by" in options:
            for part in options["clustering order by"].strip("()").split(","):
                column, direction = part.split()
                order[column] = direction.upper()
        compaction = dict(re.findall(r"'(\w+)'\s*:\s*'?(\w+)'?", options.get("compaction", "{}")))
        tables[name] = {
            "columns": tuple(columns), "partition_key": partition,
            "clustering": tuple((c, order[c]) for c in clustering_columns),
            "compaction": compaction,
            "default_ttl": int(options.get("default_time_to_live", 0)),
            "gc_grace_seconds": int(options.get("gc_grace_seconds", SERVER_DEFAULT_GC_GRACE_SECONDS)),
        }
    return tables


def test_the_design_text_has_the_six_tables():
    assert sorted(design_tables()) == sorted(TABLE_NAMES)


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_store_table_matches_the_design_text(table):
    design = design_tables()[table]
    spec = table_specs(Constants.appendix_b())[table]
    assert tuple((c, _norm(t)) for c, t in spec.columns) == design["columns"], "columns, types or their order"
    assert spec.partition_key == design["partition_key"]
    assert spec.clustering == design["clustering"]
    assert spec.compaction == design["compaction"]
    assert spec.default_ttl == design["default_ttl"]
    assert spec.gc_grace_seconds == design["gc_grace_seconds"]


def test_the_parser_reads_what_the_text_says():
    """Spot checks of the parse itself, so a parser that read nothing cannot pass the comparison."""
    tables = design_tables()
    record = tables["message_record"]
    assert len(record["columns"]) == 22 and record["columns"][-1] == ("dek_id", "frozen<tuple<text,text,int>>")
    assert record["clustering"] == (("conversation_seq", "DESC"),)
    assert record["compaction"] == {"class": "TimeWindowCompactionStrategy", "compaction_window_unit": "DAYS",
                                    "compaction_window_size": "7"}
    assert (record["gc_grace_seconds"], record["default_ttl"]) == (86400, 0)
    dedup = tables["client_dedup"]
    assert (dedup["default_ttl"], dedup["gc_grace_seconds"], dedup["compaction"]["compaction_window_unit"]) == (
        7200, 3600, "HOURS")
    assert tables["message_reaction"]["clustering"] == (("user_id", "ASC"),)
    assert tables["conversation_head"]["compaction"] == {"class": "LeveledCompactionStrategy"}
