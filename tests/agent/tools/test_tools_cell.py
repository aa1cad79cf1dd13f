"""The python tool "like a cell": what a cell run becomes for the model (text, capped and checked
images, HTML for the tool block only), and IPython's machinery driving it in an in-process shell
(matplotlib on Agg), leaving the shell as it found it."""

from __future__ import annotations

import base64
import io
import sys

import pytest
from IPython.testing import globalipapp

from ipyagent.agent.tools import ToolContext, get_tool
from ipyagent.agent.tools.cell import CellOutput, CellRun, cell_tool_output
from ipyagent.agent.tools.images import ImageCollector, decode_image, valid_image_block
from ipyagent.kernel.ports.cell_runner import TOOL_CELL_ID, IPythonCellRunner


def picture(fmt: str, size: tuple[int, int] = (4, 3), **options) -> bytes:
    """A real image file made by Pillow."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB" if fmt == "JPEG" else "P", size).save(out, fmt, **options)
    return out.getvalue()


PNG = picture("PNG")


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


# ---- images ------------------------------------------------------------------------------------


def test_only_allowed_types_with_matching_bytes_decode():
    assert decode_image("image/png", b64(PNG)) == PNG
    assert decode_image("image/png", PNG) == PNG  # raw bytes, as some formatters return
    assert decode_image("image/png", b64(PNG).encode()) == PNG  # base64 as bytes
    assert decode_image("image/png", b64(PNG)[:20] + "\n" + b64(PNG)[20:]) == PNG  # wrapped lines
    assert decode_image("image/jpeg", b64(PNG)) is None  # the bytes are not a JPEG
    assert decode_image("image/svg+xml", b64(b"<svg/>")) is None  # not an allowed type
    assert decode_image("image/png", 'AAAA"><script>') is None
    assert decode_image("image/webp", b64(picture("WEBP"))) is not None
    assert decode_image("image/webp", b64(b"RIFF\x00\x00\x00\x00WAVEfmt ")) is None
    assert valid_image_block({"type": "image", "mimeType": "image/png", "data": b64(PNG)})
    assert not valid_image_block({"type": "image", "mimeType": "text/html", "data": b64(PNG)})


def test_caps_per_image_and_per_result_drop_with_a_notice():
    n = len(PNG)
    images = ImageCollector(max_image=n + 50, max_total=2 * n + 30)
    assert images.add("image/png", b64(PNG), "output 1")
    assert not images.add("image/png", b64(PNG + b"\x00" * 100), "output 2")  # n + 100 > n + 50
    assert images.add("image/png", b64(PNG + b"\x00" * 20), "output 3")  # total 2n + 20
    assert not images.add("image/png", b64(PNG), "output 4")  # 3n + 20 > 2n + 30
    assert not images.add("image/gif", "not base64!", "output 5")
    assert len(images.blocks) == 2 and images.total == 2 * n + 20
    assert images.blocks[0] == {"type": "image", "data": b64(PNG), "mimeType": "image/png"}
    assert images.notices == [
        "[output 2 (image/png) dropped: 0 KB is over the 0 KB limit per image]",
        "[output 4 (image/png) dropped: the images of this result would exceed 0 KB]",
        "[output 5 (image/gif) dropped: not a valid image/gif image]",
    ]
    big = ImageCollector()
    assert not big.add("image/png", b64(PNG + b"\x00" * 1_200_000))
    assert big.notices == ["[image/png dropped: 1.2 MB is over the 1.0 MB limit per image]"]


# ---- a cell run for the model ------------------------------------------------------------------


def test_cell_run_to_tool_output():
    run = CellRun(
        stdout="printed\r\n", stderr="a warning\n",
        outputs=[CellOutput({"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": b64(PNG)}),
                 CellOutput({"text/plain": "   a\n0  1", "text/html": "<table><tr><td>1</td></tr></table>"}),
                 CellOutput({"application/vnd.custom+json": {}}),
                 CellOutput({"text/plain": "42"}, is_result=True)])
    text, is_error, details, images = cell_tool_output(run)
    assert text == ("printed\n[stderr]\na warning\n<Figure size 640x480 with 1 Axes>\n   a\n0  1\n"
                    "[application/vnd.custom+json output]\n42")
    assert not is_error
    assert details == {"has_value": True, "html": ["<table><tr><td>1</td></tr></table>"]}
    assert images == [{"type": "image", "data": b64(PNG), "mimeType": "image/png"}]


def test_an_error_run_and_a_dropped_image():
    run = CellRun(outputs=[CellOutput({"image/png": "!!"})], error="\x1b[31mNameError\x1b[0m: name 'x' is not defined")
    text, is_error, details, images = cell_tool_output(run)
    assert is_error and images == []
    assert text == "NameError: name 'x' is not defined\n[output 1 (image/png) dropped: not a valid image/png image]"


def _png_header(width: int, height: int) -> bytes:
    """A PNG's signature, IHDR (1-bit grey, checksum right) and IEND: how big it says it is."""
    import struct
    import zlib

    body = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    ihdr = struct.pack(">I", 13) + b"IHDR" + body + struct.pack(">I", zlib.crc32(b"IHDR" + body))
    return b"\x89PNG\r\n\x1a\n" + ihdr + b"\x00\x00\x00\x00IEND\xaeB`\x82"


def _huge_png(side: int) -> bytes:
    """A complete, decodable 1-bit PNG of side × side pixels: all black, so it compresses to little."""
    import struct
    import zlib

    row = b"\x00" * (1 + (side + 7) // 8)
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row * 1000) for _ in range(side // 1000)) + packer.flush()
    idat = struct.pack(">I", len(data)) + b"IDAT" + data + struct.pack(">I", zlib.crc32(b"IDAT" + data))
    head = _png_header(side, side)
    return head[:33] + idat + head[33:]


@pytest.mark.parametrize("fmt, mime, options", [
    ("PNG", "image/png", {}), ("JPEG", "image/jpeg", {}), ("JPEG", "image/jpeg", {"progressive": True}),
    ("GIF", "image/gif", {}), ("WEBP", "image/webp", {}), ("WEBP", "image/webp", {"lossless": True}),
])
def test_real_images_of_each_format_pass_their_header_check(fmt, mime, options):
    from ipyagent.agent.tools.images import image_problem

    raw = picture(fmt, (640, 480), **options)
    assert image_problem(mime, raw) is None and decode_image(mime, b64(raw)) == raw


@pytest.mark.parametrize("mime, magic", [
    ("image/png", b"\x89PNG\r\n\x1a\n"), ("image/jpeg", b"\xff\xd8\xff"), ("image/gif", b"GIF89a"),
    ("image/webp", b"RIFF\x10\x00\x00\x00WEBP"),
])
def test_the_magic_bytes_followed_by_garbage_are_no_image(mime, magic):
    import random

    garbage = magic + random.Random(19).randbytes(4000)
    images = ImageCollector()
    assert decode_image(mime, b64(garbage)) is None and not images.add(mime, b64(garbage), "output 1")
    assert images.notices == [f"[output 1 ({mime}) dropped: not a valid {mime} image]"]


def test_an_image_of_too_many_pixels_is_dropped_whatever_its_file_size():
    from PIL import Image

    bomb = _huge_png(10_000)  # 100 megapixels in a file of a few kilobytes
    assert len(bomb) < 100_000
    Image.MAX_IMAGE_PIXELS = None
    try:
        assert Image.open(io.BytesIO(bomb)).size == (10_000, 10_000)  # a real PNG, not a fake header
    finally:
        Image.MAX_IMAGE_PIXELS = 89_478_485
    images = ImageCollector()
    assert not images.add("image/png", b64(bomb), "output 1")
    assert not images.add("image/png", b64(_png_header(80_000, 80_000)), "output 2")  # the 6.4 gigapixels
    assert images.notices == [
        "[output 1 (image/png) dropped: 10,000 × 10,000 pixels is over the 50 megapixel limit]",
        "[output 2 (image/png) dropped: 80,000 × 80,000 pixels is over the 50 megapixel limit]",
    ]
    assert decode_image("image/png", b64(bomb)) is None  # the renderer draws nothing of it either
    assert valid_image_block({"type": "image", "mimeType": "image/png", "data": b64(_png_header(7_000, 7_000))})


# ---- IPython's machinery, in-process -------------------------------------------------------------


@pytest.fixture(scope="module")
def shell():
    import matplotlib

    matplotlib.use("Agg", force=True)
    globalipapp.start_ipython()
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


@pytest.fixture
def py(shell):
    ctx = ToolContext(namespace=shell.user_ns, cell_runner=IPythonCellRunner(shell))
    return lambda code: get_tool("python").run({"code": code}, ctx)


def test_values_semicolons_and_magics(shell, py):
    out = py("x_cell = 20\nx_cell * 2 + 2")
    assert (out.text, out.is_error, out.details["has_value"]) == ("42", False, True)
    assert py("x_cell;").text == "(no output)"
    assert "per loop (mean" in py("%timeit -n1 -r1 sum(range(10))").text
    assert py("!echo from-the-shell").text == "from-the-shell"
    assert py("%%bash\necho from bash").text == "from bash"
    assert shell.user_ns["x_cell"] == 20


def test_displays_html_and_updates(py):
    # (a terminal shell formats only text/plain: the bundles are given raw, as a kernel would make them)
    out = py("from IPython.display import display, update_display\n"
             "display({'text/plain': 'old', 'text/html': '<table><tr><td>old</td></tr></table>'}, raw=True, "
             "display_id='t')\n"
             "update_display({'text/plain': 'new', 'text/html': '<table><tr><td>new</td></tr></table>'}, raw=True, "
             "display_id='t')\n"
             "display('shown')")
    assert out.text == "new\n'shown'"
    assert out.details["html"] == ["<table><tr><td>new</td></tr></table>"]
    cleared = py("from IPython.display import clear_output, display\ndisplay('gone')\nclear_output()\ndisplay('kept')")
    assert cleared.text == "'kept'"


def test_a_figure_left_open_on_agg_becomes_an_image(py):
    out = py("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2, 3]);")
    assert len(out.images) == 1 and out.images[0]["mimeType"] == "image/png"
    assert decode_image("image/png", out.images[0]["data"]) is not None
    assert out.text == "<Figure size 640x480 with 1 Axes>"
    assert py("fig.axes[0].get_lines()[0].get_ydata().tolist()").images == []  # shown once, when new
    py("plt.close('all')")


def test_the_python_tool_drops_an_image_of_billions_of_pixels(py):
    code = ("from IPython.display import Image, display\n"
            f"display(Image(data={_png_header(80_000, 80_000)!r}))\n"
            f"display(Image(data={PNG!r}))")
    out = py(code)
    assert [i["mimeType"] for i in out.images] == ["image/png"] and decode_image("image/png", out.images[0]["data"])
    assert "dropped: 80,000 × 80,000 pixels is over the 50 megapixel limit" in out.text


def test_errors_are_text_and_the_shell_is_restored(shell, py):
    before = (sys.stdout, sys.stderr, sys.displayhook, shell.display_pub, shell.display_trap.hook,
              shell.execution_count, len(shell.history_manager.input_hist_raw), vars(shell).get("_showtraceback"))
    seen = []
    shell.events.register("post_run_cell", seen.append)
    try:
        out = py("print('first')\nundefined_name")
    finally:
        shell.events.unregister("post_run_cell", seen.append)
    assert out.is_error
    assert out.text.startswith("first\n") and out.text.endswith("NameError: name 'undefined_name' is not defined")
    assert "\x1b[" not in out.text
    syntax = py("def broken(:")
    assert syntax.is_error and "SyntaxError" in syntax.text
    assert (sys.stdout, sys.stderr, sys.displayhook, shell.display_pub, shell.display_trap.hook,
            shell.execution_count, len(shell.history_manager.input_hist_raw), vars(shell).get("_showtraceback")) == before
    # listeners of the cell events can tell the agent's runs from the user's cells
    assert [r.info.cell_id for r in seen] == [TOOL_CELL_ID]


def test_keyboard_interrupt_propagates_after_restoring(shell, py):
    before = (sys.stdout, sys.stderr, shell.display_pub)
    with pytest.raises(KeyboardInterrupt):
        py("print('partial')\nraise KeyboardInterrupt")
    assert (sys.stdout, sys.stderr, shell.display_pub) == before
    assert py("1 + 1").text == "2"


def test_output_written_to_file_descriptors_is_captured(py):
    out = py("import os, subprocess\nos.write(1, b'fd one\\n')\nsubprocess.run(['sh', '-c', 'echo sub >&2'])\nNone")
    assert "fd one" in out.text and "[stderr]\nsub" in out.text


def test_huge_output_keeps_the_tail_and_the_images(py):
    out = py("import matplotlib.pyplot as plt\nfor i in range(5000): print(i)\nplt.figure(); plt.plot([1]);")
    body, notice = out.text.rsplit("\n\n", 1)
    lines = body.splitlines()
    assert (lines[0], lines[-2], lines[-1], len(lines)) == ("3001", "4999", "<Figure size 640x480 with 1 Axes>", 2000)
    assert notice.startswith("[Showing lines 3002-5001 of 5001. Full output:") and len(out.images) == 1
    py("plt.close('all')")


def test_without_a_runner_the_plain_exec_path_remains():
    ctx = ToolContext(namespace={})
    out = get_tool("python").run({"code": "import io\n6 * 7"}, ctx)
    assert out.text == "42" and out.images == []
    assert io is not None
