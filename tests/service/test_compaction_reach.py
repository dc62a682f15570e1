"""What a compaction reaches back to (issue 16, second pass), on synthetic histories and the corpus.

- Behind another agent's summary: a session imported from Claude Code holds Claude Code's own
  compaction summary, a paraphrase. Compacting it again must rest on the real history that
  summary stands for (stored, hidden), not on the paraphrase: the user's words before the agent's
  compaction are quoted, the files edited then are named — for the extractive summarizer and, by
  pinning, for a model's summary too.
- Many user messages: a long session's hundred messages each keep their opening, however many.
- The working set: absolute paths an output lists (however deep) are names; closing tags and
  routes are not; `__dunder__` names are; paths under the project root are written relative to it;
  and the working set may grow into room the other sections leave, never past the budget.
- A commit is named by its hash when the output printed one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _histories import assistant, call, stored, user
from _recall import measure, seen_text  # noqa: E402
from conftest import CORPUS, needs_corpus
from fake_anthropic import VALID_SUMMARY

from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.chain import Sampled
from contextfold.compaction.extractive import ExtractiveSummarizer
from contextfold.compaction.pins import names_file
from contextfold.compaction.template import CONSTRAINTS, CRITICAL, DONE, FILES, parse_summary
from contextfold.compaction.userwords import MIN_OPENING_CHARS
from contextfold.compaction.workingset import MAX_SHARE, SHARE, working_set
from contextfold.config import load_settings
from contextfold.domain import Message
from contextfold.service.facade import ContextService
from contextfold.tokens.counting import counter_for

pytestmark = pytest.mark.anyio
COUNTER = counter_for("gpt-4o")
_ids = iter(range(1, 1_000_000))


def summarize(head: list[Message], budget: int = 4_000) -> str:
    request = SummaryRequest(head=head, previous=None, counter=COUNTER, budget_tokens=budget)
    return ExtractiveSummarizer().summarize_sync(request).text


@pytest.fixture(autouse=True)
def no_anthropic_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.fixture
async def service(tmp_path: Path):
    async with await ContextService.open(load_settings({"home": tmp_path / "home"}, environ={})) as svc:
        yield svc


# -- behind another agent's summary -------------------------------------------------------------

FIRST = "Port the CSV exporter to streaming; keep the header row exactly as it is today."
CORRECTION = "No: write the header once per file, not once per chunk."
LATER = "Now add a --gzip flag to the export command."
PARAPHRASE = (
    "This session is being continued from a previous conversation that ran out of context.\n"
    "Summary:\n1. Primary Request and Intent: the user wants streaming exports.\n"
    "2. Work so far: the exporter was changed and tests pass."
)


def _cc(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": f"u{next(_ids)}",
        "sessionId": "s1",
        "isSidechain": False,
        "message": {"role": kind, "content": content, **({"id": f"m{next(_ids)}"} if kind == "assistant" else {})},
        **extra,
    }


def _tool_round(name: str, input: dict[str, Any], output: str, text: str = "") -> list[dict[str, Any]]:
    call_id = f"toolu_{next(_ids)}"
    blocks = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": call_id, "name": name, "input": input}
    ]
    return [
        _cc("assistant", blocks),
        _cc("user", [{"type": "tool_result", "tool_use_id": call_id, "content": output}]),
    ]


def claude_code_session(tmp_path: Path) -> Path:
    """A Claude Code transcript: work, the user's correction, Claude Code's own compaction (a
    paraphrase naming neither the user's words nor the file), then more work."""
    records: list[dict[str, Any]] = [_cc("user", FIRST)]
    records += _tool_round(
        "Read", {"file_path": "/repo/src/export/csv_writer.py"}, "def write(rows):\n" + "    pass\n" * 400
    )
    records += _tool_round(
        "Edit",
        {"file_path": "/repo/src/export/csv_writer.py", "old_string": "a", "new_string": "b"},
        "The file /repo/src/export/csv_writer.py has been updated.",
    )
    records += [_cc("assistant", [{"type": "text", "text": "The exporter streams now."}]), _cc("user", CORRECTION)]
    records += _tool_round(
        "Edit",
        {"file_path": "/repo/src/export/header.py", "old_string": "a", "new_string": "b"},
        "The file /repo/src/export/header.py has been updated.",
    )
    records += [
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": f"b{next(_ids)}",
            "compactMetadata": {"trigger": "manual", "preTokens": 90_000},
        },
        {**_cc("user", PARAPHRASE), "isCompactSummary": True},
        _cc("user", LATER),
    ]
    for i in range(8):
        records += _tool_round(
            "Bash",
            {"command": f"pytest tests/test_export.py -k case{i}"},
            f"Exit code 0\n{'.' * 60}\n{i + 1} passed in 0.2s\n" + "log line\n" * 300,
            text=f"Running check {i}.",
        )
    records += [_cc("assistant", [{"type": "text", "text": "The flag is in."}])]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


async def test_compacting_after_another_agents_compaction_rests_on_the_real_history(service, tmp_path: Path) -> None:
    imported = await service.import_transcript(claude_code_session(tmp_path), model="gpt-4o")
    assert imported.compactions == 1  # Claude Code's compaction replayed: the early work is hidden
    result = await service.compact(imported.session_id, summarizer="extractive")
    assert result.compacted
    summary = await service.summary_text(imported.session_id)
    quotes = " ".join(parse_summary(summary)[CONSTRAINTS])
    # The user's words from before Claude Code's compaction, word for word, and the files edited then.
    assert FIRST in quotes and CORRECTION in quotes and LATER in quotes
    parsed = parse_summary(summary)
    assert names_file(parsed, "/repo/src/export/csv_writer.py") and names_file(parsed, "/repo/src/export/header.py")


async def test_a_models_summary_after_another_agents_compaction_is_pinned_from_the_real_history(
    service, tmp_path: Path
) -> None:
    imported = await service.import_transcript(claude_code_session(tmp_path), model="gpt-4o")
    assert "csv_writer" not in VALID_SUMMARY and "Port the CSV" not in VALID_SUMMARY
    result = await service.compact(
        imported.session_id, summarizer="sampling", sampled=Sampled(VALID_SUMMARY, "client-model")
    )
    assert result.compacted and result.summarizer == "sampling"
    summary = await service.summary_text(imported.session_id)
    assert FIRST in summary and CORRECTION in summary
    assert "/repo/src/export/csv_writer.py" in summary and "/repo/src/export/header.py" in summary


async def test_our_own_previous_summary_is_built_on_without_reading_the_hidden_history(service) -> None:
    """A contextfold summary carries the user's words itself: the next compaction merges it and
    reads no hidden history; another agent's summary makes it read what that summary stands for."""
    await service.open_session("s", model="gpt-4o")
    for text in (FIRST, "next", "more", "again"):
        await service.append("s", [{"role": "user", "content": text}, {"role": "assistant", "content": "ok " * 3000}])
        if text == "next":
            await service.compact("s", summarizer="extractive")
    plan = (await service.compactor.prepare("s")).plan
    assert plan.previous is not None and not plan.foreign_previous and plan.earlier == ()
    await service.compact("s", summarizer="extractive")
    assert FIRST in await service.summary_text("s")


async def test_another_agents_summary_makes_the_plan_read_the_history_it_stands_for(service, tmp_path: Path) -> None:
    imported = await service.import_transcript(claude_code_session(tmp_path), model="gpt-4o")
    plan = (await service.compactor.prepare(imported.session_id)).plan
    assert plan.foreign_previous
    assert [m.text for m in plan.earlier if m.role == "user" and m.text in (FIRST, CORRECTION)] == [FIRST, CORRECTION]
    assert all(m.seq < plan.previous_summary.seq and not m.is_compaction for m in plan.earlier)


# -- the corpus: cut after Claude Code's real compaction ------------------------------------------

RAW = CORPUS / "raw" / "claude-code-spotter" / "test" / "fixtures" / "transcripts"
COMPACTED = [
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", COMPACTED)
async def test_after_claude_codes_real_compaction_every_instruction_and_edited_file_survives(
    service, tmp_path: Path, name: str
) -> None:
    """The raw file cut halfway between Claude Code's compaction and its end, imported as a user
    would (the compaction replayed), then compacted by contextfold: every instruction the user
    gave before the cut and every file edited before it is in what the model sees."""
    from contextfold.importers import load_transcript

    lines = (RAW / name).read_text("utf-8").splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    cut = tmp_path / name
    cut.write_text("".join(lines[: boundary + (len(lines) - boundary) // 2]), "utf-8")

    def conversation(path: Path) -> list[dict[str, Any]]:
        loaded = load_transcript(path)
        summaries = {c.summary_index for c in loaded.compactions} | set(
            loaded.metadata.get("compact_summary_indexes", [])
        )
        return [m for i, m in enumerate(loaded.messages) if i not in summaries]

    whole, before = conversation(RAW / name), conversation(cut)
    imported = await service.import_transcript(cut, model="gpt-4o")
    assert imported.compactions >= 1
    result = await service.compact(imported.session_id, summarizer="extractive")
    assert result.compacted and result.summary_tokens <= 4_500
    context = await service.get_context(imported.session_id, format="openai")
    m = measure(whole, len(before), seen_text(context.messages, context.system))
    assert m.instructions.wanted and not m.instructions.missed, m.instructions.missed
    assert m.edited.wanted and not m.edited.missed, m.edited.missed


# -- many user messages ---------------------------------------------------------------------------


def test_a_hundred_user_messages_each_keep_their_opening() -> None:
    words = "stream the rows, batch the writes, keep the header, check the gzip flag and the tests".split()
    head: list[Message] = []
    for i in range(100):
        text = f"Request {i:03d}: " + " ".join(words[(i + j) % len(words)] for j in range(30))
        head += [
            user(text),
            assistant(f"Done with {i}.", call("Bash", {"command": f"make step{i}"}, "Exit code 0\nok")),
        ]
    text = summarize(stored(head), budget=4_500)
    assert COUNTER.count(text) <= 4_500
    quotes = [b for b in parse_summary(text)[CONSTRAINTS] if b.startswith("User [")]
    assert len(quotes) == 100
    for i in range(100):
        assert any(b.split(": ", 1)[1].startswith(f"Request {i:03d}: ") for b in quotes), i
    # Each keeps at least its opening; the newest keep the most.
    assert min(len(b.split(": ", 1)[1]) for b in quotes) >= MIN_OPENING_CHARS - 1
    assert len(quotes[-1]) > len(quotes[0])


# -- the working set ------------------------------------------------------------------------------

ROOT = "/home/someone/projects/worktrees/exporter-feature-branch/"


def test_absolute_paths_an_output_lists_are_names_however_deep() -> None:
    deep = ROOT + "lib/exporter_web/live/components/streaming/csv_export_progress_live.ex"
    assert len(deep) > 80
    listing = "\n".join([ROOT + "config/dev.exs", ROOT + "config/runtime.exs", deep])
    head = stored(
        [
            user("Where is the export progress shown?"),
            assistant("", call("Bash", {"command": f"find {ROOT} -name '*.ex*'"}, listing)),
        ]
    )
    ranked = [name for name, _ in working_set(head, set()).ranked]
    for path in (ROOT + "config/dev.exs", ROOT + "config/runtime.exs", deep):
        assert path in ranked, (path, ranked)


def test_closing_tags_and_bare_routes_are_not_files_but_dunders_are_names() -> None:
    head = stored(
        [
            user("Fix the template."),
            assistant(
                "",
                call(
                    "Read",
                    {"file_path": "/repo/lib/page.html"},
                    "<div><span>hi</span></div>\n<a href=\"/sessions\">x</a>\nif __name__ == '__main__': run(__MODULE__)",
                ),
            ),
        ]
    )
    ranked = dict(working_set(head, set()).ranked)
    assert not {"/div", "/span", "/sessions", "/a"} & set(ranked)
    assert ranked.get("__name__") == "name" and ranked.get("__MODULE__") == "name"


def test_the_working_set_writes_paths_under_the_project_root_relative_to_it() -> None:
    head = stored(
        [
            user("Tidy the exporter."),
            assistant(
                "",
                call(
                    "Edit",
                    {"file_path": ROOT + "lib/exporter.ex", "old_string": "a", "new_string": "b"},
                    f"The file {ROOT}lib/exporter.ex has been updated.",
                ),
            ),
            assistant(
                "",
                call(
                    "Edit",
                    {"file_path": ROOT + "lib/header.ex", "old_string": "a", "new_string": "b"},
                    f"The file {ROOT}lib/header.ex has been updated.",
                ),
            ),
            assistant(
                "", call("Read", {"file_path": ROOT + "lib/exporter/format.ex"}, "defmodule Exporter.Format do\nend")
            ),
            assistant("", call("Read", {"file_path": "/usr/lib/erlang/lib/stdlib/src/lists.erl"}, "-module(lists).")),
        ]
    )
    summary = parse_summary(summarize(head))
    assert f"Project root: `{ROOT}lib/` (the paths below under it are written relative to it)" in summary[CRITICAL]
    assert "header.ex — edited (Edit)" in summary[FILES]
    listed = " ".join(b for b in summary[FILES] if b.startswith("Files read: "))
    # Under the root: relative to it. Elsewhere: the whole path.
    assert "exporter/format.ex" in listed.replace("Files read: ", "").split(", ") and ROOT not in listed
    assert "/usr/lib/erlang/lib/stdlib/src/lists.erl" in listed


def test_the_working_set_grows_into_room_the_other_sections_leave_but_not_past_the_budget() -> None:
    names = [f"module_{i:03d}_handler" for i in range(600)]
    head = stored(
        [
            user("Map the handlers."),
            *[assistant(f"`{names[i]}` and `{names[i + 1]}` look related.") for i in range(0, 600, 2)],
        ]
    )
    budget = 3_000
    text = summarize(head, budget=budget)
    listed = [b for b in parse_summary(text)[FILES] if b.startswith("Identifiers: ")]
    spent = COUNTER.count("\n".join(listed))
    assert budget * SHARE < spent <= budget * MAX_SHARE
    assert COUNTER.count(text) <= budget


# -- commits ---------------------------------------------------------------------------------------


def test_a_commit_is_named_by_its_hash() -> None:
    head = stored(
        [
            user("Commit it."),
            assistant(
                "", call("Edit", {"file_path": "/repo/src/a.py", "old_string": "a", "new_string": "b"}, "updated")
            ),
            assistant(
                "",
                call(
                    "Bash",
                    {"command": 'git commit -am "feat: stream the export"'},
                    "[feature/export b9288c2] feat: stream the export\n 1 file changed, 2 insertions(+)",
                ),
            ),
        ]
    )
    done = parse_summary(summarize(head))[DONE]
    assert any('committed b9288c2 "feat: stream the export"' in b for b in done), done


def test_one_file_named_several_ways_is_listed_once_under_its_longest_path() -> None:
    path = ROOT + "lib/exporter_web/live/progress_live.ex"
    head = stored(
        [
            user("Where is the progress shown?"),
            assistant(
                "`progress_live.ex` renders it; see `live/progress_live.ex`.",
                call("Read", {"file_path": path}, "defmodule ProgressLive do\nend"),
                call("Bash", {"command": "ls /repo/assets/ && ls /repo/assets"}, "app.js\nindex.js\nvendor/index.js"),
            ),
            assistant(
                "",
                call("Grep", {"pattern": "index.js"}, "lib/a/index.js:1: x\nlib/b/index.js:2: y\nhooks.erl:-spec f()"),
            ),
        ]
    )
    ranked = dict(working_set(head, set(), [path]).ranked)
    assert ranked.get(path) == "read"
    assert "progress_live.ex" not in ranked and "live/progress_live.ex" not in ranked
    assert ("/repo/assets" in ranked) != ("/repo/assets/" in ranked)
    # A name two different paths end with is not merged into either; a search hit is its file.
    assert "index.js" in ranked and "lib/a/index.js" in ranked and "lib/b/index.js" in ranked
    assert "hooks.erl" in ranked and not any(name.startswith("hooks.erl:") for name in ranked)


# -- Codex's own compactions -----------------------------------------------------------------------


async def test_a_codex_compaction_is_replayed_on_import_and_compacting_again_reads_behind_it(
    service, tmp_path: Path
) -> None:
    from _agent_events import CodexRollout

    rollout = CodexRollout(tmp_path / "rollout.jsonl", cwd="/repo")
    rollout.user(FIRST)
    rollout.command("sed -i 's/a/b/' src/export/csv_writer.py", "")
    rollout.command("cat src/export/csv_writer.py", "def write(rows):\n" + "    pass\n" * 300)
    rollout.user(CORRECTION)
    rollout.compacted("Summary: the user wants streaming exports; the writer was changed.")
    rollout.user(LATER)
    for i in range(6):
        rollout.command(f"pytest tests/test_export.py -k case{i}", f"{i + 1} passed\n" + "log line\n" * 300)
    rollout.assistant("The flag is in.")

    imported = await service.import_transcript(rollout.path, model="gpt-4o")
    assert imported.compactions == 1
    context = await service.get_context(imported.session_id, format="openai")
    seen = seen_text(context.messages, context.system)
    # Codex's summary anchors the view; what it replaced is hidden, not gone.
    assert "streaming exports" in seen and FIRST not in seen and LATER in seen
    result = await service.compact(imported.session_id, summarizer="extractive")
    assert result.compacted
    summary = await service.summary_text(imported.session_id)
    assert FIRST in summary and CORRECTION in summary and "src/export/csv_writer.py" in summary
