"""Build the JupyterLite site of the tour: ipyagent in a Pyodide kernel in the page, nothing
installed, nothing fetched at run time from anywhere but the site itself (issue 36).

    python docs/lite/build_lite.py                 # the site, in docs/_build/lite
    python docs/lite/build_lite.py --docs          # the documentation with the site (jupyterlite-sphinx)
    python docs/lite/build_lite.py --prepare-only  # only the Lite folder (docs/_build/lite-dir)

Everything comes from the package registries, pinned together here:

* Pyodide's core: the npm package ``pyodide`` at the version the pinned
  jupyterlite-pyodide-kernel targets (its ``PYODIDE_VERSION``); it holds no package wheels.
* The wheels the kernel and ipyagent need in the browser: PyPI, one ``pip download --no-deps``
  of the pins below (pure-Python ones, and ``pyemscripten`` WebAssembly ones where PyPI has them).
* ipyagent's own wheel: built from this checkout (its bridge labextension included).
* ``pyodide-lock.json``: written here from those wheels' metadata (name, version, import names,
  the dependencies that apply in the browser, sha256); every dependency must be pinned here or be
  one of the kernel's own wheels, else the build stops and says which.
* The Lite app: ``jupyter lite build`` (jupyterlite-core) with exactly three labextensions: the
  Pyodide kernel, the widget manager (jupyterlab_widgets) and ipyagent-bridge (so the session lands
  in the notebook's metadata, as in JupyterLab); ``disablePyPIFallback``.

Downloads are kept in a cache folder (``--cache``, default ``~/.cache/ipyagent-lite``), so a second
build fetches nothing. The script prints what it pinned and where each wheel came from.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD = ROOT / "docs" / "_build"

JUPYTERLITE_CORE = "0.8.6"
JUPYTERLITE_PYODIDE_KERNEL = "0.8.6"
PYODIDE = "314.0.6"  # jupyterlite_pyodide_kernel.constants.PYODIDE_VERSION of the kernel above (checked)
PYTHON = "3.14"  # Pyodide 314's CPython
PLATFORM = "pyemscripten_2026_0_wasm32"  # its wheel platform tag (PEP 783)

# The wheels of the browser's environment, from PyPI. ipyagent's own dependencies without the ones
# its markers leave out in the browser, the kernel's (IPython, comm, jedi), micropip for %pip, and
# what those need in the browser; pydantic-core is the one WebAssembly wheel.
PINS = {
    "annotated-types": "0.8.0",
    "anyio": "4.16.0",
    "asttokens": "3.0.2",
    "certifi": "2026.10.19.post1",
    "comm": "0.2.3",
    "decorator": "5.3.1",
    "executing": "2.3.0",
    "genai-prices": "0.2.5",
    "h11": "0.16.0",
    "httpcore": "1.0.9",
    "httpx": "0.29.0",
    "httpx2": "2.17.0",
    "httpx2-jsfetch": "1.0",
    "idna": "3.20",
    "ipython": "9.12.0",
    "ipython-pygments-lexers": "1.1.1",
    "ipywidgets": "8.1.9",
    "jedi": "0.20.1",
    "jupyterlab-widgets": "3.0.17",
    "markdown-it-py": "4.3.0",
    "matplotlib-inline": "0.2.2",
    "mdurl": "0.1.2",
    "micropip": "0.11.1",
    "packaging": "26.4",
    "parso": "0.8.7",
    "pluggy": "1.7.0",
    "prompt-toolkit": "3.0.53",
    "pure-eval": "0.2.4",
    "pydantic": "2.14.4",
    "pydantic-core": "2.50.5",
    "pygments": "2.21.0",
    "stack-data": "0.6.3",
    "traitlets": "5.16.1",
    "typing-extensions": "4.16.0",
    "typing-inspection": "0.4.5",
    "wcwidth": "0.9.4",
}
# the kernel's own wheels (jupyterlite-pyodide-kernel's labextension serves them to piplite): the
# ipykernel and widgetsnbextension placeholders, piplite, pyodide_kernel
KERNEL_WHEELS_DIR = "static/pypi"
# the labextensions of the Lite app (npm names), found where pip installed them
LABEXTENSIONS = ("@jupyterlite/pyodide-kernel-extension", "@jupyter-widgets/jupyterlab-manager")
BRIDGE = "ipyagent-bridge"  # from this checkout: extension/ipyagent/labextension
TOUR = "how-compaction-works.ipynb"
BROWSER_ENVIRONMENT = {
    "implementation_name": "cpython", "implementation_version": PYTHON, "os_name": "posix",
    "platform_machine": "wasm32", "platform_python_implementation": "CPython", "platform_release": "",
    "platform_system": "Emscripten", "platform_version": "", "python_full_version": PYTHON + ".0",
    "python_version": PYTHON, "sys_platform": "emscripten", "extra": "",
}


@dataclass
class Wheel:
    """One wheel of the lock: where it is, its metadata, and where it came from."""

    path: Path
    name: str
    version: str
    requires: list[str]
    imports: list[str]
    origin: str

    @property
    def key(self) -> str:
        return canonical(self.name)


def canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def log(text: str) -> None:
    print(text, flush=True)


def run(command: list[str], **kwargs: object) -> None:
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


# ---- the pieces ----------------------------------------------------------------------------------


def check_versions() -> None:
    """The Lite tools installed are the pinned ones (pip install ".[docs-lite]")."""
    from importlib.metadata import version

    from jupyterlite_pyodide_kernel.constants import PYODIDE_VERSION

    found = {"jupyterlite-core": version("jupyterlite-core"),
             "jupyterlite-pyodide-kernel": version("jupyterlite-pyodide-kernel")}
    wanted = {"jupyterlite-core": JUPYTERLITE_CORE, "jupyterlite-pyodide-kernel": JUPYTERLITE_PYODIDE_KERNEL}
    if found != wanted or PYODIDE_VERSION != PYODIDE:
        sys.exit(f"build_lite: installed {found} (Pyodide {PYODIDE_VERSION}), pinned {wanted} (Pyodide {PYODIDE}): "
                 'pip install ".[docs-lite]"')


def pyodide_core(cache: Path) -> Path:
    """Pyodide's core files (the npm package), unpacked in the cache."""
    unpacked = cache / f"pyodide-{PYODIDE}"
    if not (unpacked / "pyodide.asm.wasm").exists():
        cache.mkdir(parents=True, exist_ok=True)
        run(["npm", "pack", f"pyodide@{PYODIDE}", "--silent", "--pack-destination", str(cache)],
            stdout=subprocess.DEVNULL)
        with tarfile.open(cache / f"pyodide-{PYODIDE}.tgz") as archive:
            staging = Path(tempfile.mkdtemp(dir=cache))
            archive.extractall(staging, filter="data")
        shutil.rmtree(unpacked, ignore_errors=True)
        (staging / "package").rename(unpacked)
        shutil.rmtree(staging)
    return unpacked


def pypi_wheels(cache: Path) -> list[Path]:
    """The pinned wheels, downloaded once into the cache (``pip download --no-deps``)."""
    folder = cache / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    have = {_pin_of(p) for p in folder.glob("*.whl")}
    missing = [f"{name}=={version}" for name, version in PINS.items() if (name, version) not in have]
    if missing:
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--python-version", PYTHON, "--implementation", "cp", "--abi", "cp" + PYTHON.replace(".", ""),
             "--abi", "abi3", "--abi", "none", "--platform", PLATFORM, "--platform", "any",
             "--dest", str(folder), *missing])
    wheels = [p for p in folder.glob("*.whl") if _pin_of(p) in set(PINS.items())]
    if len(wheels) != len(PINS):
        sys.exit(f"build_lite: {len(wheels)} wheels in {folder} for {len(PINS)} pins")
    return sorted(wheels)


def _pin_of(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return canonical(name), version


def ipyagent_wheel(out: Path) -> Path:
    """ipyagent's wheel, built from this checkout (with its prebuilt bridge)."""
    if not (ROOT / "extension" / "ipyagent" / "labextension" / "package.json").exists():
        sys.exit("build_lite: the bridge is not built (pip install -e . builds it with Node.js)")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("ipyagent-*.whl"):
        old.unlink()
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(out), str(ROOT)])
    return next(out.glob("ipyagent-*.whl"))


def read_wheel(path: Path, origin: str) -> Wheel:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(archive.read(f"{info}/METADATA").decode())
        top_level = f"{info}/top_level.txt"
        if top_level in names:
            imports = archive.read(top_level).decode().split()
        else:
            imports = sorted({n.split("/")[0].removesuffix(".py") for n in names
                              if not n.split("/")[0].endswith((".dist-info", ".data")) and
                              (n.endswith(".py") or "/" in n)})
    return Wheel(path, meta["Name"], meta["Version"], meta.get_all("Requires-Dist") or [],
                 [i for i in imports if i and not i.startswith("_")], origin)


def browser_dependencies(wheel: Wheel) -> list[str]:
    """What ``wheel`` needs in the browser (its requirements whose markers hold there, no extras)."""
    from packaging.requirements import Requirement

    needed = []
    for text in wheel.requires:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(BROWSER_ENVIRONMENT):
            needed.append(requirement)
    return [str(r) for r in needed]


def check_closure(wheels: list[Wheel], provided: dict[str, str]) -> None:
    """Every dependency that applies in the browser is in the lock (at a version it accepts) or
    is one of the kernel's own wheels; else stop and say what is missing."""
    from packaging.requirements import Requirement

    have = {w.key: w.version for w in wheels} | provided
    problems = []
    for wheel in wheels:
        for text in browser_dependencies(wheel):
            requirement = Requirement(text)
            version = have.get(canonical(requirement.name))
            if version is None:
                problems.append(f"{wheel.name} needs {text}: not pinned")
            elif not requirement.specifier.contains(version, prereleases=True):
                problems.append(f"{wheel.name} needs {text}: {version} pinned")
    if problems:
        sys.exit("build_lite: the pins do not fit together:\n  " + "\n  ".join(problems))


def write_lock(core: Path, wheels: list[Wheel], target: Path) -> None:
    """``pyodide-lock.json``: Pyodide's own ``info`` (its ABI), and one entry per wheel beside it."""
    from packaging.requirements import Requirement

    info = json.loads((core / "pyodide-lock.json").read_text())["info"]
    packages = {}
    for wheel in wheels:
        depends = sorted({canonical(Requirement(t).name) for t in browser_dependencies(wheel)}
                         & {w.key for w in wheels})
        packages[wheel.key] = {
            "name": wheel.name, "version": wheel.version, "file_name": wheel.path.name, "install_dir": "site",
            "sha256": hashlib.sha256(wheel.path.read_bytes()).hexdigest(), "package_type": "package",
            "imports": wheel.imports, "depends": depends, "unvendored_tests": False, "shared_library": False,
        }
    target.write_text(json.dumps({"info": info, "packages": dict(sorted(packages.items()))}, indent=1) + "\n")


def labextension_folders() -> dict[str, Path]:
    """The Lite app's labextensions: where pip installed the kernel's and the widget manager's, and
    the bridge built in this checkout."""
    import sysconfig

    from jupyter_core.paths import jupyter_path

    roots = [Path(p) for p in jupyter_path("labextensions")]
    roots += [Path(sysconfig.get_path("data", scheme)) / "share" / "jupyter" / "labextensions"
              for scheme in sysconfig.get_scheme_names() if scheme.startswith("posix")]
    roots += [Path(sys.base_prefix) / "share" / "jupyter" / "labextensions"]
    found = {}
    for name in LABEXTENSIONS:
        folder = next((r / name for r in roots if (r / name / "package.json").exists()), None)
        if folder is None:
            sys.exit(f"build_lite: the labextension {name} is not installed (pip install \".[docs-lite]\")")
        found[name] = folder
    found[BRIDGE] = ROOT / "extension" / "ipyagent" / "labextension"
    return found


def kernel_wheels(extensions: dict[str, Path]) -> dict[str, str]:
    """The kernel's own wheels (name -> version) that piplite serves from its labextension."""
    folder = extensions[LABEXTENSIONS[0]] / KERNEL_WHEELS_DIR
    return dict(_pin_of(p) for p in folder.glob("*.whl"))


# ---- the Lite folder and the site ----------------------------------------------------------------


def prepare(lite_dir: Path, cache: Path) -> list[Wheel]:
    """The Lite folder ``jupyter lite build`` (or jupyterlite-sphinx) builds from: Pyodide with the
    wheels and the lock in ``static/pyodide``, the labextensions, the settings and the tour."""
    check_versions()
    core = pyodide_core(cache)
    extensions = labextension_folders()
    shutil.rmtree(lite_dir, ignore_errors=True)
    pyodide_dir = lite_dir / "static" / "pyodide"
    shutil.copytree(core, pyodide_dir, ignore=shutil.ignore_patterns("*.map", "*.d.ts", "*.html", "README.md",
                                                                     "package.json", "pyodide.js"))
    wheels = [read_wheel(p, "PyPI") for p in pypi_wheels(cache)]
    wheels.append(read_wheel(ipyagent_wheel(cache / "ipyagent"), "this checkout"))
    check_closure(wheels, kernel_wheels(extensions))
    for wheel in wheels:
        shutil.copy2(wheel.path, pyodide_dir / wheel.path.name)
    write_lock(core, wheels, pyodide_dir / "pyodide-lock.json")
    staged = lite_dir.parent / (lite_dir.name + "-labextensions")
    shutil.rmtree(staged, ignore_errors=True)
    for name, folder in extensions.items():
        shutil.copytree(folder, staged / name, ignore=shutil.ignore_patterns("*.map"))
    settings = json.loads((HERE / "jupyter-lite.json").read_text())
    (lite_dir / "jupyter-lite.json").write_text(json.dumps(settings, indent=2) + "\n")
    config = json.loads((HERE / "jupyter_lite_config.json").read_text())
    config["FederatedExtensionAddon"] = {"extra_labextensions_path": [str(staged)]}
    (lite_dir / "jupyter_lite_config.json").write_text(json.dumps(config, indent=2) + "\n")
    report(core, wheels, extensions)
    return wheels


def report(core: Path, wheels: list[Wheel], extensions: dict[str, Path]) -> None:
    log(f"build_lite: jupyterlite-core {JUPYTERLITE_CORE}, jupyterlite-pyodide-kernel {JUPYTERLITE_PYODIDE_KERNEL}, "
        f"Pyodide {PYODIDE} (npm: pyodide@{PYODIDE}, {core})")
    log(f"build_lite: {len(wheels)} wheels in the lock:")
    for wheel in sorted(wheels, key=lambda w: w.key):
        log(f"  {wheel.name} {wheel.version}  {wheel.path.name}  from {wheel.origin}")
    for name, folder in extensions.items():
        version = json.loads((folder / "package.json").read_text())["version"]
        log(f"build_lite: labextension {name} {version} from {folder}")


def build_site(lite_dir: Path, output: Path) -> None:
    """``jupyter lite build`` of the Lite folder, with the tour as its contents."""
    contents = lite_dir.parent / (lite_dir.name + "-contents")
    shutil.rmtree(contents, ignore_errors=True)
    contents.mkdir(parents=True)
    shutil.copy2(ROOT / "notebooks" / TOUR, contents / TOUR)
    shutil.rmtree(output, ignore_errors=True)
    run([sys.executable, "-m", "jupyter", "lite", "build", "--lite-dir", str(lite_dir), "--output-dir", str(output),
         "--contents", str(contents)], cwd=lite_dir,
        stdout=subprocess.DEVNULL)
    (output / "pyodide-pins.txt").write_text("\n".join(f"{n}=={v}" for n, v in PINS.items()) + "\n")


def build_docs(lite_dir: Path) -> None:
    """The documentation with the site (docs/conf.py turns jupyterlite-sphinx on for this)."""
    env = dict(os.environ, IPYAGENT_DOCS_LITE=str(lite_dir))
    run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"),
         str(BUILD / "html")], env=env)


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=BUILD / "lite", help="where the site goes")
    parser.add_argument("--lite-dir", type=Path, default=BUILD / "lite-dir", help="the Lite folder it is built from")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "IPYAGENT_LITE_CACHE", Path.home() / ".cache" / "ipyagent-lite")), help="downloads kept between builds")
    parser.add_argument("--docs", action="store_true", help="build the documentation with the site")
    parser.add_argument("--prepare-only", action="store_true", help="only the Lite folder")
    args = parser.parse_args(argv)
    started = time.monotonic()
    prepare(args.lite_dir.resolve(), args.cache.resolve())
    if args.docs:
        build_docs(args.lite_dir.resolve())
        where = BUILD / "html" / "lite"
    elif not args.prepare_only:
        build_site(args.lite_dir.resolve(), args.output.resolve())
        where = args.output
    else:
        where = args.lite_dir
    log(f"build_lite: {where} ({size_of(where) / 1e6:.1f} MB) built in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
