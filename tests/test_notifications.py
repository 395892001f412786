"""Notification formatting and placement rules (SPEC §4)."""

from __future__ import annotations

from bareagent.core.notifications import Notification, format_notifications, inject_notifications


def note(result: str = "ok", error: str | None = None) -> Notification:
    return Notification(source_id="job1", kind="job", status="done", result=result, error=error)


def test_block_is_one_system_message_with_tag() -> None:
    text = format_notifications([note("a"), note("b")])
    assert text.startswith("<background-notifications>")
    assert text.endswith("</background-notifications>")
    assert "job1" in text and "result: a" in text and "result: b" in text


def test_result_and_error_cut_to_500_chars() -> None:
    long = "x" * 2000
    text = format_notifications([note(long)])
    assert "x" * 500 in text and "x" * 501 not in text
    text = format_notifications([note(error="e" * 900)])
    assert "error: " + "e" * 500 in text and "e" * 501 not in text


def test_inserted_before_trailing_plain_user_message() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert inject_notifications(messages, [note()])
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[-1]["content"] == "hi"


def test_appended_after_trailing_tool_result_message() -> None:
    tool_results = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "r"}],
    }
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}]
    messages.append(tool_results)
    inject_notifications(messages, [note()])
    assert messages[-2] is tool_results
    assert messages[-1]["role"] == "system"


def test_nothing_to_inject_changes_nothing() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert not inject_notifications(messages, [])
    assert messages == [{"role": "user", "content": "hi"}]
