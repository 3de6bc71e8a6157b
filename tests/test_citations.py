"""Every citation of a document leads somewhere in the repository: a reader of a clone can follow
it. A citation is a path ``docs/<file>.md`` (optionally ``#anchor``), a relative markdown link
``[text](engine.md#the-model)``, or a bare ``engine.md#anchor``; the file must exist and the
anchor must be one the file defines (an explicit ``<a id="...">`` or a heading's GitHub slug).
Documents kept outside the repository (``DESIGN.md``, ``REFERENCE.md``, "notes §x") cannot be
followed at all, so naming them is an error too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("collsim", "docs", "tests", "scenarios", "benchmarks", "workloads", "jobs",
           "validation", "README.md")
TOPOLOGIES = ("topologies",)

# Documents that live outside the repository. "notes" and the section sign may be split by a
# line break, as comments wrap.
OUTSIDE = re.compile(r"\bDESIGN\.md\b|\bREFERENCE\.md\b|\bnotes[\s#]*§|nccl_model\.md")
# A repository path docs/<file>.md, not part of a longer path and not the path of a file in
# another repository (sources cite those as "github.com/owner/name@commit docs/x.md").
DOC_PATH = re.compile(r"(?<![\w./-])(?<!\]\()((?:\.\./)*docs/[\w./-]+?\.md)(?:#([\w-]+))?")
OTHER_REPOSITORY = re.compile(r"@[0-9a-f]{6,40}\s+$")
# A markdown link's target: path and anchor (either may be empty, not both).
LINK = re.compile(r"\]\(([^()\s#]*)(?:#([^()\s]*))?\)")
# A bare page#anchor outside a link: engine.md#the-model.
BARE_ANCHOR = re.compile(r"(?<![\w./-])(?<!\]\()([\w-]+\.md)#([\w-]+)")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text lowercased, punctuation dropped
    (letters, digits, '_', '-' and spaces kept), spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text)                        # inline HTML renders as nothing
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor ``page`` defines: explicit ones and its headings' slugs (outside code
    fences; a repeated slug gets -1, -2, ... as on GitHub)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        found.update(EXPLICIT_ANCHOR.findall(line))
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        heading = None if fenced else HEADING.match(line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def text_files(root: Path, names: tuple[str, ...]):
    """The text files under ``names`` (folders or files) of ``root``, in a stable order."""
    for name in names:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if ("__pycache__" in file.parts or file.suffix in (".pyc", ".png", ".pdf", ".svg")
                    or file.resolve() == Path(__file__).resolve()):  # its examples are broken
                continue
            try:
                yield file, file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def broken_citations(root: Path, names: tuple[str, ...]) -> list[str]:
    """'file:line: what is wrong' for every citation under ``names`` that cannot be followed."""
    root = root.resolve()
    problems: list[str] = []
    cache: dict[Path, set[str]] = {}

    def check(file: Path, offset: int, text: str, target: Path, anchor: str | None,
              cited: str) -> None:
        where = f"{file.relative_to(root)}:{text.count(chr(10), 0, offset) + 1}"
        if not target.is_file():
            problems.append(f"{where}: {cited} names a file that does not exist")
        elif anchor and target.suffix == ".md":
            if target not in cache:
                cache[target] = anchors(target)
            if anchor not in cache[target]:
                problems.append(f"{where}: {cited}: {target.relative_to(root)} defines no "
                                f"anchor #{anchor}")

    for file, text in text_files(root, names):
        for match in OUTSIDE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{file.relative_to(root)}:{line}: {match.group(0)!r} names a "
                            "document outside the repository")
        for match in DOC_PATH.finditer(text):
            path, anchor = match.groups()
            if OTHER_REPOSITORY.search(text, text.rfind("\n", 0, match.start()) + 1,
                                       match.start()):
                continue
            check(file, match.start(), text, root / path.lstrip("./"), anchor, match.group(0))
        for match in LINK.finditer(text):
            path, anchor = match.groups()
            if "://" in path or path.startswith("mailto:") or not (path or anchor):
                continue
            if file.suffix != ".md" and not path.endswith(".md"):
                continue  # code such as handlers[kind](args) is not a link
            if not path:
                target = file
            elif file.suffix == ".md" or (file.parent / path).exists():
                target = file.parent / path
            else:  # markdown text in code is written into a page under docs/
                target = root / "docs" / path
            check(file, match.start(), text, target.resolve(), anchor, match.group(0))
        for match in BARE_ANCHOR.finditer(text):
            page, anchor = match.groups()
            target = file.parent / page
            if not target.exists():
                target = root / "docs" / page
            check(file, match.start(), text, target, anchor, match.group(0))
    return problems


def test_citations_name_files_and_anchors_that_exist():
    problems = broken_citations(ROOT, SCANNED)
    assert not problems, "broken citations:\n" + "\n".join(problems)


def test_topology_citations_name_files_and_anchors_that_exist():
    problems = broken_citations(ROOT, TOPOLOGIES)
    assert not problems, "broken citations:\n" + "\n".join(problems)


def test_every_kind_of_broken_citation_is_reported_with_its_line(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(
        "# The model (`engine/costs.py`)\n\n<a id=\"tuning-channels\"></a>\n\n"
        "```\n# not a heading\n```\n\n## Lanes\n\n## Lanes\n\n[back](#lanes-1) [gone](#lanes-2)\n",
        encoding="utf-8")
    code = tmp_path / "collsim"
    code.mkdir()
    (code / "mod.py").write_text(
        "# docs/page.md#the-model-enginecostspy and docs/page.md#tuning-channels hold.\n"
        "# docs/page.md#not-a-heading, (docs/missing.md), page.md#nope, (page.md#gone) do not.\n"
        "# (DESIGN.md's columns; REFERENCE.md; notes\n# §2.1)\n"
        "# github.com/o/r@abcdef0 docs/elsewhere.md is another repository's file.\n"
        "TEXT = '[design](page.md#lanes) [old](old.md)'\n",
        encoding="utf-8")
    problems = broken_citations(tmp_path, ("collsim", "docs"))
    assert sorted(problems) == sorted([
        "collsim/mod.py:2: docs/page.md#not-a-heading: docs/page.md defines no anchor "
        "#not-a-heading",
        "collsim/mod.py:2: docs/missing.md names a file that does not exist",
        "collsim/mod.py:2: page.md#nope: docs/page.md defines no anchor #nope",
        "collsim/mod.py:2: page.md#gone: docs/page.md defines no anchor #gone",
        "collsim/mod.py:3: 'DESIGN.md' names a document outside the repository",
        "collsim/mod.py:3: 'REFERENCE.md' names a document outside the repository",
        "collsim/mod.py:3: 'notes\\n# §' names a document outside the repository",
        "collsim/mod.py:6: ](old.md) names a file that does not exist",
        "docs/page.md:13: ](#lanes-2): docs/page.md defines no anchor #lanes-2",
    ])


def test_the_anchors_topology_files_cite_exist():
    # The sections topology files cite by name (agreed with the presets' page): NCCL's model,
    # and the hardware figures by kind.
    assert {"sources", "tuning", "topology", "algorithms", "nvls", "network"} \
        <= anchors(ROOT / "docs" / "nccl.md")
    assert {"gpus", "nvlink", "nvswitch", "pcie", "nics", "fabrics", "clouds"} \
        <= anchors(ROOT / "docs" / "hardware.md")
