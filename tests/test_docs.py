"""The documents say what the code does: docs/algorithms.md is what ``collsim list
--markdown`` prints, the README's quick start is what CI runs, its links lead somewhere, and
no page narrates the history of the work."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from collsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
HISTORY = re.compile(r"\b(used to|this session|(first|second|third|earlier|last) sessions?|"
                     r"went from|no longer|anymore|any more|was fixed|were fixed|"
                     r"previously|before this|after the fix)\b", re.IGNORECASE)


def test_algorithms_page_is_what_collsim_list_markdown_prints(capsys):
    assert main(["list", "--markdown"]) == 0
    printed = capsys.readouterr().out
    assert (ROOT / "docs" / "algorithms.md").read_text(encoding="utf-8") == printed, \
        "regenerate: collsim list --markdown > docs/algorithms.md"


def test_readme_quick_start_is_what_ci_runs():
    script = (ROOT / ".ci" / "run").read_text()
    commands = [shlex.split(line.partition("=")[2])[0] for line in script.splitlines()
                if line.startswith(("install=", "tests="))]
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- quickstart:begin -->")[1].split("<!-- quickstart:end -->")[0]
    assert [line for line in block.splitlines() if line and not line.startswith("```")] \
        == commands


def test_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 220


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_lead_to_files(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_say_what_is_true_now(page):
    found = [m.group(0) for m in HISTORY.finditer(page.read_text(encoding="utf-8"))]
    assert not found, f"{page.name} narrates history: {found}"


def test_readme_python_examples_print_what_they_show(monkeypatch):
    """The README's notebook examples, run as doctests from the repository's root."""
    import doctest

    import collsim

    monkeypatch.chdir(ROOT)
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE)
    test = parser.get_doctest("\n".join(blocks), {}, "README.md", str(README), 0)
    try:
        runner.run(test)
    finally:
        if "star" in collsim.list_algorithms("allreduce")["allreduce"]:
            collsim.unregister("allreduce", "star")
    assert runner.failures == 0 and runner.tries > 5


def test_readme_commands_print_what_they_show(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```console\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks
    for block in blocks:
        command, *shown = block.strip().splitlines()
        assert command.startswith("$ collsim ")
        assert main(shlex.split(command)[2:]) == 0
        assert capsys.readouterr().out.splitlines() == shown
