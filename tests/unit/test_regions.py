"""Regions (docs/design.md §13): which runs of tool calls are compacted, largest first, and what the view keeps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from region_runs import (
    COMMANDS,
    ERROR_MESSAGE,
    FAILED_TEST,
    FIRST_VERDICT,
    GREP_HIT,
    LAST_VERDICT,
    LINT_ERROR,
    realistic_run,
)
from validators import assert_anthropic_valid, assert_openai_valid

from contextfold.domain import Message, Part, ReasoningPart, TextPart, ToolPart
from contextfold.formats import parse, render
from contextfold.policy.regions import SUMMARIZED_ABOVE, RegionPlan, digest, find_regions, plan_regions
from contextfold.tokens.counting import MESSAGE_OVERHEAD, count_in_view, count_message, counter_for

COUNTER = counter_for("gpt-4o")
NOW = 1_700_000_000.0
_calls = iter(range(10**9))


def tool(
    output: str = "ok",
    *,
    name: str = "Bash",
    arg: dict[str, Any] | None = None,
    state: str = "completed",
    view_text: str | None = None,
) -> ToolPart:
    return ToolPart(
        call_id=f"call_{next(_calls)}",
        name=name,
        input=arg if arg is not None else {"command": "ls -la"},
        state=state,  # type: ignore[arg-type]
        output=output if state == "completed" else None,
        error=output if state == "error" else None,
        view_text=view_text,
    )


def big(n: int = 400) -> str:
    return "\n".join(f"line {i}: some output text here" for i in range(n))


def text(s: str = "thinking out loud") -> TextPart:
    return TextPart(text=s)


def msg(role: str, *parts: Part, summary: bool = False) -> Message:
    return Message(role=role, parts=list(parts), summary=summary)  # type: ignore[arg-type]


def session(*messages: Message) -> list[Message]:
    return [m.model_copy(update={"id": f"m{i:04d}", "seq": i}) for i, m in enumerate(messages)]


def view_cost(messages: Sequence[Message]) -> int:
    return sum(MESSAGE_OVERHEAD + sum(count_in_view(p, COUNTER) for p in m.parts) for m in messages)


def apply(messages: Sequence[Message], plan: RegionPlan) -> list[Message]:
    marks = {(m.message_id, m.index): m.part for m in plan.marks}
    return [m.model_copy(update={"parts": [marks.get((m.id, i), p) for i, p in enumerate(m.parts)]}) for m in messages]


def plan(messages: Sequence[Message], target: int, keep: int = 0, **kw: Any) -> RegionPlan:
    return plan_regions(
        messages,
        total_tokens=view_cost(messages),
        target_tokens=target,
        keep_recent_tokens=keep,
        counter=COUNTER,
        now=NOW,
        **kw,
    )


# -- regions ---------------------------------------------------------------------------------------


def test_text_parts_split_regions_and_tool_runs_cross_messages():
    msgs = session(
        msg("user", text("do it")),
        msg("assistant", tool(), tool()),
        msg("assistant", ReasoningPart(text="hmm", signature="sig"), tool()),  # reasoning does not split
        msg("assistant", text("\n\n"), tool()),  # whitespace-only text does not split
        msg("assistant", text("I found it"), tool()),
        msg("user", text("thanks")),
        msg("assistant", tool()),
    )
    regions = find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)
    assert [r.parts for r in regions] == [
        [("m0001", 0), ("m0001", 1), ("m0002", 1), ("m0003", 1)],
        [("m0004", 1)],
        [("m0006", 0)],
    ]
    assert [r.first_index for r in regions] == [1, 8, 10]
    assert regions[1].tokens == count_in_view(msgs[4].parts[1], COUNTER)


def test_newest_tokens_are_pinned():
    msgs = session(msg("user", text("go")), msg("assistant", tool(big()), tool(big()), tool(big())))
    costs = [count_in_view(p, COUNTER) for p in msgs[1].parts]
    # The newest part alone reaches the budget: it is pinned, the two older ones are not.
    regions = find_regions(msgs, keep_recent_tokens=costs[2], counter=COUNTER)
    assert [r.parts for r in regions] == [[("m0001", 0), ("m0001", 1)]]
    # One token more and the walk pins the middle part too.
    regions = find_regions(msgs, keep_recent_tokens=costs[2] + 1, counter=COUNTER)
    assert [r.parts for r in regions] == [[("m0001", 0)]]
    assert find_regions(msgs, keep_recent_tokens=10**9, counter=COUNTER) == []


def test_summarized_parts_summaries_and_pending_calls_end_runs():
    msgs = session(
        msg("user", text("go")),
        msg("assistant", tool(big()), tool(big(), view_text="[Summary of 3 tool calls]"), tool(big())),
        msg("assistant", text("summary of earlier work"), summary=True),
        msg("assistant", tool(big()), tool(state="pending"), tool(big(), state="error")),
        msg("user", text("next")),
    )
    regions = find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)
    assert [r.parts for r in regions] == [[("m0001", 0)], [("m0001", 2)], [("m0003", 0)], [("m0003", 2)]]
    result = plan(msgs, target=0)
    touched = {(m.message_id, m.index) for m in result.marks}
    assert ("m0001", 1) not in touched and ("m0003", 1) not in touched
    assert touched == {("m0001", 0), ("m0001", 2), ("m0003", 0), ("m0003", 2)}


# -- the plan --------------------------------------------------------------------------------------


def test_largest_region_first_and_stop_at_target():
    small = [tool(big(100)) for _ in range(2)]
    large = [tool(big(300)) for _ in range(3)]
    msgs = session(
        msg("user", text("go")),
        msg("assistant", *small),
        msg("assistant", text("and now")),
        msg("assistant", *large),
        msg("user", text("ok")),
    )
    total = view_cost(msgs)
    sizes = [r.tokens for r in find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)]
    # Freeing half the large region is enough: only it is summarized.
    result = plan(msgs, target=total - sizes[1] // 2)
    assert result.regions_summarized == 1 and result.reached_target
    assert {m.message_id for m in result.marks} == {"m0003"}
    first, *rest = result.marks
    assert first.part.view_text.startswith("[Summary of 3 tool calls]") and first.part.compacted_at == NOW
    assert not first.part.input_cleared
    assert all(m.part.view_text == SUMMARIZED_ABOVE and m.part.input_cleared for m in rest)
    assert result.tokens_after == total - sum(m.freed for m in result.marks) == view_cost(apply(msgs, result))
    # Already at the target: nothing to do.
    none = plan(msgs, target=total)
    assert none.marks == [] and none.reached_target and none.tokens_after == total
    # A target out of reach: everything compactable is summarized, and the plan says it fell short.
    everything = plan(msgs, target=0)
    assert everything.regions_summarized == 2 and not everything.reached_target
    assert "still above" in everything.reason


def test_summarizer_gets_a_fifth_and_failure_drops_the_oldest_region():
    older = [tool(big(100))]
    larger = [tool(big(300)), tool(big(300))]
    msgs = session(
        msg("user", text("go")),
        msg("assistant", *older),
        msg("user", text("more")),
        msg("assistant", *larger),
        msg("user", text("ok")),
    )
    regions = find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)
    asked: list[tuple[int, int]] = []

    def failing(parts: list[ToolPart], budget: int) -> str | None:
        asked.append((len(parts), budget))
        return None

    result = plan(msgs, target=view_cost(msgs) - 10, summarize=failing)
    # The largest region was asked first, for a fifth of what its summary replaces: the region less
    # its first call, which stays in view (name and input).
    stays = count_in_view(larger[0].model_copy(update={"view_text": ""}), COUNTER)
    assert asked == [(2, (regions[1].tokens - stays) // 5)]
    assert result.regions_dropped == 1 and result.regions_summarized == 0 and result.reached_target
    assert [(m.message_id, m.index) for m in result.marks] == [("m0001", 0)]  # the oldest went instead
    assert result.marks[0].part.view_text == "[Earlier turns truncated: 1 tool call removed]"
    assert "summarizer failure" in result.reason


def test_a_summarizer_that_keeps_failing_drops_oldest_first_without_retrying():
    msgs = session(
        *[m for i in range(4) for m in (msg("user", text(f"step {i}")), msg("assistant", tool(big(50 * (i + 1)))))]
    )
    calls: list[int] = []

    def failing(parts: list[ToolPart], budget: int) -> str | None:
        calls.append(budget)
        return None

    result = plan(msgs, target=0, summarize=failing)
    # Newest is largest: asked (fails, the oldest goes), the next largest likewise; then both failed
    # regions are left and go oldest first, without asking again.
    assert len(calls) == 2 and result.regions_dropped == 4 and result.regions_summarized == 0
    assert [m.message_id for m in result.marks] == ["m0001", "m0003", "m0005", "m0007"]


def test_a_summary_that_frees_nothing_is_not_applied():
    msgs = session(msg("user", text("go")), msg("assistant", tool("x")), msg("user", text("ok")))
    result = plan(msgs, target=0, summarize=lambda parts, budget: big(50))
    assert result.marks == [] and result.tokens_after == result.tokens_before and not result.reached_target


def test_duplicate_message_ids_are_refused():
    msgs = [msg("assistant", tool()), msg("assistant", tool())]
    with pytest.raises(ValueError, match="unique"):
        plan_regions(msgs, total_tokens=100, target_tokens=0, keep_recent_tokens=0, counter=COUNTER, now=NOW)


# -- digest ----------------------------------------------------------------------------------------


def test_digest_keeps_exact_arguments_and_the_lines_that_matter():
    parts = [
        tool("\n\n---\nREADME.md\nsrc/", arg={"command": "ls /srv/app && git status", "description": "list"}),
        tool("1\timport os", name="Read", arg={"file_path": "/srv/app/src/main.py", "limit": 40}),
        tool(
            "Traceback (most recent call last):\n  File \"x.py\", line 3\nKeyError: 'user_id'",
            name="Bash",
            arg={"command": "pytest -x"},
            state="error",
        ),
        tool("", name="Grep", arg={"pattern": r"def \w+_handler", "path": "/srv"}),
        tool(
            "Chunk ID: 5a0c8d\nWall time: 1.0 seconds\nProcess exited with code 2\nOutput:\nrg: nope: No such file or directory (os error 2)",
            name="exec_command",
            arg={"cmd": "rg -n main nope", "workdir": "/srv"},
        ),
    ]
    out = digest(parts, budget_tokens=10_000, counter=COUNTER)
    assert out.splitlines() == [
        "[Summary of 5 tool calls]",
        "- Bash ls /srv/app && git status → README.md",
        "  src/",
        "- Read /srv/app/src/main.py → 1\timport os",
        "  limit: 40",  # what the call asked beyond its path: its input is cleared from the view
        # The exception's own line, not the traceback's opening.
        "- Bash pytest -x → error: KeyError: 'user_id'",
        "  Traceback (most recent call last):",
        '  File "x.py", line 3',
        # A search shows its pattern and where it looked.
        "- Grep def \\w+_handler in /srv → (no output)",
        # Codex's wrapper lines are not findings; the exit code and the message are.
        "- exec_command rg -n main nope → rg: nope: No such file or directory (os error 2)",
        "  workdir: /srv",
        "  Process exited with code 2",
    ]
    assert digest(parts, budget_tokens=10_000, counter=COUNTER) == out  # deterministic


def test_digest_of_a_realistic_run_is_about_a_fifth_and_keeps_the_findings():
    """Before: one line per call, 269 tokens for this 7,932-token run (3.4 %), the failing assertion lost."""
    msgs = session(
        msg("user", text("The health check fails, fix it.")),
        msg("assistant", *realistic_run()),
        msg("assistant", text("Fixed: the handler returned 503 before the pool was warm.")),
    )
    region = find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)[0]
    assert 7_500 <= region.tokens <= 8_500  # the set-up: an 8,000-token run
    result = plan(msgs, target=0)
    first = result.marks[0].part.view_text
    share = COUNTER.count(first) / region.tokens
    assert 0.10 <= share <= 0.30, share
    assert result.tokens_after < result.tokens_before - region.tokens // 2
    for fact in (ERROR_MESSAGE, FAILED_TEST, FIRST_VERDICT, LAST_VERDICT, LINT_ERROR, GREP_HIT, *COMMANDS):
        assert fact in first, fact
    assert 'version = "2.3.1"' in first  # key values
    # A listing shows how it begins and ends, and says how much it left out.
    assert "src/app/routes.py" in first and "tests/test_module_13.py" in first and " more lines …" in first
    assert "Chunk ID" not in first and "=====" not in first
    # Bounded at any budget: never over it (past the header and note it always keeps), never over the region.
    for budget in (0, 50, 400, 1_000, region.tokens // 5, region.tokens):
        out = digest([p for p in realistic_run()], budget_tokens=budget, counter=COUNTER)
        assert COUNTER.count(out) <= max(budget, 20) and COUNTER.count(out) < region.tokens
    after = apply(msgs, result)
    assert_anthropic_valid(render([], after, "anthropic"))
    assert_openai_valid(render([], after, "openai"))


def test_digest_fits_a_fifth_of_the_region_by_dropping_middle_calls():
    parts = [
        tool(f"result {i}\n" + big(20), arg={"file_path": f"/repo/pkg/module_{i}.py"}, name="Read") for i in range(60)
    ]
    msgs = session(msg("assistant", *parts))
    region = find_regions(msgs, keep_recent_tokens=0, counter=COUNTER)[0]
    budget = region.tokens // 5
    whole = digest(parts, budget_tokens=10**9, counter=COUNTER)
    assert COUNTER.count(whole) > budget // 10  # the sanity of the set-up: a small budget is a cut
    small = digest(parts, budget_tokens=100, counter=COUNTER)
    assert COUNTER.count(small) <= 100
    lines = small.splitlines()
    assert lines[0] == "[Summary of 60 tool calls]"
    assert lines[1] == "- Read /repo/pkg/module_0.py" and lines[-1] == "- Read /repo/pkg/module_59.py"
    # Before any call gives way, each call's line is shortened: its result first.
    heads_only = COUNTER.count(
        "\n".join(["[Summary of 60 tool calls]"] + [f"- Read /repo/pkg/module_{i}.py" for i in range(60)])
    )
    short = digest(parts, budget_tokens=heads_only, counter=COUNTER).splitlines()
    assert short[1:] == [f"- Read /repo/pkg/module_{i}.py" for i in range(60)]
    assert any(line.startswith("… ") and line.endswith(" more calls …") for line in lines)
    assert COUNTER.count(digest(parts, budget_tokens=budget, counter=COUNTER)) <= budget
    # A budget below the header and the note still yields them.
    assert digest(parts, budget_tokens=1, counter=COUNTER).splitlines() == [
        "[Summary of 60 tool calls]",
        "… 60 more calls …",
    ]


def test_digest_shortens_long_arguments_at_the_end():
    command = "python - <<'EOF'\n" + "x = 1\n" * 50 + "EOF"
    out = digest([tool("done", arg={"command": command})], budget_tokens=10_000, counter=COUNTER)
    assert out.splitlines()[1] == "- Bash python - <<'EOF' … → done"


def _written_run() -> list[ToolPart]:
    """About 8,000 tokens whose bulk is what the agent sent (a document written, an edit's strings)
    and a long one-line result, with findings in the middle of a build log."""
    log = (
        [f"[build] compiling module {i:03d} of 240" for i in range(8)]
        + ["src/parser.rs:88:13: error[E0308]: mismatched types", "error: could not compile `parser`"]
        + [f"[build] linking target {i:03d}" for i in range(6)]
        + ["BUILD FAILED in 41s", "Process exited with code 101"]
        + [f"[cleanup] removed cache shard {i:03d}" for i in range(6)]
    )
    document = [
        f"# Design notes for the parser, section {i}" if i % 25 == 0 else f"Line {i} of the plan." for i in range(300)
    ]
    old = [f"    let field_{i} = parse_field(input, {i})?;" for i in range(40)]
    new = [f'    let field_{i} = parse_field(input, {i}).context("field {i}")?;' for i in range(45)]
    listing = json.dumps(
        [{"id": i, "title": f"work order {i}", "status": "open" if i % 3 else "done"} for i in range(160)]
    )
    return [
        tool("\n".join(log), arg={"command": "cargo build --release"}),
        tool(
            "File created successfully at: /srv/app/docs/DESIGN.md",
            name="Write",
            arg={"file_path": "/srv/app/docs/DESIGN.md", "content": "\n".join(document)},
        ),
        tool(
            "The file /srv/app/src/parser.rs has been updated.",
            name="Edit",
            arg={"file_path": "/srv/app/src/parser.rs", "old_string": "\n".join(old), "new_string": "\n".join(new)},
        ),
        tool(listing, name="mcp__tracker__list_work_orders", arg={}),
        tool(
            "\n".join(
                [
                    "running 10 tests",
                    *[f"test case_{i} ... ok" for i in range(10)],
                    "test result: ok. 10 passed; 0 failed",
                ]
            ),
            arg={"command": "cargo test"},
        ),
    ]


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_the_offline_digest_fills_a_fifth_by_rule_with_its_findings_in_order(model: str):
    """Before: 544 tokens for this 7,839-token region (6.9 %, gpt-4o), nothing of what was written;
    now about a fifth of what it replaces, within the budget in the session's own tokens."""
    counter = counter_for(model)
    parts = _written_run()
    msgs = session(msg("user", text("Fix the build.")), msg("assistant", *parts), msg("user", text("ok")))
    region = find_regions(msgs, keep_recent_tokens=0, counter=counter)[0]
    replaced = region.tokens - count_in_view(parts[0].model_copy(update={"view_text": ""}), counter)
    assert 7_000 <= replaced <= 11_000, replaced  # the set-up: an 8,000-token region, nearly all replaced
    out = plan_regions(
        msgs, total_tokens=view_cost(msgs), target_tokens=0, keep_recent_tokens=0, counter=counter, now=NOW
    )
    first = out.marks[0].part.view_text
    tokens = counter.count(first)
    assert replaced // 5 * 0.9 <= tokens <= replaced // 5, (tokens, replaced)  # fills the budget, never over it
    lines = first.splitlines()
    # Errors and verdicts, exit codes included, wherever they sit in a long output.
    for finding in (
        "src/parser.rs:88:13: error[E0308]: mismatched types",
        "error: could not compile `parser`",
        "BUILD FAILED in 41s",
        "Process exited with code 101",
        "test result: ok. 10 passed; 0 failed",
    ):
        assert any(finding in line for line in lines), finding

    # The build's output from its first line to its last, in order.
    def body(call: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(call))
        end = next((i for i, line in enumerate(lines) if i > start and line.startswith("- ")), len(lines))
        return lines[start:end]

    build = body("- Bash cargo build --release → ")[1:]
    assert build[0] == "  [build] compiling module 000 of 240" and build[-1] == "  [cleanup] removed cache shard 005"
    shown = [line.strip() for line in build if not line.strip().startswith("…")]
    assert shown == [line for line in _written_run()[0].output.splitlines() if line in shown]  # original order
    # What the agent sent, which leaves the view with the calls' inputs: the document (its head and
    # tail, with what was left out marked) and the edit.
    document = body("- Write /srv/app/docs/DESIGN.md → ")
    assert document[1:3] == ["  content:", "    # Design notes for the parser, section 0"]
    assert document[-1] == "    Line 299 of the plan." and "    … " in "".join(document)
    assert any(line.startswith("    … ") and line.endswith(" more lines …") for line in document)
    assert "  old_string:" in lines and "  new_string:" in lines
    assert any('context("field 44")' in line for line in lines)  # the edit's last line
    # A one-line result of 15,000 characters shows its beginning and its end, cut where marked.
    orders = body("- mcp__tracker__list_work_orders → ")
    assert orders[0].endswith(" …") and orders[1].startswith("  … ") and orders[-1].endswith('"}]')
    # The first call's input stays in view: the digest does not repeat it.
    assert first.count("cargo build --release") == 1
    assert digest(parts, budget_tokens=replaced // 5, counter=counter) == first  # deterministic


def test_what_the_agent_wrote_is_digested_too():
    """Before: 129 tokens for this 8,736-token region (1.5 %: one line a call, as a real session's
    8,000-token region of written documents got 132); now a fifth, the documents' heads and tails."""
    documents = [
        tool(
            f"File created successfully at: /srv/notes/PLAN_{n}.md",
            name="Write",
            arg={
                "file_path": f"/srv/notes/PLAN_{n}.md",
                "content": "\n".join(
                    f"- step {i} of plan {n}: migrate table t{i} to the new schema" for i in range(120)
                ),
            },
        )
        for n in range(4)
    ]
    parts = [tool("", arg={"command": "mkdir -p /srv/notes"}), *documents]
    msgs = session(msg("user", text("plan it")), msg("assistant", *parts), msg("user", text("ok")))
    result = plan(msgs, target=0)
    first = result.marks[0].part.view_text
    replaced = result.tokens_before - result.tokens_after + COUNTER.count(first)
    assert 0.18 <= COUNTER.count(first) / replaced <= 0.2, (COUNTER.count(first), replaced)
    for n in range(4):
        assert f"- step 0 of plan {n}: migrate table t0 to the new schema" in first
        assert f"- step 119 of plan {n}: migrate table t119 to the new schema" in first


def test_a_rule_digest_is_bounded_by_its_setting():
    parts = [tool(big(3_000), arg={"command": f"cat log_{i}.txt"}) for i in range(4)]  # about 60,000 tokens
    msgs = session(msg("user", text("go")), msg("assistant", *parts), msg("user", text("ok")))
    for cap in (8_000, 2_000):
        result = plan(msgs, target=0, max_digest_tokens=cap)
        assert cap * 0.9 <= COUNTER.count(result.marks[0].part.view_text) <= cap
    # Within the cap, a fifth of what the digest replaces.
    assert COUNTER.count(plan(msgs, target=0, max_digest_tokens=10**6).marks[0].part.view_text) > 8_000


# -- properties ------------------------------------------------------------------------------------

_words = st.text(alphabet="abcdefgh ij\n", min_size=0, max_size=60)


@st.composite
def _part(draw: st.DrawFn) -> Part:
    kind = draw(st.sampled_from(["text", "blank", "reasoning", "tool", "tool", "tool", "tool"]))
    if kind == "text":
        return TextPart(text=draw(_words) + "x")
    if kind == "blank":
        return TextPart(text="\n")
    if kind == "reasoning":
        return ReasoningPart(text=draw(_words), signature="sig")
    state = draw(st.sampled_from(["completed", "completed", "error", "pending"]))
    out = draw(_words) * draw(st.integers(1, 40))
    summarized = draw(st.integers(0, 5)) == 0
    return tool(
        out,
        name=draw(st.sampled_from(["Bash", "Read"])),
        arg={"command": draw(_words)},
        state=state,
        view_text="[Summary of 1 tool call]" if summarized and state != "pending" else None,
    )


@st.composite
def _conversation(draw: st.DrawFn) -> list[Message]:
    n = draw(st.integers(1, 12))
    messages = []
    for _ in range(n):
        role = draw(st.sampled_from(["user", "assistant", "assistant"]))
        parts = draw(st.lists(_part(), min_size=1, max_size=5)) if role == "assistant" else [text("go")]
        messages.append(msg(role, *parts, summary=role == "assistant" and draw(st.integers(0, 8)) == 0))
    return session(*messages)


def _pinned(messages: Sequence[Message], keep: int) -> set[tuple[str, int]]:
    """The newest parts whose newer neighbours cost less than `keep` in view."""
    out, seen = set(), 0
    for m in reversed(messages):
        for i in range(len(m.parts) - 1, -1, -1):
            if seen >= keep:
                return out
            out.add((m.id, i))
            seen += count_in_view(m.parts[i], COUNTER)
    return out


def check_invariants(msgs: list[Message], result: RegionPlan, total: int, keep: int, target: int) -> None:
    by_id = {m.id: m for m in msgs}
    pinned = _pinned(msgs, keep)
    for mark in result.marks:
        message = by_id[mark.message_id]
        original = message.parts[mark.index]
        assert isinstance(original, ToolPart) and original.is_finished and original.view_text is None
        assert not message.is_compaction and (mark.message_id, mark.index) not in pinned
        # The call stays: same id, name, state and stored output; only view fields change.
        changed = {k for k in ToolPart.model_fields if getattr(original, k) != getattr(mark.part, k)}
        assert changed <= {"view_text", "compacted_at", "input_cleared"}
        assert mark.part.view_text  # never an empty result
        assert mark.freed == count_in_view(original, COUNTER) - count_in_view(mark.part, COUNTER)
    assert len({(m.message_id, m.index) for m in result.marks}) == len(result.marks)
    after = apply(msgs, result)
    assert (
        result.tokens_after
        == result.tokens_before - sum(m.freed for m in result.marks)
        == total - (view_cost(msgs) - view_cost(after))
    )
    assert result.reached_target == (result.tokens_after <= target)
    again = plan_regions(
        after,
        total_tokens=result.tokens_after,
        target_tokens=target,
        keep_recent_tokens=keep,
        counter=COUNTER,
        now=NOW + 1,
    )
    assert again.marks == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_conversation(), st.integers(0, 400), st.floats(0.0, 1.1), st.booleans())
def test_property_marks_only_compactable_unpinned_parts_and_idempotent(msgs, keep, share, fail):
    total = view_cost(msgs) + 50  # a system prompt
    target = int(total * share)
    summarize = (lambda parts, budget: None) if fail else None
    result = plan_regions(
        msgs,
        total_tokens=total,
        target_tokens=target,
        keep_recent_tokens=keep,
        counter=COUNTER,
        now=NOW,
        summarize=summarize,
    )
    check_invariants(msgs, result, total, keep, target)
    if fail:
        assert result.regions_summarized == 0
    assert {m.message_id for m in result.marks} <= {m.id for m in msgs}


# -- corpus ----------------------------------------------------------------------------------------

LONG = corpus_params(
    "normalized/*.jsonl", where=lambda p: len(p.read_text("utf-8")) > 100_000, id=lambda p: p.name[:60]
)


def _wire(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        role = line["role"]
        if role == "user" and line.get("name") in ("system", "developer"):
            role = line["name"]
        entry: dict[str, Any] = {"role": role, "content": line.get("content") or ""}
        if line.get("tool_calls"):
            entry["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in line["tool_calls"]
            ]
        if role == "tool":
            entry["tool_call_id"] = line["tool_call_id"]
        out.append(entry)
    return out


@pytest.mark.parametrize("path", LONG)
def test_corpus_plans_keep_invariants_and_render_valid(path: Path):
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    parsed = parse(_wire(lines), "openai").messages
    msgs = [count_message(m.model_copy(update={"id": f"m{i:06d}", "seq": i}), COUNTER) for i, m in enumerate(parsed)]
    total = sum(m.in_view_tokens for m in msgs)
    assert total == view_cost(msgs)
    target = total // 2
    result = plan_regions(
        msgs, total_tokens=total, target_tokens=target, keep_recent_tokens=20_000, counter=COUNTER, now=NOW
    )
    check_invariants(msgs, result, total, 20_000, target)
    if find_regions(msgs, keep_recent_tokens=20_000, counter=COUNTER):
        assert result.tokens_after < total
    after = apply(msgs, result)
    assert_anthropic_valid(render([], after, "anthropic"))
    assert_openai_valid(render([], after, "openai"))


_lines = st.text(alphabet="abc xyz,:0123\n", min_size=0, max_size=900)


@st.composite
def _digested_call(draw: st.DrawFn) -> ToolPart:
    line = st.sampled_from(["ok", "E   AssertionError: boom", "3 failed, 1 passed", "Exit code 1", "src/a.py:3: x"])
    output = "\n".join(draw(st.lists(st.one_of(_lines, line), max_size=30)))
    arguments = draw(
        st.dictionaries(st.sampled_from(["command", "content", "old_string", "limit", "todos"]), _lines, max_size=3)
    )
    return tool(output, arg=arguments, state=draw(st.sampled_from(["completed", "error"])))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_digested_call(), min_size=1, max_size=8), st.integers(0, 2_000))
def test_property_a_digest_keeps_to_its_budget_and_to_the_order_of_its_lines(parts: list[ToolPart], budget: int):
    parts = [part.model_copy(update={"name": f"T{i}"}) for i, part in enumerate(parts)]
    out = digest(parts, budget_tokens=budget, counter=COUNTER)
    floor = COUNTER.count(f"[Summary of {len(parts)} tool calls]\n… {len(parts)} more calls …")
    assert COUNTER.count(out) <= max(budget, floor)
    assert digest(parts, budget_tokens=budget, counter=COUNTER) == out
    # Under each call, the result's lines it shows keep their original order.
    for part in parts:
        head = next((i for i, line in enumerate(out.splitlines()) if line.startswith(f"- {part.name} ")), None)
        if head is None:
            continue
        original = [line.strip() for line in part.result_text.splitlines()]
        body = []
        for line in out.splitlines()[head + 1 :]:
            if line.startswith("- ") or line.startswith("… "):
                break
            if line.startswith("  ") and not line.startswith("    ") and not line.strip().startswith("…"):
                body.append(line.strip())
        found = [original.index(line) for line in body if line in original]
        assert found == sorted(found) or len(set(found)) < len(found)
