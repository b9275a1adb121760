"""`viewstore import` / `export`: the OpenHands folder layout in and out, on both backends."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from viewstore import EventStore

from ._helpers import OPENHANDS_HEX, event_files, invoke, one_line_error


def test_import_gives_the_sdk_views(
    db_url: str, openhands_folder: Path, openhands_expected: dict[str, Any]
) -> None:
    result = invoke(db_url, "init")
    assert result.exit_code == 0
    result = invoke(db_url, "import", str(openhands_folder), "--json")
    assert result.exit_code == 0, result.output
    [summary] = json.loads(result.stdout)["conversations"]
    assert summary["conversation_id"] == OPENHANDS_HEX
    assert (summary["events"], summary["appended"], summary["error"]) == (15, 15, None)
    with EventStore(db_url) as store:
        live = store.view(OPENHANDS_HEX)
        incremental = openhands_expected["incremental"]
        assert live.event_ids == incremental["view_ids"]
        assert live.manipulation_indices == incremental["manipulation_indices"]
        assert live.unhandled_condensation_request == incremental["unhandled_condensation_request"]
        resume = store.resume_view(OPENHANDS_HEX)
        assert resume.event_ids == openhands_expected["view_ids"]
        assert resume.manipulation_indices == openhands_expected["manipulation_indices"]
        for seq, prefix in enumerate(openhands_expected["prefixes"], start=1):
            assert store.view(OPENHANDS_HEX, as_of=seq).event_ids == prefix["view_ids"]
        assert store.verify().ok


def test_reimport_is_a_no_op(db_url: str, openhands_folder: Path) -> None:
    invoke(db_url, "init")
    assert invoke(db_url, "import", str(openhands_folder)).exit_code == 0
    with EventStore(db_url) as store:
        before = [(e.seq, e.event_id, e.hash) for e in store.events(OPENHANDS_HEX)]
    again = invoke(db_url, "import", str(openhands_folder), "--json")
    assert again.exit_code == 0
    [summary] = json.loads(again.stdout)["conversations"]
    assert (summary["appended"], summary["duplicates"]) == (0, 15)
    with EventStore(db_url) as store:
        assert [(e.seq, e.event_id, e.hash) for e in store.events(OPENHANDS_HEX)] == before


def test_export_round_trips_every_event_file(
    db_url: str, openhands_folder: Path, tmp_path: Path
) -> None:
    invoke(db_url, "init")
    invoke(db_url, "import", str(openhands_folder))
    out = tmp_path / "out"
    result = invoke(db_url, "export", OPENHANDS_HEX, str(out))
    assert result.exit_code == 0, result.output
    exported = out / OPENHANDS_HEX
    source_files = event_files(openhands_folder)
    assert [p.name for p in event_files(exported)] == [p.name for p in source_files]
    for source in source_files:
        copy = exported / "events" / source.name
        assert json.loads(copy.read_bytes()) == json.loads(source.read_bytes()), source.name
        assert not copy.read_text(encoding="utf-8").endswith("\n")
    assert (exported / "events" / ".eventlog.lock").is_file()
    assert (exported / "events" / ".eventlog-len-15.marker").is_file()
    state = json.loads((exported / "base_state.json").read_text(encoding="utf-8"))
    original = json.loads((openhands_folder / "base_state.json").read_text(encoding="utf-8"))
    assert state["id"] == original["id"] == "5a3b1e00-0000-4000-8000-000000000001"
    assert state["leaf_event_id"] == original["leaf_event_id"]
    assert state["head_is_empty"] is False

    # Exporting again refuses to overwrite, unless --force; the export imports as a no-op.
    refused = invoke(db_url, "export", OPENHANDS_HEX, str(out))
    assert refused.exit_code == 2
    assert "already exists" in one_line_error(refused)
    forced = invoke(db_url, "export", OPENHANDS_HEX, str(out), "--force", "--json")
    assert json.loads(forced.stdout) == {
        "conversation_id": OPENHANDS_HEX,
        "events": 15,
        "path": str(exported),
    }
    again = invoke(db_url, "import", str(out), "--json")
    assert json.loads(again.stdout)["conversations"][0]["appended"] == 0


def test_export_jsonl_feeds_append(db_url: str, openhands_folder: Path, tmp_path: Path) -> None:
    invoke(db_url, "init")
    invoke(db_url, "import", str(openhands_folder))
    jsonl = tmp_path / "events.jsonl"
    assert invoke(db_url, "export", OPENHANDS_HEX, str(jsonl), "--jsonl").exit_code == 0
    lines = jsonl.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        json.loads(p.read_bytes()) for p in event_files(openhands_folder)
    ]
    stdout = invoke(db_url, "export", OPENHANDS_HEX, "-", "--jsonl")
    assert stdout.stdout.splitlines() == lines
    copy = invoke(db_url, "append", "copy", str(jsonl), "--expected-version", "0")
    assert copy.exit_code == 0, copy.output
    with EventStore(db_url) as store:
        assert store.view("copy").event_ids == store.view(OPENHANDS_HEX).event_ids


def test_corrupt_event_file_imports_nothing(db_url: str, openhands_folder: Path) -> None:
    invoke(db_url, "init")
    bad = event_files(openhands_folder)[7]
    bad.write_bytes(bad.read_bytes()[:40])  # a truncated write
    result = invoke(db_url, "import", str(openhands_folder))
    assert result.exit_code == 2
    assert bad.name in one_line_error(result)
    with EventStore(db_url) as store:
        assert store.conversation_ids() == []


def test_unreadable_or_misnamed_files_import_nothing(db_url: str, openhands_folder: Path) -> None:
    invoke(db_url, "init")
    files = event_files(openhands_folder)
    files[4].unlink()  # a gap: the SDK would silently stop at index 3
    result = invoke(db_url, "import", str(openhands_folder))
    assert result.exit_code == 2
    assert "index 4 is missing" in one_line_error(result)
    shutil.copy(files[3], files[4])  # index 4 now holds event 3's JSON: wrong id for the name
    result = invoke(db_url, "import", str(openhands_folder))
    assert result.exit_code == 2
    assert files[4].name in one_line_error(result)
    with EventStore(db_url) as store:
        assert store.conversation_ids() == []


def test_non_hex_event_ids_are_imported(db_url: str, openhands_folder: Path) -> None:
    """The SDK drops event-00014-final.json on reload; viewstore keeps every numbered file."""
    invoke(db_url, "init")
    last = event_files(openhands_folder)[-1]
    payload = json.loads(last.read_bytes())
    payload["id"] = "final-message"
    last.unlink()
    (last.parent / "event-00014-final-message.json").write_text(
        json.dumps(payload), encoding="utf-8"
    )
    assert invoke(db_url, "import", str(openhands_folder)).exit_code == 0
    with EventStore(db_url) as store:
        stored = store.events(OPENHANDS_HEX)
        assert len(stored) == 15
        assert stored[-1].event_id == "final-message"


def test_parent_folder_with_two_conversations(
    db_url: str, openhands_folder: Path, tmp_path: Path
) -> None:
    invoke(db_url, "init")
    parent = openhands_folder.parent
    second = "0123456789abcdef0123456789abcdef"
    shutil.copytree(openhands_folder, parent / second)
    (parent / "notes.txt").write_text("not a conversation", encoding="utf-8")
    result = invoke(db_url, "import", str(parent), "--json")
    assert result.exit_code == 0, result.output
    ids = [c["conversation_id"] for c in json.loads(result.stdout)["conversations"]]
    assert ids == [second, OPENHANDS_HEX]
    with EventStore(db_url) as store:
        assert store.conversation_ids() == sorted(ids)
        assert store.view(second).event_ids == store.view(OPENHANDS_HEX).event_ids


def test_one_bad_conversation_does_not_stop_the_others(db_url: str, openhands_folder: Path) -> None:
    invoke(db_url, "init")
    parent = openhands_folder.parent
    broken = parent / "ffffffffffffffffffffffffffffffff"
    shutil.copytree(openhands_folder, broken)
    event_files(broken)[0].write_text("{not json", encoding="utf-8")
    result = invoke(db_url, "import", str(parent))
    assert result.exit_code == 2
    assert "event-00000-" in one_line_error(result)
    with EventStore(db_url) as store:
        assert store.conversation_ids() == [OPENHANDS_HEX]


def test_import_of_a_folder_without_conversations_is_bad_input(db_url: str, tmp_path: Path) -> None:
    invoke(db_url, "init")
    result = invoke(db_url, "import", str(tmp_path))
    assert result.exit_code == 2
    assert "no OpenHands conversation folder" in one_line_error(result)
    missing = invoke(db_url, "import", str(tmp_path / "nope"))
    assert missing.exit_code == 2
    one_line_error(missing)


def test_a_fork_exports_as_a_complete_folder_that_imports_back(
    db_url: str, openhands_folder: Path, tmp_path: Path
) -> None:
    """A fork's folder holds its shared prefix too: every event from 1, as files the SDK's
    layout names, and importing it elsewhere gives the fork's view."""
    invoke(db_url, "init")
    invoke(db_url, "import", str(openhands_folder))
    with EventStore(db_url) as store:
        fork = store.fork(OPENHANDS_HEX, 10, "f" * 32)
        store.append(fork, {"kind": "MessageEvent", "id": "fork-own", "source": "user"})
        view = store.view(fork).event_ids
    out = tmp_path / "out"
    assert invoke(db_url, "export", fork, str(out)).exit_code == 0
    files = event_files(out / fork)
    assert len(files) == 11
    assert [json.loads(p.read_text(encoding="utf-8"))["id"] for p in files][-1] == "fork-own"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert invoke(other, "init").exit_code == 0
    assert invoke(other, "import", str(out / fork)).exit_code == 0
    with EventStore(other) as copy:
        assert copy.view(fork).event_ids == view
        assert copy.verify().ok
