"""docs/reliability.md names a test for every guarantee and every fault in its fault table: each named test must
exist."""

from __future__ import annotations

import re

from .conftest import REPO

DOC = REPO / "docs" / "reliability.md"
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?::(\w+)`")


def test_every_test_the_reliability_doc_names_exists():
    text = DOC.read_text(encoding="utf-8")
    named, missing, current = 0, [], None
    for match in REFERENCE.finditer(text):
        current = match.group(1) or current  # `::name` continues the last file named
        assert current is not None, f"{match.group(0)} names no file"
        if not re.search(rf"^(async )?def {match.group(2)}\(", (REPO / current).read_text(encoding="utf-8"), re.M):
            missing.append(f"{current}::{match.group(2)}")
        named += 1
    assert named > 60 and not missing, missing


def test_each_fault_of_issue_17_has_a_row_with_a_test():
    table = DOC.read_text(encoding="utf-8").split("## The faults found by fault injection", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [int(line.split("|")[1]) for line in rows] == list(range(1, 14))
    assert all(REFERENCE.search(line.split("|")[-2]) for line in rows)
