"""The progress line of a long wait (``display/progress.py``): live while it lasts (an ipywidgets
bar and label, updated in place), one static line once it ends, its text never raw HTML; and the
line per cell ``ipyagent run`` prints, without escape codes when its stream is no terminal."""

from __future__ import annotations

import io

import pytest

from ipyagent.cli.run_command import cell_lines
from ipyagent.display.progress import ProgressLine
from ipyagent.kernel.configurable import AgentSettings


class _Shown:
    """What ``display(..., display_id=True)`` returns: a handle whose updates are recorded."""

    def __init__(self, data: dict):
        self.data = data
        self.updates: list[dict] = []

    def update(self, data: dict, raw: bool = True) -> None:
        self.updates.append(data)
        self.data = data


def _display(log: list):
    def show(data: dict, raw: bool = True, display_id: bool = False) -> _Shown:
        handle = _Shown(data)
        log.append(handle)
        return handle

    return show


def test_the_line_is_a_live_bar_then_one_static_line():
    shown: list[_Shown] = []
    line = ProgressLine("Summarising 4,000 tokens", display_func=_display(shown))
    assert len(shown) == 1 and "application/vnd.jupyter.widget-view+json" in shown[0].data
    line.update("812 / 4,096 tokens of summary, 3.2 s", 812, 4096)
    assert line._bar.value == pytest.approx(812 / 4096) and "812 / 4,096" in line._text.value
    line.close("Summarised: 1,020 tokens of summary in 9.8 s.")
    final = shown[0].data
    assert "application/vnd.jupyter.widget-view+json" not in final
    assert final["text/plain"] == "Summarised: 1,020 tokens of summary in 9.8 s."
    assert line._box.comm is None  # the widget's models are closed: a reopened notebook shows no dead widget
    line.update("after the end", 1, 1)  # ignored
    assert shown[0].data is final


def test_the_text_is_escaped_in_the_html_view():
    shown: list[_Shown] = []
    line = ProgressLine("Starting MCP servers", display_func=_display(shown), live=False)
    line.close("<img src=x onerror=alert(1)> ready")
    assert "<img" not in shown[0].data["text/html"] and "&lt;img" in shown[0].data["text/html"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_ipyagent_run_prints_one_line_per_cell_without_escape_codes_off_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    log = io.StringIO()
    line = cell_lines(log)
    line(1, 3, 0.42, "%load_ext ipyagent\n")
    line(2, 3, 12.0, "\n%%agent\nSummarise \x1b[31mthe\x1b[0m data")
    assert log.getvalue().splitlines() == ["ipyagent run: cell 1/3     0.4 s  %load_ext ipyagent",
                                           "ipyagent run: cell 2/3    12.0 s  %%agent"]
    assert "\x1b" not in log.getvalue()
    terminal = _Terminal()
    cell_lines(terminal)(3, 3, 1.0, "print('x\\x1b[2J')")
    assert terminal.getvalue().startswith("\x1b[2m") and terminal.getvalue().count("\x1b") == 2


def test_idle_compaction_is_a_share_of_the_threshold():
    settings = AgentSettings()
    assert settings.idle_compaction == 0.85 and settings.idle_compaction_delay == 2.0
    settings.idle_compaction = False
    assert settings.idle_compaction == 0.0
    settings.idle_compaction = True
    assert settings.idle_compaction == 0.85
    with pytest.raises(Exception, match="share of the compaction threshold"):
        settings.idle_compaction = 1.5
