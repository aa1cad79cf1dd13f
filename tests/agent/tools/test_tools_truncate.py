"""Pi's output limits: 2000 lines or 50 KB, a notice saying what was cut, never half a line."""

from ipyagent.agent.tools.truncate import (
    DEFAULT_MAX_BYTES,
    Truncation,
    clean_output,
    format_size,
    tail_notice,
    truncate_head,
    truncate_line,
    truncate_tail,
)


def test_head_under_limits_is_untouched():
    t = truncate_head("a\nb\nc")
    assert (t.content, t.truncated, t.truncated_by, t.total_lines) == ("a\nb\nc", False, None, 3)


def test_head_cuts_by_lines():
    text = "\n".join(str(i) for i in range(1, 2501))
    t = truncate_head(text)
    assert t.truncated_by == "lines"
    assert t.output_lines == 2000 and t.total_lines == 2500
    assert t.content.split("\n")[-1] == "2000"


def test_head_cuts_by_bytes_on_a_line_boundary():
    line = "x" * 99
    t = truncate_head("\n".join([line] * 1000))  # 100 KB, 1000 lines
    assert t.truncated_by == "bytes"
    assert t.output_bytes <= DEFAULT_MAX_BYTES
    assert all(part == line for part in t.content.split("\n"))
    assert t.output_lines == DEFAULT_MAX_BYTES // 100


def test_head_first_line_over_limit_keeps_nothing():
    t = truncate_head("y" * (DEFAULT_MAX_BYTES + 1) + "\nshort")
    assert t.first_line_exceeds_limit and t.content == "" and t.output_lines == 0


def test_head_counts_utf8_bytes_not_characters():
    t = truncate_head("\n".join(["é" * 100] * 400))  # 200 bytes a line
    assert t.truncated_by == "bytes"
    assert len(t.content.encode()) <= DEFAULT_MAX_BYTES
    # n lines take n * 201 - 1 bytes: 254 fit, where counting characters would keep 506.
    assert t.output_lines == 254


def test_tail_keeps_the_end():
    text = "\n".join(str(i) for i in range(1, 3001))
    t = truncate_tail(text)
    lines = t.content.split("\n")
    assert (lines[0], lines[-1], t.output_lines, t.truncated_by) == ("1001", "3000", 2000, "lines")


def test_tail_partial_last_line_when_it_alone_is_too_long():
    t = truncate_tail("start\n" + "ab" * DEFAULT_MAX_BYTES + "END")
    assert t.last_line_partial and t.truncated_by == "bytes"
    assert t.content.endswith("END") and len(t.content.encode()) <= DEFAULT_MAX_BYTES


def test_tail_partial_line_never_splits_a_character():
    t = truncate_tail("€" * DEFAULT_MAX_BYTES)  # 3 bytes each
    assert set(t.content) == {"€"}
    assert len(t.content.encode()) <= DEFAULT_MAX_BYTES


def test_truncate_line_marks_the_cut():
    assert truncate_line("a" * 600) == ("a" * 500 + "... [truncated]", True)
    assert truncate_line("short") == ("short", False)


def test_format_size():
    assert [format_size(n) for n in (512, 51200, 3 * 1024 * 1024)] == ["512B", "50.0KB", "3.0MB"]


def test_tail_notice_variants():
    by_lines = Truncation("", True, "lines", 3000, 9000, 2000, 6000)
    by_bytes = Truncation("", True, "bytes", 10, 90000, 4, 50000)
    assert tail_notice(by_lines, "/tmp/f") == "[Showing lines 1001-3000 of 3000. Full output: /tmp/f]"
    assert tail_notice(by_bytes, "/tmp/f") == "[Showing lines 7-10 of 10 (50.0KB limit). Full output: /tmp/f]"


def test_clean_output_strips_colours_and_control_bytes():
    assert clean_output("\x1b[1;31mred\x1b[0m\r\n\x00a\tb\x07") == "red\na\tb"
