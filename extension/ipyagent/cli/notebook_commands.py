"""``ipyagent lift | export | import``: move sessions between notebooks, journals and Pi files.

These commands write notebook files. Run them on notebooks no frontend holds open (a JupyterLab
tab with the notebook would see a "file changed" conflict on its next save).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ipyagent.agent.run_config import SavedSettings
from ipyagent.cli.common import CliError, command
from ipyagent.session.entries import Entry
from ipyagent.session.intake import LoadReport
from ipyagent.shapes import Ipynb, SessionHeader

if TYPE_CHECKING:
    from ipyagent.agent.redaction import Replacements
    from ipyagent.store.schema import NotebookSessions


def _warn_report(report: LoadReport | None) -> None:
    if report is not None and not report.ok:
        print(report.summary(), file=sys.stderr)


def _read_sessions(path: Path) -> tuple[Ipynb, NotebookSessions, LoadReport]:
    from ipyagent.store.ipynb import NotebookError, read_notebook, sessions_from_notebook

    try:
        nb = read_notebook(path)
    except FileNotFoundError:
        raise CliError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    except NotebookError as exc:
        raise CliError(str(exc)) from None
    sessions, report = sessions_from_notebook(nb, source=str(path))
    return nb, sessions, report


def _write(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc}") from None


_LOOKS = "value(s) that look like credentials (a URL's user:password@, a key configured here)"


# ---- lift ---------------------------------------------------------------------------------------


def _configure_lift(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the notebook whose journal outputs to lift")
    parser.add_argument("-o", "--output", help="write the result here (default: the notebook, in place)")
    parser.add_argument("--keep-secrets", action="store_true",
                        help="write the entries as they are: no URL credential or key configured here is "
                             "replaced with ***")


def _scrub_sessions(sessions: NotebookSessions, found: Replacements) -> None:
    """Every session's header, settings and entries, and the set-aside items, scrubbed in place
    (a journal output may hold a key that a cleared output would have taken with it; in the
    metadata it would stay)."""
    from ipyagent.agent.redaction import Redactor

    redactor = Redactor.configured()
    for name, stored in sessions.sessions.items():
        stored.header, count = redactor.data_counted(stored.header)
        found.add(count, f"session {name!r}'s header")
        stored.settings, count = redactor.data_counted(stored.settings)
        found.add(count, f"session {name!r}'s settings")
        for index, entry in enumerate(stored.entries):
            stored.entries[index], count = redactor.data_counted(entry)
            found.add(count, f"entry {entry.get('id')}")
    for index, item in enumerate(sessions.set_aside):
        sessions.set_aside[index], count = redactor.data_counted(item)
        found.add(count, f"set-aside item {index}")


@command("lift", _configure_lift)
def run_lift(args: argparse.Namespace) -> int:
    """Move journal outputs' entries into the notebook's metadata."""
    from ipyagent.agent.redaction import Replacements
    from ipyagent.store.ipynb import NotebookError, lift_notebook_report

    src = Path(args.notebook)
    found = Replacements()
    try:
        added, report, written, journals = lift_notebook_report(
            src, args.output, scrub=None if args.keep_secrets else lambda merged: _scrub_sessions(merged, found))
    except FileNotFoundError:
        raise CliError(f"no such file: {src}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot lift {src}: {exc}") from None
    except NotebookError as exc:
        raise CliError(str(exc)) from None
    _warn_report(report)
    target = args.output or str(src)
    if written and (added or journals):
        print(f"lifted {added} entr{'y' if added == 1 else 'ies'} from {journals} journal output(s); wrote {target}")
    elif written:
        print(f"no journal entries to lift; wrote the checked metadata to {target}"
              + (" (see the problems above)" if not report.ok else ""))
    else:
        print(f"nothing to lift: the metadata already holds every journal entry ({journals} journal output(s))")
    if found.count:
        print(f"replaced {found.count} {_LOOKS} with *** in {found.places()} (--keep-secrets lifts them as they "
              "are)", file=sys.stderr)
    return 0


# ---- export -------------------------------------------------------------------------------------


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="a notebook (.ipynb) or a Pi session file (.jsonl)")
    parser.add_argument("--format", choices=["pi", "markdown"], required=True,
                        help="pi: a Pi v3 session file (JSONL); markdown: a readable transcript")
    parser.add_argument("-o", "--output", help="the file to write (default: standard output)")
    parser.add_argument("--session", help="which session of the notebook (default: the active one)")
    parser.add_argument("--keep-secrets", action="store_true",
                        help="write the session as it is stored: no URL credential or key configured here is "
                             "replaced with ***")


def _scrub_export(data: bytes, jsonl: bool) -> tuple[bytes, Replacements]:
    """The export's bytes scrubbed line by line (a line is an entry: its id says where)."""
    from ipyagent.agent.redaction import Redactor, Replacements

    redactor = Redactor.configured()
    found = Replacements()
    out: list[bytes] = []
    for number, line in enumerate(data.splitlines(keepends=True), 1):
        text, count = redactor.text_counted(line.decode("utf-8", "surrogateescape"))
        if count:
            found.add(count, _entry_id(line) if jsonl else f"line {number}")
            line = text.encode("utf-8", "surrogateescape")
        out.append(line)
    return b"".join(out), found


def _entry_id(line: bytes) -> str:
    """The id of the entry a JSONL line holds (else what the line is)."""
    with contextlib.suppress(ValueError):
        row = json.loads(line)
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            return f"entry {row['id']}" if row.get("type") != "session" else "the header"
    return "a line set aside"


@command("export", _configure_export)
def run_export(args: argparse.Namespace) -> int:
    """Export a session as a Pi session file or as Markdown."""
    from ipyagent.display.journal_view import transcript_markdown
    from ipyagent.store.schema import SessionNotFound

    path = Path(args.notebook)
    settings: SavedSettings = {}
    if path.suffix == ".ipynb":
        _, sessions, report = _read_sessions(path)
        try:
            name = sessions.resolve_name(args.session)
        except SessionNotFound as exc:
            raise CliError(f"{path}: {exc}") from None
        session = sessions.to_session(name)
        settings = sessions.sessions[name].settings
    else:
        from ipyagent.core import Session

        name = args.session or path.stem
        try:
            session = Session.from_file(path)
        except FileNotFoundError:
            raise CliError(f"no such file: {path}") from None
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read {path}: {exc}") from None
        report = session.load_report
    _warn_report(report)
    if args.format == "pi":
        # the lines set aside on import go back in their places, byte for byte
        data = session.to_pi_jsonl_bytes()
        if session.entries and session.leaf_id != session.entries[-1]["id"]:
            print(f"note: the session's leaf {session.leaf_id} is not its last entry; Pi resumes a session "
                  f"file at its last entry ({session.entries[-1]['id']})", file=sys.stderr)
    else:
        data = transcript_markdown(session, name, settings).encode("utf-8")
    if args.keep_secrets:
        from ipyagent.agent.redaction import Replacements

        found = Replacements()
    else:  # the keys of this environment and URL credentials never leave in an export, unless asked
        data, found = _scrub_export(data, args.format == "pi")
    if found.count:
        print(f"replaced {found.count} {_LOOKS} with *** in {found.places()} (--keep-secrets exports them as "
              "they are)", file=sys.stderr)
    kept = f" and {len(session.set_aside)} set-aside line(s) in their places" if args.format == "pi" \
        and session.set_aside else ""
    if args.output:
        _write(Path(args.output), data)
        print(f"exported session {name!r} ({len(session.entries)} entries{kept}) to {args.output}", file=sys.stderr)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0


# ---- import -------------------------------------------------------------------------------------


def _configure_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_file", metavar="SESSION.jsonl", help="a Pi session file")
    parser.add_argument("notebook", help="the notebook to store it in (created if missing)")
    parser.add_argument("--session", help="the name to store it under (default: 'default')")
    parser.add_argument("--force", action="store_true", help="replace a session of the same name")
    parser.add_argument("--keep-secrets", action="store_true",
                        help="store the file as it is (your own file into your own notebook): no URL credential "
                             "or key configured here is replaced with ***")


def _scrub_import(header: SessionHeader, entries: list[Entry], report: LoadReport,
                  keep: bool) -> tuple[SessionHeader, list[Entry], Replacements]:
    """The header, entries and set-aside lines with every credential replaced (as they are with
    ``keep``), and what was (or would have been) replaced where."""
    from ipyagent.agent.redaction import Redactor, Replacements

    redactor = Redactor.configured()
    found = Replacements()
    header_out, count = redactor.data_counted(header)
    found.add(count, "the header")
    scrubbed: list[Entry] = []
    for entry in entries:
        clean, count = redactor.data_counted(entry)
        found.add(count, f"entry {entry.get('id')}")
        scrubbed.append(clean)
    for index, item in enumerate(report.set_aside):
        clean_item, count = redactor.data_counted(item)
        found.add(count, f"set-aside line ({item.get('where', index)})")
        if not keep:
            report.set_aside[index] = clean_item
    return (header, entries, found) if keep else (header_out, scrubbed, found)


def _model_of(entries: list[Entry]) -> SavedSettings:
    for entry in reversed(entries):
        if entry.get("type") == "model_change" and entry.get("modelId"):
            provider = entry.get("provider")
            return {"model": f"{provider}:{entry['modelId']}" if provider else entry["modelId"]}
    return {}


@command("import", _configure_import)
def run_import(args: argparse.Namespace) -> int:
    """Store a Pi session file as a session of a notebook."""
    from ipyagent.session.jsonl import read_pi_jsonl
    from ipyagent.store.ipynb import new_notebook, write_notebook, write_sessions_into_notebook
    from ipyagent.store.schema import DEFAULT_SESSION, NotebookSessions

    source = Path(args.session_file)
    try:
        header, entries, report = read_pi_jsonl(source)
    except FileNotFoundError:
        raise CliError(f"no such file: {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {source}: {exc}") from None
    _warn_report(report)
    header, entries, found = _scrub_import(header, entries, report, args.keep_secrets)
    target = Path(args.notebook)
    name = args.session or DEFAULT_SESSION
    if target.exists():
        nb, sessions, nb_report = _read_sessions(target)
        _warn_report(nb_report)
    else:
        if target.suffix != ".ipynb":
            raise CliError(f"{target}: a notebook's name ends with .ipynb")
        nb, sessions = new_notebook(), NotebookSessions(None, {})
    replaced = sessions.sessions.get(name)
    if replaced is not None and not args.force:
        raise CliError(f"{target} already holds a session named {name!r} ({len(replaced.entries)} entries); "
                       "choose another name with --session NAME, or replace it with --force")
    sessions.store_pi_import(name, header, entries, report, _model_of(entries), source=source.name)
    try:
        write_notebook(target, write_sessions_into_notebook(nb, sessions))
    except OSError as exc:
        raise CliError(f"cannot write {target}: {exc}") from None
    verb = "replaced" if replaced is not None else "imported"
    aside = len(report.set_aside)
    print(f"{verb} session {name!r}: {len(entries)} entries from {source} into {target}"
          + (f"; {aside} line(s) that could not be loaded are kept under metadata.ipyagent.set_aside "
             "and written back by an export" if aside else ""))
    if found.count and args.keep_secrets:
        print(f"kept {found.count} {_LOOKS} as they are (--keep-secrets), in {found.places()}")
    elif found.count:
        print(f"replaced {found.count} {_LOOKS} with *** in {found.places()}; --keep-secrets imports the file as "
              "it is")
    return 0
