"""The longest functions and the largest classes of the package (no thresholds: figures only).

    python tests/benchmarks/code_sizes.py [--top 10] [--package extension/ipyagent]

A function's length counts the lines from its ``def`` to its last line (nested functions
included); a class's size, the methods defined in its body (tests/support/code_sizes.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for support.code_sizes

from support.code_sizes import package_modules, sizes

PACKAGE = Path(__file__).resolve().parents[2] / "extension" / "ipyagent"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--package", type=Path, default=PACKAGE)
    args = parser.parse_args()
    found = list(sizes(package_modules(args.package.resolve())))
    for kind, title in (("function", "longest functions (lines)"), ("class", "largest classes (methods)")):
        print(title)
        for size in sorted((s for s in found if s.kind == kind), key=lambda s: (-s.size, s.name))[:args.top]:
            print(f"  {size.size:4d}  {size.name}")


if __name__ == "__main__":
    main()
