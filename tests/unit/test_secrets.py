"""Secrets never enter what contextfold derives from a history (issue 27, item 2): the detector on a
seeded set of realistic fake secrets in many syntaxes (`benchmarks/_secrets.py`), the near misses
that must survive unchanged (commit ids, digests, paths, code that reads a secret), learned values,
and the redacted copy of a history a summary is written from — the stored messages untouched.
"""

from __future__ import annotations

import pytest
from _histories import assistant, call, stored, user
from _secrets import NEAR_MISSES, leaks, seeded_secrets

from contextfold.compaction.extractive import build_summary
from contextfold.compaction.secrets import REDACTED, find, redact, redact_history, redact_texts
from contextfold.domain import Message
from contextfold.hooks.handover import handover
from contextfold.tokens.counting import counter_for

SEEDS = range(12)
"""Fresh values for each: a rule that held by luck on one random string would fail on another."""


@pytest.mark.parametrize("seed", SEEDS)
def test_every_seeded_secret_is_redacted_in_its_place(seed: int) -> None:
    seeded = [s for s in seeded_secrets(seed) if s.label != "a learned value printed alone"]
    for item in seeded:
        out = redact(item.text)
        assert not leaks(out, [item]), f"{item.label}: {out!r}"
        assert REDACTED in out, item.label


@pytest.mark.parametrize("seed", SEEDS)
def test_a_value_found_in_its_place_is_redacted_where_it_stands_alone(seed: int) -> None:
    seeded = seeded_secrets(seed)
    texts = redact_texts([s.text for s in seeded])
    assert not leaks("\n".join(texts), seeded)


@pytest.mark.parametrize(("label", "text"), NEAR_MISSES, ids=[label for label, _ in NEAR_MISSES])
def test_near_misses_come_through_unchanged(label: str, text: str) -> None:
    assert redact(text) == text
    assert find(text) == []


def test_what_names_the_secret_is_kept_only_its_value_goes() -> None:
    assert redact("export DB_PASSWORD=Tr0ub4dor-and-3") == "export DB_PASSWORD=[redacted]"
    assert redact("postgres://app:S3cretPassw0rd@db:5432/app") == "postgres://app:[redacted]@db:5432/app"
    assert redact('curl -H "Authorization: Bearer abcDEF123456ghiJKL789"') == (
        'curl -H "Authorization: Bearer [redacted]"'
    )


def test_redaction_is_idempotent() -> None:
    text = "\n".join(s.text for s in seeded_secrets(3))
    once = redact(text)
    assert redact(once) == once


def history(seed: int) -> list[Message]:
    """A short session with the seeded secrets where a summary reads: the user's words, a command,
    an output, and a file the agent wrote."""
    seeded = seeded_secrets(seed)
    said = "\n".join(s.text for s in seeded if s.where == "user")
    command = " && ".join(s.text for s in seeded if s.where == "command")
    output = "\n\n".join(s.text for s in seeded if s.where == "output")
    return stored(
        [
            user("Deploy the app to staging and fix the failing health check.\n" + said),
            assistant("Checking the settings.", call("Bash", {"command": command}, output)),
            assistant(
                "Writing the env file.",
                call("Write", {"file_path": "/srv/app/.env", "content": output}, "File created successfully"),
            ),
            assistant(
                "", call("Bash", {"command": "pytest -q tests/test_health.py"}, "E   KeyError: 'DB_HOST'\n1 failed")
            ),
            user("Keep the deploy script idempotent."),
        ]
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_the_redacted_history_holds_no_secret_and_the_original_is_untouched(seed: int) -> None:
    messages = history(seed)
    before = [m.model_dump() for m in messages]
    redacted, _ = redact_history(messages)
    text = "\n".join(m.model_dump_json() for m in redacted)
    assert not leaks(text, seeded_secrets(seed))
    assert [m.model_dump() for m in messages] == before  # the stored history keeps what the user wrote
    assert [m.seq for m in redacted] == [m.seq for m in messages]


@pytest.mark.parametrize("seed", SEEDS)
def test_neither_a_summary_nor_a_handover_gives_a_seeded_secret_away(seed: int) -> None:
    redacted, _ = redact_history(history(seed))
    counter = counter_for("gpt-4o")
    summary = build_summary(redacted, previous=None, counter=counter, budget_tokens=4_000)
    assert not leaks(summary, seeded_secrets(seed))
    assert "Keep the deploy script idempotent." in summary and "/srv/app/.env" in summary  # the rest stays
    given = handover(history(seed), session_id="s", counter=counter, budget=2_000)
    assert given.text and not leaks(given.text, seeded_secrets(seed))
    assert "Deploy the app to staging" in given.text


def test_the_history_behind_another_agents_summary_is_redacted_too() -> None:
    """Compacting behind an imported summary reads the stored history it stands for
    (`Plan.with_earlier`): that history, the imported summary and the head are all redacted, and a
    value learned in the earlier history is redacted where it stands alone in the head."""
    from contextfold.compaction.engine import plan_compaction
    from contextfold.domain import CompactionPart, TextPart
    from contextfold.tokens.counting import count_message

    seeded = seeded_secrets(21)
    phoenix = next(s for s in seeded if s.label == "Phoenix secret_key_base").secrets[0]
    earlier = history(21)
    marker = Message(role="user", parts=[CompactionPart(auto=True)], seq=10)
    imported = Message(
        role="assistant",
        summary=True,
        parts=[TextPart(text=f"Summary: the user gave SECRET_KEY={phoenix}")],
        metadata={"imported_from": "claude-code"},
        seq=11,
    )
    head = stored([user("Go on with the deploy."), assistant("", call("Bash", {"command": f"echo {phoenix}"}, "ok"))])
    head = [m.model_copy(update={"seq": m.seq + 11}) for m in head]
    tail = [
        m.model_copy(update={"seq": 20 + i}) for i, m in enumerate([user("Thanks, now the docs."), assistant("Done.")])
    ]
    counter = counter_for("gpt-4o")
    view = [count_message(m, counter) for m in [marker, imported, *head, *tail]]
    plan = plan_compaction(view, tail_budget=200, tail_turns=1, usable=100_000, counter=counter)
    plan = plan.with_earlier(earlier + [marker, imported])
    derived = "\n".join(m.model_dump_json() for m in [*plan.earlier, *plan.head]) + (plan.previous or "")
    assert plan.earlier and not leaks(derived, seeded), leaks(derived, seeded)
    summary = build_summary(
        plan.history, previous=plan.previous, counter=counter, budget_tokens=3_000, facts=plan.facts
    )
    assert not leaks(summary, seeded) and "Deploy the app to staging" in summary


def test_a_random_value_that_starts_like_a_variable_is_still_a_secret() -> None:
    assert redact("'password' => '$vdma9LWuVH6qXuz',") == "'password' => '[redacted]',"
    assert redact("docker login --password=%U9ayNRkgbmBqtzRkst9wtWD x") == "docker login --password=[redacted] x"
    for named in ("password: $DB_PASSWORD", "PGPASSWORD=%PGPASS% psql", "token: '%(token)s'", "API_KEY=sk-ant-..."):
        assert redact(named) == named
