"""contextfold as a library inside your own agent harness: only `from contextfold import …`.

A short scripted session: the user asks, the agent runs a test suite whose 40,000-line output is
spilled at ingest (the model sees a preview and the output's id), the agent reads the failure
back with `read_output`, then the older history is compacted into a summary offline. Each step
prints what a harness would look at:

    python examples/library.py      # a throwaway data home, removed at the end (or $CONTEXTFOLD_HOME, kept)
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from contextfold import ContextService, WireMessage, load_settings

SESSION = "example-library"


def test_output() -> str:
    lines = [f"tests/test_api.py::test_case_{i} PASSED" for i in range(40_000)]
    lines[27_182] = "tests/test_api.py::test_case_27182 FAILED - KeyError: 'user_id'"
    return "\n".join(lines)


def turns() -> list[list[WireMessage]]:
    """The conversation in Anthropic's format, one batch per step of the harness."""
    return [
        [{"role": "user", "content": "Run the test suite and fix whatever fails. Do not touch the migrations."}],
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Running the tests."},
                    {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "pytest -q"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": test_output()}]},
        ],
    ]


async def run(home: str) -> None:
    settings = load_settings({"home": home})
    async with await ContextService.open(settings) as service:
        await service.open_session(SESSION, model="claude-sonnet-4-5", title="library example")
        for batch in turns():
            appended = await service.append(SESSION, batch, format="anthropic")
        spilled = appended.spilled[0]
        print(f"spilled: {spilled.output_id} ({spilled.lines:,} lines); the model sees a preview")

        found = await service.read_output(spilled.output_id, pattern="FAILED")
        print(f"read_output(pattern='FAILED') → {found.matches} match(es): {found.text.strip()}")

        await service.append(
            SESSION,
            [{"role": "assistant", "content": "test_case_27182 fails with KeyError 'user_id'; fixing api.py next."}],
            format="anthropic",
        )
        status = await service.status(SESSION)
        print(f"status: {status.tokens_in_view:,} of {status.usable:,} usable tokens, state {status.state}")

        compacted = await service.compact(SESSION, summarizer="extractive")
        print(f"compact: {compacted.tokens_before:,} → {compacted.tokens_after:,} tokens in view")

        context = await service.get_context(SESSION, format="anthropic")
        print(f"get_context: {len(context.messages)} messages, {context.tokens:,} tokens, ready to send")


def main() -> None:
    if os.environ.get("CONTEXTFOLD_HOME"):
        asyncio.run(run(os.environ["CONTEXTFOLD_HOME"]))
        return
    with tempfile.TemporaryDirectory(prefix="contextfold-example-") as home:
        asyncio.run(run(home))


if __name__ == "__main__":
    main()
