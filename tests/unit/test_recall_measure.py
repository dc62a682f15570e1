"""The needed-later recall measure itself (`benchmarks/_recall.py`), on a tiny made-up transcript.

What a compaction is judged by must be right before anything is tuned against it: facts count when
the agent used them after the cut and they occurred before it; tool outputs are not use; harness
text is neither use nor an instruction; openings and names match whole, not inside longer words.
"""

from __future__ import annotations

import json
from typing import Any

from _recall import (  # noqa: E402
    RUN_MARK,
    SessionText,
    cut_points,
    edited_files,
    instructions,
    measure,
    needed_facts,
    noise,
    own_words,
)

K = 9
"""The cut: messages[:K] are compacted away."""
FIRST = "Fix the crash in `parse_config` when the config file is empty. Keep `load_settings` as it is."
LATER = "Also do not touch `settings.py` please"


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def transcript() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a coding agent. `sys_helper.py` holds your helpers."},
        {"role": "user", "content": FIRST},
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [call("c1", "Read", file_path="/repo/src/config.py")],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "def parse_config(path):\n    raise KeyError(path)  # helpers.py, test_empty_file, sys_helper.py",
        },
        {"role": "user", "content": "<system-reminder>Lint passed for `lint_only_name`.</system-reminder>"},
        {"role": "user", "content": "[Request interrupted by user]"},
        {"role": "user", "content": LATER},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("c2", "Bash", command="sed -i 's/a/b/' src/util.py && echo done > /tmp/log.txt 2>&1")],
        },
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        # ---- the cut ----
        {
            "role": "assistant",
            "content": "`parse_config` raises KeyError on an empty file; I'll fix config.py, add `brand_new.py`, "
            "and run test_empty_file. sys_helper.py is not involved.",
            "tool_calls": [call("c3", "Edit", file_path="/repo/src/config.py", old_string="a", new_string="b")],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "Edited. See helpers.py; ValueError elsewhere."},
        {"role": "user", "content": "<system-reminder>`settings.py` was modified.</system-reminder>"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("c4", "Bash", command="pytest tests/test_config.py::test_empty_file")],
        },
        {"role": "tool", "tool_call_id": "c4", "content": "1 passed"},
        {"role": "user", "content": "Good. Make sure `load_settings` still works."},
    ]


SYSTEM = ["You are a coding agent. `sys_helper.py` holds your helpers."]


def test_needed_facts_are_used_after_the_cut_and_seen_before_it() -> None:
    # Used after the cut and named before it: the identifier, the exception, the file, the test,
    # and what the user said after the cut. Not: a new file (`brand_new.py`), names used only in
    # tool outputs (`helpers.py`, `ValueError`) or harness text (`settings.py` in a reminder),
    # names only in the system prompt (`sys_helper.py`), nor `test_config.py` (first named after).
    assert needed_facts(transcript(), K, system=SYSTEM) == [
        "parse_config",
        "KeyError",
        "config.py",
        "test_empty_file",
        "load_settings",
    ]


def test_recall_counts_whole_names_in_what_the_model_sees() -> None:
    seen = "Summary: fixing `parse_config` (KeyError) in src/config.py; ran test_empty_file_2 and my_load_settings."
    result = measure(transcript(), K, seen, system=SYSTEM)
    assert result.recall.missed == ("test_empty_file", "load_settings")
    assert (result.recall.kept, result.recall.share) == (3, 0.6)


def test_a_window_bounds_what_counts_as_used() -> None:
    # With a window of one message only the first step after the cut is use.
    assert needed_facts(transcript(), K, window=1, system=SYSTEM) == [
        "parse_config",
        "KeyError",
        "config.py",
        "test_empty_file",
    ]


def test_harness_text_is_not_an_instruction() -> None:
    messages = transcript()
    assert [i for i, _ in instructions(messages, K)] == [1, 6]
    assert instructions(messages, K)[0][1] == FIRST[:60]
    assert instructions(messages, K)[1][1] == LATER
    assert own_words(messages, 3) is None  # a tool result


def test_instructions_kept_need_the_opening_verbatim() -> None:
    seen = f"User said:\n  {FIRST[:70]}\nand later: {LATER}d."
    result = measure(transcript(), K, seen, system=SYSTEM)
    # The first opening is there (whitespace does not matter); the second, a whole short message,
    # must end where it ends ("pleased" is not "please").
    assert result.instructions.missed == (LATER,)
    assert result.instructions.share == 0.5
    assert measure(transcript(), K, f"{FIRST}\n{LATER}", system=SYSTEM).instructions.share == 1.0


def test_text_put_into_a_running_turn_is_not_the_users() -> None:
    body = "Base directory for this skill: /opt/skills/x\n\n" + "Instructions for the skill. " * 60
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Start."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Skill", "input": {"name": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Launching skill"}]},
        {"role": "user", "content": body},
        {"role": "user", "content": "continue"},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}, {"type": "text", "text": "stop"}],
        },
    ]
    assert [(i, o) for i, o in instructions(messages)] == [(0, "Start."), (4, "continue"), (5, "stop")]


def test_edited_files_come_from_edit_calls_and_shell_writes() -> None:
    messages = transcript()
    assert edited_files(messages[:K]) == ["util.py", "log.txt"]
    assert edited_files(messages) == ["util.py", "log.txt", "config.py"]
    result = measure(messages, K, "util.py was changed", system=SYSTEM)
    assert (result.edited.wanted, result.edited.missed) == (("util.py", "log.txt"), ("log.txt",))


def test_a_windows_paths_base_name_is_its_last_part() -> None:
    edits = [
        {"role": "user", "content": "Tidy the scripts."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                call("w1", "Write", file_path="C:\\Users\\dev\\proj\\setup.ps1", content="x"),
                call("w2", "Edit", file_path="D:/work/site/index.md", old_string="a", new_string="b"),
            ],
        },
    ]
    assert edited_files(edits) == ["setup.ps1", "index.md"]
    # A summary that writes the file relative to its project's root still names it.
    assert measure(edits, 2, "- setup.ps1 — created; index.md — edited").edited.missed == ()


def test_cuts_fall_before_the_users_turn_or_a_clean_step() -> None:
    messages = transcript()
    cuts = {c.label: c for c in cut_points(messages)}
    # 40 % of 15 is 6: the user's own message there. 60 % (9) and 80 % (12): no message of the
    # user's own within a tenth, so the nearest step with no call left open and no result next.
    assert (cuts["40%"].k, cuts["40%"].kind) == (6, "user")
    assert (cuts["60%"].k, cuts["60%"].kind) == (9, "step")
    assert (cuts["80%"].k, cuts["80%"].kind) == (12, "step")
    assert all(messages[c.k]["role"] != "tool" for c in cuts.values())


# -- the working set's noise (issue 27) ------------------------------------------------------------


def noise_transcript() -> list[dict[str, Any]]:
    listing = "src/app/main.py\nsrc/app/util.py\n/usr/lib/python3.10/socket.py"
    return [
        {
            "role": "user",
            "content": "Fix `parse_rows` in src/app/main.py; use green/blue/red colours. Run `your_command_here`.",
        },
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "Bash", command="find src -name '*.py'")]},
        {"role": "tool", "tool_call_id": "c1", "content": listing},
        {
            "role": "assistant",
            "content": "GitHub says so.",
            "tool_calls": [call("c2", "Bash", command="sed -i 's/old_name/new_name/g' src/app/util.py")],
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "EEEE.E/usr/lib/python3.10/socket.py:1: Warning\n.card { margin-top: 0; justify-content: space-between }",
        },
        {"role": "assistant", "content": "", "tool_calls": [call("c3", "Read", file_path="src/app/util.py")]},
        {
            "role": "tool",
            "tool_call_id": "c3",
            "content": "def load_rows(path):\n    return read_all(path)  # src/app/util.p",
        },
        # ---- cut at 7 ----
        {"role": "assistant", "content": "`late_name` shows up only now."},
    ]


def working_set_summary(*bullets: str) -> str:
    return "## Relevant Files\n" + "\n".join(f"- {b}" for b in bullets) + "\n"


def test_real_names_of_the_session_are_not_noise() -> None:
    session = SessionText(noise_transcript())
    summary = working_set_summary(
        "Files named: src/app/{main.py, util.py}",
        "Identifiers: parse_rows, load_rows, read_all",
    )
    result = noise(session, 7, summary)
    assert result.entries == ("src/app/main.py", "src/app/util.py", "parse_rows", "load_rows", "read_all")
    assert result.noisy == () and result.share == 0.0


def test_each_class_of_noise_is_counted() -> None:
    session = SessionText(noise_transcript())
    junk = [
        "EEEE.E/usr/lib/python3.10/socket.py",  # progress glued to a path
        "/usr/lib/python3.10/socket.py",  # a system path only shown, never opened
        "s/old_name/new_name/g",  # a sed expression
        "your_command_here",  # a placeholder
        "green/blue/red",  # alternatives in prose, not a path
        "src/app/util.p",  # cut mid-name: a longer name (`util.py`) continues it
        "GitHub",  # a product's name in plain prose
        "margin-top",  # a CSS property
        "space-between",  # a CSS property's value
        "POST",  # a bare word
        "late_name",  # first named after the cut
    ]
    summary = working_set_summary("Files named: " + ", ".join(junk[:3]), "Identifiers: " + ", ".join(junk[3:]))
    assert noise(session, 7, working_set_summary("Files named: src/app/util.py")).noisy == ()
    result = noise(session, 7, summary)
    assert set(result.noisy) == set(junk) and result.share == 1.0


def test_a_name_in_code_the_agent_wrote_in_its_reply_is_real_but_not_one_in_its_plain_words() -> None:
    messages = [
        {"role": "user", "content": "Why is the method not set?"},
        {
            "role": "assistant",
            "content": "The prepare steps run in order, and prepareMethod comes first:\n\n```python\n"
            "def prepare(self):\n    self.prepare_method(self.method)\n```\nSo headersLater runs after it.",
        },
        {"role": "user", "content": "ok"},
    ]
    session = SessionText(messages)
    result = noise(session, 2, working_set_summary("Identifiers: self.prepare_method, prepareMethod, headersLater"))
    assert result.noisy == ("prepareMethod", "headersLater")


def test_a_run_is_one_entry_and_names_listed_one_by_one_beyond_the_limit_are_noise() -> None:
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "Read", file_path="gen.py")]},
        {"role": "tool", "tool_call_id": "c1", "content": "\n".join(f"def func_6_{i}(): pass" for i in range(151))},
        {"role": "user", "content": "next"},
    ]
    session = SessionText(messages)
    assert noise(session, 2, working_set_summary(f"Identifiers: func_6_0{RUN_MARK}func_6_150")).noisy == ()
    one_by_one = noise(session, 2, working_set_summary("Identifiers: " + ", ".join(f"func_6_{i}" for i in range(10))))
    assert len(one_by_one.noisy) == 9 and one_by_one.noisy[0] == "func_6_1"


def test_a_name_right_after_an_escape_stands_there_but_the_escape_letter_glued_to_it_is_noise() -> None:
    # A tool printed Go source as a JSON string: a backslash-n and a backslash-t before each line.
    printed = '{"content": "var (\\n\\teventPool = sync.Pool{}\\n\\tfw.mutex.RLock()\\n)"}'
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "Bash", command="gh api contents/watcher.go")]},
        {"role": "tool", "tool_call_id": "c1", "content": printed},
        {"role": "user", "content": "next"},
    ]
    session = SessionText(messages)
    assert noise(session, 2, working_set_summary("Identifiers: eventPool, fw.mutex.RLock")).noisy == ()
    glued = noise(session, 2, working_set_summary("Identifiers: teventPool, tfw.mutex.RLock"))
    assert set(glued.noisy) == {"teventPool", "tfw.mutex.RLock"}
