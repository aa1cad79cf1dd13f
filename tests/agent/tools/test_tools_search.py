"""ls, grep and find against real directory trees."""

import re
from pathlib import Path

import pytest

from ipyagent.agent.tools import ToolContext, get_tool
from ipyagent.agent.tools.builtin.search import glob_to_regex


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=str(tmp_path))


def run(name: str, ctx: ToolContext, **arguments):
    return get_tool(name).run(arguments, ctx)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "core.py").write_text("def main():\n    return 42\n")
    (tmp_path / "src" / "util.py").write_text("import os\ndef helper():\n    pass\n")
    (tmp_path / "README.md").write_text("# Title\nmain entry\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config.py").write_text("def main(): hidden\n")
    (tmp_path / "node_modules" / "lib").mkdir(parents=True)
    (tmp_path / "node_modules" / "lib" / "index.py").write_text("def main(): vendored\n")
    (tmp_path / "data.bin").write_bytes(b"def main\x00\x01\x02")
    return tmp_path


# ---- ls ------------------------------------------------------------------------------------


def test_ls_sorted_with_slash_for_dirs(tree, ctx):
    (tree / "B.txt").write_text("")
    (tree / ".hidden").write_text("")
    out = run("ls", ctx)
    assert out.text.split("\n") == [
        ".git/", ".hidden", "B.txt", "data.bin", "node_modules/", "README.md", "src/",
    ]


def test_ls_subdirectory_empty_and_errors(tree, ctx):
    assert run("ls", ctx, path="src").text == "pkg/\nutil.py"
    (tree / "empty").mkdir()
    assert run("ls", ctx, path="empty").text == "(empty directory)"
    assert run("ls", ctx, path="nope").text == "Path not found: nope"
    assert run("ls", ctx, path="README.md").is_error


def test_ls_caps_at_500_entries(tmp_path, ctx):
    for i in range(520):
        (tmp_path / f"f{i:04d}").write_text("")
    out = run("ls", ctx)
    body, notice = out.text.rsplit("\n\n", 1)
    assert len(body.split("\n")) == 500 and body.split("\n")[-1] == "f0499"
    assert notice == "[500 entries limit reached (520 entries in total)]"


# ---- grep ----------------------------------------------------------------------------------


def test_grep_finds_regex_matches_skipping_git_node_modules_and_binary(tree, ctx):
    out = run("grep", ctx, pattern=r"def \w+\(")
    # Walk order: a directory's files, then its subdirectories, each sorted.
    assert out.text.split("\n") == ["src/util.py:2: def helper():", "src/pkg/core.py:1: def main():"]


def test_grep_in_a_single_file_and_subdir(tree, ctx):
    assert run("grep", ctx, pattern="main", path="README.md").text == "README.md:2: main entry"
    assert run("grep", ctx, pattern="return", path="src").text == "pkg/core.py:2:     return 42"


def test_grep_no_match_bad_regex_missing_path(tree, ctx):
    assert run("grep", ctx, pattern="zzz_nothing").text == "No matches found"
    bad = run("grep", ctx, pattern="(unclosed")
    assert bad.is_error and bad.text.startswith("Invalid regular expression '(unclosed'")
    assert run("grep", ctx, pattern="x", path="nope").text == "Path not found: nope"


def test_grep_stops_at_100_matches(tmp_path, ctx):
    (tmp_path / "many.txt").write_text("hit\n" * 150)
    out = run("grep", ctx, pattern="hit")
    body, notice = out.text.rsplit("\n\n", 1)
    assert len(body.split("\n")) == 100 and body.split("\n")[-1] == "many.txt:100: hit"
    assert notice == "[100 matches limit reached. Refine the pattern or narrow the path]"


def test_grep_cuts_long_lines_to_500_chars(tmp_path, ctx):
    (tmp_path / "long.txt").write_text("needle" + "x" * 1000 + "\n")
    out = run("grep", ctx, pattern="needle")
    body, notice = out.text.rsplit("\n\n", 1)
    assert body == "long.txt:1: " + ("needle" + "x" * 494) + "... [truncated]"
    assert notice == "[Some lines truncated to 500 chars. Use read tool to see full lines]"


def test_grep_caps_output_at_50kb(tmp_path, ctx):
    for i in range(100):
        (tmp_path / f"f{i:03d}.txt").write_text("m" + "y" * 499 + "\n")  # ~513 bytes a match line
    out = run("grep", ctx, pattern="^m")
    body, notice = out.text.rsplit("\n\n", 1)
    assert len(body.encode()) <= 51200
    assert notice == "[50.0KB limit reached]"
    assert out.details["truncation"]["total_lines"] == 100


# ---- find ----------------------------------------------------------------------------------


def test_find_bare_pattern_matches_at_any_depth(tree, ctx):
    assert run("find", ctx, pattern="*.py").text == "src/pkg/core.py\nsrc/util.py"


def test_find_recursive_and_anchored_globs(tree, ctx):
    assert run("find", ctx, pattern="**/*.py").text == "src/pkg/core.py\nsrc/util.py"
    assert run("find", ctx, pattern="src/*.py").text == "src/util.py"
    assert run("find", ctx, pattern="src/**").text == "src/pkg/\nsrc/pkg/core.py\nsrc/util.py"
    assert run("find", ctx, pattern="*.{md,bin}").text == "README.md\ndata.bin"


def test_find_in_subdir_and_no_results(tree, ctx):
    assert run("find", ctx, pattern="*.py", path="src/pkg").text == "core.py"
    out = run("find", ctx, pattern="*.rs")
    assert not out.is_error and out.text == "No files found matching pattern '*.rs'"
    assert run("find", ctx, pattern="*", path="missing").is_error


def test_find_caps_at_1000_results(tmp_path, ctx):
    for i in range(1100):
        (tmp_path / f"n{i:04d}.txt").write_text("")
    out = run("find", ctx, pattern="*.txt")
    body, notice = out.text.rsplit("\n\n", 1)
    assert len(body.split("\n")) == 1000
    assert notice == "[1000 results limit reached. Refine the pattern or narrow the path]"


def test_glob_translation():
    def matches(glob: str, path: str) -> bool:
        return re.fullmatch(glob_to_regex(glob), path) is not None

    assert matches("**/*.py", "a.py") and matches("**/*.py", "a/b/c.py")
    assert not matches("*.py", "a/b.py")
    assert matches("test_[!x]?.py", "test_ab.py") and not matches("test_[!x]?.py", "test_xb.py")
    assert matches("a/**/z", "a/z") and matches("a/**/z", "a/b/c/z")


# ---- notebooks: the agent's own transcript -------------------------------------------------


@pytest.fixture
def notebooks(tree: Path) -> Path:
    """The open notebook (its outputs hold the agent's tool blocks), its checkpoint, a script."""
    transcript = '{"cells": [{"outputs": [{"text": "grep(pattern=\'def main\') &amp;amp; src/util.py"}]}]}'
    (tree / "analysis.ipynb").write_text(transcript)
    (tree / ".ipynb_checkpoints").mkdir()
    (tree / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb").write_text(transcript)
    (tree / ".ipynb_checkpoints" / "notes.py").write_text("def main(): checkpointed\n")
    return tree


def test_grep_of_a_folder_leaves_the_notebooks_out_and_says_so(notebooks, ctx):
    out = run("grep", ctx, pattern="def main")
    body, notice = out.text.split("\n\n")
    assert body == "src/pkg/core.py:1: def main():"
    assert notice == ("[Left out 1 notebook file (*.ipynb: they hold this session's own transcript); give one as "
                      "the path to search it]")
    assert out.details["notebooks_left_out"] == ["analysis.ipynb"]
    # named as the path, a notebook is searched
    assert run("grep", ctx, pattern="def main", path="analysis.ipynb").text.startswith("analysis.ipynb:1: ")


def test_find_leaves_the_notebooks_out_unless_the_pattern_names_them(notebooks, ctx):
    out = run("find", ctx, pattern="analysis*")
    assert out.text == ("No files found matching pattern 'analysis*'\n\n[Left out 1 notebook file (*.ipynb: they hold "
                        "this session's own transcript); a pattern that says .ipynb finds them]")
    assert run("find", ctx, pattern="*.py").text == "src/pkg/core.py\nsrc/util.py"
    assert run("find", ctx, pattern="*.ipynb").text == ".ipynb_checkpoints/analysis-checkpoint.ipynb\nanalysis.ipynb"
