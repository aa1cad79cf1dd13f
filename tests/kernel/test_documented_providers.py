"""What a newcomer reads matches what a kernel offers (issue 37, item 12): every provider that
``%agent plugins`` lists in a REAL kernel is in docs/models.md's table of provider names, with the
endpoint, key and endpoint variable the kernel's provider uses (``ollama`` and ``llamacpp`` were
listed and in no doc)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernel_support import LiveKernel
from support.outputs import output_line, outputs_text

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]

PROVIDERS = """\
from ipyagent.kernel.extension import get_runtime
rt = get_runtime(get_ipython())
names = '''NAMES'''.split(', ')
print('PROVIDERS', json.dumps({n: [getattr(p, 'default_base_url', None) or '', getattr(p, 'key_env', None) or '',
                                   getattr(p, 'base_url_env', None) or '']
                               for n in names for p in [rt.providers.resolve(n + ':m', {})[0]]}))
"""


def _table_rows() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Provider names", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"[a-z][a-z0-9-]*", cells[0]):
            rows[cells[0]] = [cells[2], "" if cells[3] == "none" else cells[3], cells[4]]
    return rows


def test_every_provider_the_kernel_lists_is_documented(tmp_path):
    with LiveKernel(cwd=str(tmp_path)) as k:
        listed = outputs_text(k.run("%load_ext ipyagent\n%agent plugins", "plugins").outputs)
        [names] = re.findall(r"built in: providers (.+)", listed)
        code = "import json\n" + PROVIDERS.replace("NAMES", names.strip())
        kernel = json.loads(output_line(k.run(code, "providers").outputs, "PROVIDERS"))
    assert {"ollama", "llamacpp"} <= set(kernel)
    assert _table_rows() == kernel

