"""Where project files may come from (agent/containment.py): the folders an upward search visits,
and the verdict for a path against a root — inside, outside (needs approval) or forbidden."""

from __future__ import annotations

import os

import pytest

from ipyagent.agent.containment import Verdict, check_path, is_within, project_scope, repository_refusal


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
    # a worktree or a submodule has a .git file, not a folder: the same root when it leads to a git directory
    (repo / ".git").rmdir()
    worktree = tmp_path / "main" / ".git" / "worktrees" / "repo"
    worktree.mkdir(parents=True)
    (worktree / "HEAD").write_text("ref: refs/heads/topic\n")
    (repo / ".git").write_text(f"gitdir: {worktree}\n")
    assert project_scope(nb_dir, home=home).root == repo
    (repo / ".git").write_text("gitdir: ../../main/.git/worktrees/repo\n")  # relative to the .git file's folder
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


@pytest.mark.parametrize("planted", ["gitdir-nowhere", "dangling-link", "not-gitdir", "gitdir-plain-folder"])
def test_a_git_file_planted_in_a_shared_parent_makes_no_root(tmp_path, planted):
    # git's CVE-2022-24765: anyone may write /tmp/.git; it must not make /tmp the project's root
    tmp_path = tmp_path.resolve()
    shared = tmp_path / "shared"
    nb_dir = shared / "alice" / "analysis"
    nb_dir.mkdir(parents=True)
    (tmp_path / "plain").mkdir()
    dot_git = shared / ".git"
    if planted == "gitdir-nowhere":
        dot_git.write_text("gitdir: /nonexistent\n")
    elif planted == "dangling-link":
        dot_git.symlink_to("/nonexistent/.git")
    elif planted == "not-gitdir":
        dot_git.write_text("[core]\n\tbare = false\n")
    else:
        dot_git.write_text(f"gitdir: {tmp_path / 'plain'}\n")  # a folder, but no git directory (no HEAD)
    scope = project_scope(nb_dir, home=tmp_path / "elsewhere")
    assert scope.dirs == (nb_dir,) and scope.root == nb_dir and not scope.repository
    ((folder, why),) = scope.refused
    assert folder == shared and f"does not make {shared} a repository root" in why


def test_a_repository_owned_by_another_user_makes_no_root(tmp_path):
    # as git's safe.directory: the folder, its .git and the git directory belong to the kernel's user
    tmp_path = tmp_path.resolve()
    repo = tmp_path / "repo"
    nb_dir = repo / "analysis"
    nb_dir.mkdir(parents=True)
    (repo / ".git").mkdir()
    mine = os.geteuid()
    assert repository_refusal(repo, owner=mine) is None
    assert project_scope(nb_dir, home=tmp_path / "h", owner=mine).root == repo
    stranger = project_scope(nb_dir, home=tmp_path / "h", owner=mine + 1)
    assert stranger.root == nb_dir and not stranger.repository
    assert f"belongs to user id {mine}, not to the kernel's user ({mine + 1})" in stranger.refused[0][1]
    # a .git link to a git directory counts as the directory itself
    (repo / ".git").rmdir()
    (tmp_path / "real.git").mkdir()
    (repo / ".git").symlink_to(tmp_path / "real.git")
    assert project_scope(nb_dir, home=tmp_path / "h").root == repo
    assert repository_refusal(nb_dir) == ""  # no .git at all: nothing to refuse


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
