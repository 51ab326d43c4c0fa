"""real_root answers as os.path.realpath does, its parent folders resolved once (gateway.realpaths)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.index import realpaths
from gateway.index.realpaths import real_root

NAMES = st.sampled_from(["a", "b", "c", "link", "loop", "..", ".", "missing"])


def _tree(base: Path) -> None:
    """Folders, a symlinked folder, a symlink to a symlink, a dangling one and a loop."""
    (base / "a" / "b" / "c").mkdir(parents=True, exist_ok=True)
    for link, target in [
        (base / "link", base / "a" / "b"),
        (base / "a" / "link", Path("b") / "c"),
        (base / "a" / "b" / "link", base / "link"),
        (base / "a" / "b" / "c" / "link", base / "missing"),
        (base / "loop", base / "loop"),
    ]:
        if not link.is_symlink():
            link.symlink_to(target)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(parts=st.lists(NAMES, min_size=1, max_size=5), relative=st.booleans())
def test_the_same_as_realpath(tmp_path: Path, parts: list[str], relative: bool) -> None:
    _tree(tmp_path)
    path = os.path.join(*parts) if relative else os.path.join(tmp_path, *parts)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert real_root(path) == os.path.realpath(path)
        assert real_root(path) == os.path.realpath(path)  # the parent remembered
    finally:
        os.chdir(cwd)


def test_a_parent_changed_is_seen_once_forgotten(tmp_path: Path, monkeypatch: object) -> None:
    """A parent folder's symlink retargeted is seen once its remembered resolution is older than PARENT_TTL_S."""
    (tmp_path / "one" / "repo").mkdir(parents=True)
    (tmp_path / "two" / "repo").mkdir(parents=True)
    (tmp_path / "here").symlink_to(tmp_path / "one")
    assert real_root(str(tmp_path / "here" / "repo")) == str(tmp_path / "one" / "repo")
    (tmp_path / "here").unlink()
    (tmp_path / "here").symlink_to(tmp_path / "two")
    realpaths._parents.clear()  # as after PARENT_TTL_S
    assert real_root(str(tmp_path / "here" / "repo")) == str(tmp_path / "two" / "repo")


def test_the_file_system_root() -> None:
    assert real_root("/") == "/"
