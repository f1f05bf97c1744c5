"""A user's string quoted in a conclusion renders as written, never as markup."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from lab.results.html import markdown, md_code, md_text

HOSTILE = ["x`<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "**b** [l](javascript:alert(1))",
           "a``b`", "<i id=x>i</i>", "&lt;script&gt;", "\\`<b>`"]


def _tags(html: str) -> set[str]:
    return set(re.findall(r"<([a-z0-9]+)", html))


@pytest.mark.parametrize("value", HOSTILE)
def test_quoted_text_and_code_make_no_markup(value):
    assert _tags(markdown(f"name {md_text(value)} end")) <= {"div", "p"}
    assert _tags(markdown(f"name {md_code(value)} end")) <= {"div", "p", "code"}


@given(st.text(alphabet=st.sampled_from("ab`*_[]()<>&\\!# -/"), max_size=30))
def test_any_text_in_a_code_span_stays_one_code_span(value):
    html = markdown(f"x {md_code(value)} y")
    assert html.count("<code>") == 1 and _tags(html) <= {"div", "p", "code"}


def test_plain_names_stay_readable_in_the_markdown_itself():
    assert md_text("results/b_row run") == "results/b_row run"
    assert md_code("example_mix") == "`example_mix`"
