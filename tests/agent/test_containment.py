"""Where project files may come from (agent/containment.py): the folders an upward search visits,
and the verdict for a path against a root — inside, outside (needs approval) or forbidden."""

from __future__ import annotations

from ipyagent.agent.containment import Verdict, check_path, is_within, project_scope


def test_the_search_stops_at_the_repository_root(tmp_path):
    tmp_path = tmp_path.resolve()
    home = tmp_path / "home"
    repo = home / "repo"
    nb_dir = repo / "analysis" / "june"
    nb_dir.mkdir(parents=True)
    (repo / ".git").mkdir()
    scope = project_scope(nb_dir, home=home)
    assert scope.dirs == (nb_dir, nb_dir.parent, repo)
    assert scope.outermost_first == (repo, nb_dir.parent, nb_dir)
    assert scope.root == repo and scope.repository and scope.start == nb_dir
    # a worktree or a submodule has a .git file, not a folder: the same root
    (repo / ".git").rmdir()
    (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/repo\n")
    assert project_scope(nb_dir, home=home).root == repo


def test_the_search_stops_at_home_and_the_root_stays_the_start_folder(tmp_path):
    tmp_path = tmp_path.resolve()
    home = tmp_path / "me"
    work = home / "work" / "deep"
    work.mkdir(parents=True)
    scope = project_scope(work, home=home)
    assert scope.dirs == (work, work.parent, home)
    assert scope.root == work and not scope.repository  # home's files are not the project's own


def test_with_neither_on_the_way_the_search_never_leaves_the_start_folder(tmp_path):
    tmp_path = tmp_path.resolve()
    # the system's temporary folder: anyone may write an AGENTS.md into a parent of it
    shared = tmp_path / "shared"
    nb_dir = shared / "someone" / "notebooks"
    nb_dir.mkdir(parents=True)
    scope = project_scope(nb_dir, home=tmp_path / "elsewhere")
    assert scope.dirs == (nb_dir,) and scope.root == nb_dir and not scope.repository


def test_the_start_folder_is_resolved(tmp_path):
    tmp_path = tmp_path.resolve()
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / ".git").mkdir()
    (tmp_path / "alias").symlink_to(repo / "sub")
    scope = project_scope(tmp_path / "alias", home=tmp_path / "home")
    assert scope.start == repo / "sub" and scope.root == repo


def test_verdicts_inside_outside_and_forbidden(tmp_path):
    tmp_path = tmp_path.resolve()
    root = tmp_path / "repo"
    root.mkdir()
    (root / "notes.md").write_text("inside")
    (tmp_path / "outside-secret.txt").write_text("secret")
    (root / "CLAUDE.md").symlink_to("../outside-secret.txt")
    (root / "AGENTS.md").symlink_to("/proc/self/environ")
    (root / "via-dev").symlink_to("/dev/fd/0")  # /dev/fd/0 leads on into /proc, maybe further
    (root / "zero").symlink_to("/dev/zero")
    (root / "inner").symlink_to("notes.md")

    inside = check_path(root / "inner", root)
    assert inside.verdict is Verdict.INSIDE and inside.inside and inside.reason() == ""
    assert inside.real == str(root / "notes.md") and "really" in inside.shown

    outside = check_path(root / "CLAUDE.md", root)
    assert outside.verdict is Verdict.OUTSIDE and outside.outside
    assert outside.real == str(tmp_path / "outside-secret.txt")
    assert str(tmp_path / "outside-secret.txt") in outside.reason() and f"outside {root}" in outside.reason()
    assert check_path(root / "sub" / ".." / ".." / "outside-secret.txt", root).outside

    for name in ("AGENTS.md", "via-dev", "zero"):
        verdict = check_path(root / name, root)
        assert verdict.forbidden, name
        assert "never read" in verdict.reason()
    for path in ("/proc/self/environ", "/sys/kernel", "/dev/null"):
        assert check_path(path, "/").forbidden  # even with the whole filesystem as the root


def test_a_relative_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("x")
    assert check_path("a.txt", tmp_path).inside
    assert check_path("../a.txt", tmp_path).outside


def test_is_within():
    assert is_within("/a/b", "/a") and is_within("/a", "/a")
    assert not is_within("/ab", "/a") and not is_within("/a", "/a/b")
    assert not is_within("relative", "/a")


def test_leads_to_forbidden_follows_links_and_folders(tmp_path):
    from ipyagent.agent.containment import leads_to_forbidden

    tmp_path = tmp_path.resolve()
    (tmp_path / "plain.txt").write_text("x")
    (tmp_path / "self").symlink_to("/proc/self")  # a folder link: the file below it is under /proc
    (tmp_path / "fd").symlink_to("/dev/fd/0")
    assert not leads_to_forbidden(tmp_path / "plain.txt")
    assert leads_to_forbidden(tmp_path / "self" / "environ") and leads_to_forbidden(tmp_path / "fd")
