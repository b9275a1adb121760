"""Conversation ids that look like paths, and links: `export` writes only inside OUT, `import`
reads only inside the folder named, on both backends.

Layout of the traps below (``tmp_path``)::

    outside/                      must never be written or deleted
      event-00000-e1.json           a decoy the --force clean-up would delete
      victim.txt                    a file a planted link points at
    out/                          the folder named on the command line
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from viewstore import EventStore
from viewstore.store.append.batch import parse_batch

from ._helpers import OPENHANDS_HEX, event_files, invoke, one_line_error

DECOY = '{"decoy": true}'
VICTIM = "nobody may write here"


def _legacy_conversation(url: str, key: str) -> None:
    """A conversation with an id the store now refuses ("." or ".."), as an earlier version
    wrote it: the same append code, minus the id rule that appends now apply."""
    with EventStore(url) as store:
        store.create_schema()
        batch = parse_batch(
            [{"kind": "MessageEvent", "id": "e1"}, {"kind": "PauseEvent", "id": "e2"}],
            store.max_event_bytes,
        )
        with store._write() as conn:  # the private path: no new_conversation_key
            store._append(conn, key, batch, None)


def _trap(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "event-00000-e1.json").write_text(DECOY, encoding="utf-8")
    (outside / "victim.txt").write_text(VICTIM, encoding="utf-8")
    return outside, tmp_path / "out"


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["event-00000-e1.json", "victim.txt"]
    assert (outside / "event-00000-e1.json").read_text(encoding="utf-8") == DECOY
    assert (outside / "victim.txt").read_text(encoding="utf-8") == VICTIM


@pytest.mark.parametrize("key", ["..", "."])
def test_export_of_a_legacy_dot_id_is_refused_and_writes_nothing(
    db_url: str, tmp_path: Path, key: str
) -> None:
    _legacy_conversation(db_url, key)
    outside = tmp_path / "outside"
    outside.mkdir()
    out = outside / "out"  # OUT/.. is `outside`: the folder the old export wrote into
    out.mkdir()
    (outside / "events").mkdir()
    (outside / "events" / "event-00000-e1.json").write_text(DECOY, encoding="utf-8")
    (outside / "events" / ".eventlog.lock").write_text(DECOY, encoding="utf-8")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    result = invoke(db_url, "export", key, str(out), "--force")
    assert result.exit_code == 2
    line = one_line_error(result)
    assert f"conversation id {key!r}" in line and "--jsonl" in line
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert (outside / "events" / "event-00000-e1.json").read_text(encoding="utf-8") == DECOY

    # The conversation stays readable, checkable and exportable as JSONL.
    jsonl = tmp_path / "legacy.jsonl"
    assert invoke(db_url, "export", key, str(jsonl), "--jsonl").exit_code == 0
    assert [json.loads(line)["id"] for line in jsonl.read_text("utf-8").splitlines()] == [
        "e1",
        "e2",
    ]
    assert json.loads(invoke(db_url, "view", key, "--json").stdout)["event_ids"] == ["e1"]
    assert invoke(db_url, "verify", key).exit_code == 0
    assert invoke(db_url, "rebuild").exit_code == 0
    with EventStore(db_url) as store:
        assert store.events(key)[-1].seq == 2
        assert store.verify().ok


@pytest.mark.parametrize("key", ["..", ".", "a/../../x", "..\\x", "a\x00b", "a\x7fb"])
def test_path_like_ids_are_refused_by_append_and_export(
    db_url: str, tmp_path: Path, key: str
) -> None:
    assert invoke(db_url, "init").exit_code == 0
    with EventStore(db_url) as store:
        with pytest.raises(ValueError, match="conversation id"):
            store.append(key, {"kind": "MessageEvent", "id": "e1"})
        assert store.conversations() == []
    work = tmp_path / "work"
    work.mkdir()
    events = work / "e.jsonl"
    events.write_text('{"kind": "MessageEvent", "id": "e1"}\n', encoding="utf-8")
    if "\x00" not in key:  # an argv string cannot hold NUL at all
        appended = invoke(db_url, "append", key, str(events))
        assert appended.exit_code == 2
        assert "conversation id" in one_line_error(appended)
        exported = invoke(db_url, "export", key, str(work / "out"), "--force")
        assert exported.exit_code == 2
        one_line_error(exported)
    assert sorted(p.name for p in work.iterdir()) == ["e.jsonl"]


def test_export_refuses_a_conversation_folder_that_is_a_link(db_url: str, tmp_path: Path) -> None:
    invoke(db_url, "init")
    invoke(db_url, "demo", "--conversation", "demo")
    outside, out = _trap(tmp_path)
    out.mkdir()
    (out / "demo").symlink_to(outside, target_is_directory=True)
    result = invoke(db_url, "export", "demo", str(out), "--force")
    assert result.exit_code == 2
    assert "symbolic link" in one_line_error(result)
    _untouched(outside)

    (out / "demo").unlink()
    (out / "demo").mkdir()
    (out / "demo" / "events").symlink_to(outside, target_is_directory=True)
    result = invoke(db_url, "export", "demo", str(out), "--force")
    assert result.exit_code == 2
    assert "symbolic link" in one_line_error(result)
    _untouched(outside)


def test_export_replaces_planted_file_links_instead_of_writing_through_them(
    db_url: str, tmp_path: Path
) -> None:
    invoke(db_url, "init")
    invoke(db_url, "demo", "--conversation", "demo")
    outside, out = _trap(tmp_path)
    assert invoke(db_url, "export", "demo", str(out)).exit_code == 0
    events_dir = out / "demo" / "events"
    first = event_files(out / "demo")[0]
    victim = outside / "victim.txt"
    planted = [
        events_dir / ".eventlog.lock",
        first,
        first.with_name(first.name + ".tmp"),
        out / "demo" / "base_state.json.tmp",
        events_dir / "event-00099-x.json",  # a stale name the clean-up deletes
    ]
    for link in planted:
        link.unlink(missing_ok=True)
        link.symlink_to(victim)
    assert invoke(db_url, "export", "demo", str(out), "--force").exit_code == 0
    _untouched(outside)
    for link in planted:
        assert not link.is_symlink(), link
    assert (events_dir / ".eventlog.lock").is_file()
    with EventStore(db_url) as store:
        assert first.read_text(encoding="utf-8") == store.events("demo")[0].payload_json


def test_export_into_a_linked_out_writes_where_it_leads(db_url: str, tmp_path: Path) -> None:
    """OUT itself may be a link: the folder the user named is where it leads."""
    invoke(db_url, "init")
    invoke(db_url, "demo", "--conversation", "demo")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    assert invoke(db_url, "export", "demo", str(tmp_path / "out")).exit_code == 0
    assert len(event_files(real / "demo")) == 16


# -- import: nothing outside the folder named is read -----------------------------------------


def test_import_refuses_event_files_that_lead_outside(
    db_url: str, openhands_folder: Path, tmp_path: Path
) -> None:
    invoke(db_url, "init")
    secret = tmp_path / "secret.json"
    first = event_files(openhands_folder)[0]
    shutil.move(first, secret)  # a valid event, but outside the folder named
    first.symlink_to(secret)
    result = invoke(db_url, "import", str(openhands_folder))
    assert result.exit_code == 2
    line = one_line_error(result)
    assert first.name in line and "outside" in line
    with EventStore(db_url) as store:
        assert store.conversations() == []

    # The same link target inside the folder named is fine.
    inside = openhands_folder / "kept.json"
    shutil.move(secret, inside)
    first.unlink()
    first.symlink_to(inside)
    assert invoke(db_url, "import", str(openhands_folder)).exit_code == 0
    with EventStore(db_url) as store:
        assert store.version(OPENHANDS_HEX) == 15


def test_import_refuses_an_events_folder_or_conversation_that_leads_outside(
    db_url: str, openhands_folder: Path, tmp_path: Path
) -> None:
    invoke(db_url, "init")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(openhands_folder / "events", elsewhere)
    (openhands_folder / "events").symlink_to(elsewhere, target_is_directory=True)
    result = invoke(db_url, "import", str(openhands_folder))
    assert result.exit_code == 2
    assert "outside" in one_line_error(result)

    # A parent folder whose child conversation is a link to a folder outside the parent.
    parent = tmp_path / "parent"
    parent.mkdir()
    real = tmp_path / "real" / "0123456789abcdef0123456789abcdef"
    real.parent.mkdir()
    shutil.copytree(openhands_folder, real, symlinks=False)
    (parent / real.name).symlink_to(real, target_is_directory=True)
    result = invoke(db_url, "import", str(parent))
    assert result.exit_code == 2
    assert "outside" in one_line_error(result)
    with EventStore(db_url) as store:
        assert store.conversations() == []
    # Named directly, the real folder imports.
    assert invoke(db_url, "import", str(real)).exit_code == 0


@pytest.mark.parametrize("name", ["a\\b", "bad\x7fname"])
def test_import_of_a_folder_whose_name_is_not_a_valid_id(
    db_url: str, openhands_folder: Path, name: str
) -> None:
    invoke(db_url, "init")
    renamed = openhands_folder.with_name(name)
    os.rename(openhands_folder, renamed)
    result = invoke(db_url, "import", str(renamed.parent))
    assert result.exit_code == 2
    assert "conversation id" in one_line_error(result)
    with EventStore(db_url) as store:
        assert store.conversations() == []
