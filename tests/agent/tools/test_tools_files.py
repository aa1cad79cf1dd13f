"""read, write and edit against real files."""

from pathlib import Path

import pytest

from ipyagent.agent.tools import ToolContext, get_tool


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=str(tmp_path))


def read(ctx: ToolContext, **arguments):
    return get_tool("read").run(arguments, ctx)


def numbered(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# ---- read ----------------------------------------------------------------------------------


def test_read_small_file_whole(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    out = read(ctx, path="a.txt")
    assert (out.text, out.is_error) == ("one\ntwo", False)


def test_read_resolves_against_context_cwd_and_absolute_paths(tmp_path, ctx):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.py").write_text("x = 1\n")
    assert read(ctx, path="sub/f.py").text == "x = 1"
    assert read(ToolContext(cwd="/"), path=str(tmp_path / "sub" / "f.py")).text == "x = 1"


def test_read_head_truncates_at_2000_lines_with_notice(tmp_path, ctx):
    (tmp_path / "big.txt").write_text(numbered(2500))
    out = read(ctx, path="big.txt")
    body, notice = out.text.rsplit("\n\n", 1)
    assert body.split("\n")[-1] == "line 2000"
    assert notice == "[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
    assert out.details["truncation"]["truncated_by"] == "lines"


def test_read_continues_from_offset(tmp_path, ctx):
    (tmp_path / "big.txt").write_text(numbered(2500))
    out = read(ctx, path="big.txt", offset=2001)
    lines = out.text.split("\n")
    assert (lines[0], lines[-1], len(lines)) == ("line 2001", "line 2500", 500)


def test_read_byte_limit_notice(tmp_path, ctx):
    (tmp_path / "wide.txt").write_text(("w" * 199 + "\n") * 1000)  # 200 KB in 1000 lines
    out = read(ctx, path="wide.txt")
    body, notice = out.text.rsplit("\n\n", 1)
    kept = body.split("\n")
    assert len(body.encode()) <= 51200 and all(len(line) == 199 for line in kept)
    assert len(kept) == 256
    assert notice == "[Showing lines 1-256 of 1000 (50.0KB limit). Use offset=257 to continue.]"


def test_read_offset_and_limit(tmp_path, ctx):
    (tmp_path / "f.txt").write_text(numbered(10))
    out = read(ctx, path="f.txt", offset=3, limit=2)
    assert out.text == "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"
    assert read(ctx, path="f.txt", offset=9, limit=5).text == "line 9\nline 10"


def test_read_offset_past_end_is_an_error(tmp_path, ctx):
    (tmp_path / "f.txt").write_text(numbered(3))
    out = read(ctx, path="f.txt", offset=4)
    assert out.is_error and out.text == "Offset 4 is beyond end of file (3 lines total)"
    assert read(ctx, path="f.txt", offset=0).is_error


def test_read_single_huge_line_points_to_sed(tmp_path, ctx):
    (tmp_path / "min.js").write_text("short\n" + "z" * 60000 + "\n")
    out = read(ctx, path="min.js", offset=2)
    assert out.text == (
        "[Line 2 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '2p' min.js | head -c 51200]"
    )


def test_read_binary_file_gives_a_message_not_bytes(tmp_path, ctx):
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    out = read(ctx, path="img.png")
    assert out.is_error
    assert out.text.startswith("img.png is a binary file (image/png")
    assert "IHDR" not in out.text


def test_read_missing_file_and_directory(tmp_path, ctx):
    missing = read(ctx, path="nope.txt")
    assert missing.is_error and missing.text == "File not found: nope.txt"
    (tmp_path / "d").mkdir()
    assert read(ctx, path="d").is_error


def test_read_invalid_utf8_is_replaced(tmp_path, ctx):
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    assert read(ctx, path="latin1.txt").text == "caf\ufffd"


def test_read_empty_file(tmp_path, ctx):
    (tmp_path / "empty").write_text("")
    assert read(ctx, path="empty").text == "(empty file)"


# ---- write ---------------------------------------------------------------------------------


def test_write_creates_parent_dirs_and_reports_bytes(tmp_path, ctx):
    out = get_tool("write").run({"path": "new/deep/f.txt", "content": "héllo\n"}, ctx)
    assert out.text == "Successfully wrote 7 bytes to new/deep/f.txt"
    assert (tmp_path / "new" / "deep" / "f.txt").read_text() == "héllo\n"


def test_write_overwrites(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("old content")
    get_tool("write").run({"path": "f.txt", "content": "new"}, ctx)
    assert (tmp_path / "f.txt").read_text() == "new"


# ---- edit ----------------------------------------------------------------------------------


def edit(ctx: ToolContext, path: str, old: str, new: str):
    return get_tool("edit").run({"path": path, "oldText": old, "newText": new}, ctx)


def test_edit_replaces_the_unique_match_and_puts_diff_in_details(tmp_path, ctx):
    (tmp_path / "f.py").write_text("a = 1\nb = 2\nc = 3\n")
    out = edit(ctx, "f.py", "b = 2", "b = 20")
    assert (out.text, out.is_error) == ("Successfully replaced text in f.py.", False)
    assert (tmp_path / "f.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert "-b = 2\n+b = 20\n" in out.details["diff"]
    assert out.details["first_changed_line"] == 2
    assert "b = 20" not in out.text  # the diff is for the UI, not the model


def test_edit_not_found(tmp_path, ctx):
    (tmp_path / "f.py").write_text("a = 1\n")
    out = edit(ctx, "f.py", "a  = 1", "a = 2")
    assert out.is_error and out.text.startswith("Could not find the exact text in f.py.")
    assert (tmp_path / "f.py").read_text() == "a = 1\n"


def test_edit_multiple_matches_asks_for_context(tmp_path, ctx):
    (tmp_path / "f.py").write_text("x = 0\nx = 0\nx = 0\n")
    out = edit(ctx, "f.py", "x = 0", "x = 1")
    assert out.is_error
    assert out.text == (
        "Found 3 occurrences of the text in f.py. The text must be unique. "
        "Please provide more context to make it unique."
    )
    assert (tmp_path / "f.py").read_text() == "x = 0\nx = 0\nx = 0\n"


def test_edit_missing_file_and_noop(tmp_path, ctx):
    assert edit(ctx, "ghost.py", "a", "b").text == "File not found: ghost.py"
    (tmp_path / "f.py").write_text("a\n")
    assert edit(ctx, "f.py", "a", "a").is_error
    assert edit(ctx, "f.py", "", "b").is_error


def test_edit_keeps_crlf_line_endings(tmp_path, ctx):
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    out = edit(ctx, "win.txt", "one\ntwo", "uno\ndos")
    assert not out.is_error
    assert (tmp_path / "win.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_edit_refuses_binary_files(tmp_path, ctx):
    (tmp_path / "blob").write_bytes(b"abc\x00def")
    out = edit(ctx, "blob", "abc", "xyz")
    assert out.is_error and (tmp_path / "blob").read_bytes() == b"abc\x00def"
