"""The repository stands on its own and its documents stay true: generated pages are up to
date, the README's versions are constraints.txt's, and every path the docs name exists."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_generated_pages_are_up_to_date():
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-docs"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_readme_versions_are_the_constraints():
    pins = dict(re.findall(r"^([\w-]+)==([\w.+-]+)$", (REPO / "constraints.txt").read_text(), re.M))
    readme = (REPO / "README.md").read_text()
    table = dict(re.findall(r"^\| ([\w-]+) \| ([\d.]+) \|", readme.split("### Versions", 1)[1], re.M))
    assert pins and table == pins


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_document_points_outside_the_repository(doc):
    text = doc.read_text()
    assert "../shared" not in text and "DESIGN.md" not in text and "seeds/" not in text


@pytest.mark.parametrize("doc", [REPO / "README.md", REPO / "docs" / "architecture.md"],
                         ids=["README", "architecture"])
def test_every_named_file_exists(doc):
    names = set(re.findall(r"`((?:tools|scripts|tests|benchmarks|docs|e2e)/[\w./-]+)`", doc.read_text()))
    names |= {f"tools/convgen/kernels/{n}" for n in
              re.findall(r"`(conv_\w+\.py|common\.py)`", doc.read_text())}
    missing = [n for n in sorted(names)
               if not (REPO / n).exists() and "<" not in n and "/Output" not in n]
    assert names and not missing, missing


def test_relative_links_resolve():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name}: {target}"
