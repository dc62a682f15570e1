"""History search (`search`): full-text, ranked, over one session, a project or all of a
tenant's sessions, within a time window; expand; hostile queries. On SQLite and on a real
PostgreSQL, through the one service entry point the MCP tool, the CLI and the web UI call."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from test_view_cache import _call, _turns

from contextfold.config import load_settings
from contextfold.errors import InvalidInput, NotFoundError
from contextfold.policy.recall import parse_terms, ranked, time_window, window
from contextfold.service.facade import ContextService
from contextfold.store import SearchHit

pytestmark = pytest.mark.anyio

WORDS = (
    "Rename my_snake_case_helper in src/pkg/path/to/file.py; pylint reports E1101 on HttpRetryPolicy. "
    "日本語の全文検索テスト"
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])])
async def service(request: pytest.FixtureRequest, tmp_path: Path):
    overrides: dict[str, object] = {"home": tmp_path}
    if request.param == "postgres":
        overrides["database"] = request.getfixturevalue("pg_url")
    svc = await ContextService.open(load_settings(overrides, environ={}))
    try:
        yield svc
    finally:
        await svc.close()


def _refs(page) -> list[tuple[str, str]]:
    return [(h.session_id, h.ref) for h in page.hits]


async def test_identifiers_paths_error_codes_and_cjk_are_found_by_any_piece(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": WORDS}])
    await service.append("s", [{"role": "assistant", "content": "Looking at the helper now."}])
    for query in (
        "snake_case",
        "my_snake_case_helper",
        "httpretrypolicy",
        "RetryPolicy",
        "path/to/file.py",
        "e1101",
        "全文検索",
        "E1101 pylint Rename",  # any order: every word, wherever it is
    ):
        page = await service.search(query, session_id="s")
        assert _refs(page) == [("s", "m1")], query
        assert "**" in page.hits[0].text, query
    assert (await service.search("helper", session_id="s")).hits[0].ref in ("m1", "m2")
    assert (await service.search("nowhere_to_be_found", session_id="s")).hits == []


async def test_a_snake_case_underscore_is_not_a_wildcard(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "the value is myXsnake here"}])
    assert (await service.search("my_snake", session_id="s")).hits == []
    assert (await service.search("100%", session_id="s")).hits == []


async def test_compacted_messages_are_found_and_say_which_bullet_cites_them(service):
    await service.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await service.append("s", [{"role": "user", "content": "Never touch the vendored `yaml` package."}])
    await service.append(
        "s",
        [
            _call("boom", "pytest tests/test_io.py"),
            {"role": "tool", "tool_call_id": "boom", "content": "E   KeyError: 'checksum_v2'\nFAILED test_roundtrip"},
        ],
    )
    await service.append("s", _turns(1, 10))
    assert (await service.compact("s", summarizer="extractive")).compacted
    page = await service.search("checksum_v2 KeyError", session_id="s")
    assert page.hits and page.hits[0].hidden
    user = await service.search("vendored yaml", session_id="s")
    assert user.hits[0].ref == "m1" and user.hits[0].hidden
    assert any("[m1" in bullet for bullet in user.hits[0].cited_by), user.hits[0]
    # The bullet's citations, read back in one call.
    bullet = user.hits[0].cited_by[0]
    back = await service.search(expand=bullet.split(": ", 1)[1], session_id="s")
    assert back.hits[0].ref == "m1" and "vendored `yaml`" in back.hits[0].text
    around = await service.search(expand="m3", around=1, session_id="s")
    assert [h.ref for h in around.hits] == ["m2", "m3", "m4"]


async def test_words_not_all_in_one_message_fall_back_to_any_and_say_so(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "deploy the frontend"}])
    await service.append("s", [{"role": "assistant", "content": "the database migration ran"}])
    page = await service.search("frontend database", session_id="s")
    assert {h.ref for h in page.hits} == {"m1", "m2"} and "some of them" in page.notes[0]
    either = await service.search("frontend OR database", session_id="s")
    assert {h.ref for h in either.hits} == {"m1", "m2"} and not either.notes


async def test_a_message_with_some_of_the_words_follows_when_few_hold_them_all(service):
    """A build log happens to hold every word; the user's request wrote one of them differently.
    With fewer hits than the page asks for, the messages holding some of the words follow."""
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "please squash the alembic migration for invoices"}])
    await service.append(
        "s", [{"role": "assistant", "content": "log: alembic migrations squash ok; invoices table " + "x " * 400}]
    )
    page = await service.search("alembic migrations squash invoices", session_id="s")
    assert [h.ref for h in page.hits] == ["m2", "m1"], page.notes
    assert page.notes == ["1 message holds every word and comes first; the hits after it hold some of them"]
    assert [
        h.ref for h in (await service.search("alembic migrations squash invoices", session_id="s", limit=1)).hits
    ] == ["m2"]  # a page's worth hold every word: nothing else is added
    second = await service.search("alembic migrations squash invoices", session_id="s", limit=1, offset=1)
    assert second.hits == []


async def test_ranking_puts_the_message_about_it_first(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": "x " * 3000 + " one mention of retrybudget"}])
    await service.append("s", [{"role": "assistant", "content": "retrybudget: the retrybudget caps retries"}])
    assert (await service.search("retrybudget", session_id="s")).hits[0].ref == "m2"


INSTRUCTION = (
    "Move the invoice export into nightly_batch_runner and keep the csv_delimiter setting as it is: "
    "the finance team opens those files every morning before nine, and their macros expect semicolons."
)


async def test_the_users_instruction_ranks_before_the_copies_of_it(service, tmp_path):
    """The user's instruction, then what repeats its words: the assistant's echo (shorter, so BM25
    alone put it first), the tool calls that carry them out, and a summary quoting it; in the
    same session and, as Claude Code's continuation summary of it, in a later one."""
    await service.open_session("s", model="gpt-4o", settings={"context_window": 24_000})
    await service.append("s", [{"role": "user", "content": INSTRUCTION}])
    await service.append("s", [{"role": "assistant", "content": "On it: nightly_batch_runner, csv_delimiter kept."}])
    await service.append(
        "s",
        [
            _call("mv", "git mv export.py nightly_batch_runner/ && grep -n csv_delimiter nightly_batch_runner/*.py"),
            {"role": "tool", "tool_call_id": "mv", "content": "nightly_batch_runner/export.py:3: csv_delimiter = ';'"},
        ],
    )
    await service.append("s", _turns(1, 10))
    assert (await service.compact("s", summarizer="extractive")).compacted
    records = [
        {"type": "user", "uuid": "c-1", "parentUuid": None, "sessionId": "c", "cwd": "/p", "isSidechain": False,
         "isCompactSummary": True, "timestamp": "2026-11-21T09:00:00Z",
         "message": {"role": "user", "content": "This session is being continued from a previous conversation. "
                     f"All user messages:\n- {INSTRUCTION}\n- nightly_batch_runner csv_delimiter done?"}},
        {"type": "assistant", "uuid": "c-2", "parentUuid": "c-1", "sessionId": "c", "cwd": "/p", "isSidechain": False,
         "timestamp": "2026-11-21T09:00:05Z",
         "message": {"id": "msg-c", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "Continuing."}]}},
    ]  # fmt: skip
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    await service.import_transcript(path, session_id="c")
    for query in ("nightly_batch_runner csv_delimiter", "csv_delimiter", "invoice nightly_batch_runner"):
        page = await service.search(query, within="all")
        assert _refs(page)[0] == ("s", "m1"), (query, _refs(page))
    copies = await service.search("nightly_batch_runner csv_delimiter", within="all")
    assert {("s", "m2"), ("s", "m3"), ("c", "m2")} <= set(_refs(copies)[1:])  # still found, after it
    page = await service.search("nightly_batch_runner csv_delimiter", session_id="s")
    assert any("[m1" in bullet for bullet in page.hits[0].cited_by), page.hits[0]  # the summary points to it


async def test_pages_past_the_ranked_pool_hold_every_hit_once(service):
    from contextfold.service.search import RANK_POOL

    await service.open_session("s", model="gpt-4o")
    count = RANK_POOL + 25
    await service.append(
        "s",
        [
            {"role": "user" if i % 3 == 0 else "assistant", "content": f"poolword {i} " + "pad " * (i % 7)}
            for i in range(count)
        ],
    )
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await service.search("poolword", session_id="s", limit=20, offset=offset)
        seen += [h.ref for h in page.hits]
        offset = page.next_offset
    assert sorted(seen) == sorted(f"m{i}" for i in range(1, count + 1))


async def _project_session(service: ContextService, tmp_path: Path, sid: str, cwd: str, text: str) -> None:
    """A session made as the hooks make one: by importing the agent's transcript, which says its cwd."""
    records = [
        {"type": "user", "uuid": f"{sid}-1", "parentUuid": None, "sessionId": sid, "cwd": cwd, "isSidechain": False,
         "timestamp": "2026-11-20T10:00:00Z", "message": {"role": "user", "content": text}},
        {"type": "assistant", "uuid": f"{sid}-2", "parentUuid": f"{sid}-1", "sessionId": sid, "cwd": cwd,
         "isSidechain": False, "timestamp": "2026-11-20T10:00:05Z",
         "message": {"id": f"msg-{sid}", "role": "assistant", "model": "claude-sonnet-4-5",
                     "content": [{"type": "text", "text": "noted"}]}},
    ]  # fmt: skip
    path = tmp_path / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    await service.import_transcript(path, session_id=sid)


async def test_scopes_session_project_all_and_never_another_tenant(service, tmp_path):
    alice, bob = service.tenant("alice"), service.tenant("bob")
    await _project_session(alice, tmp_path, "a1", "/work/shop", "the zebracorn decision: use sqlite")
    await _project_session(alice, tmp_path, "a2", "/work/shop", "zebracorn follow-up in the same project")
    await _project_session(alice, tmp_path, "a3", "/work/other", "zebracorn in another project")
    await _project_session(bob, tmp_path, "a1", "/work/shop", "zebracorn secret of bob")
    await _project_session(bob, tmp_path, "b9", "/work/shop", "zebracorn secret of bob, again")
    hits = await alice.search("zebracorn", session_id="a1")
    assert {h.session_id for h in hits.hits} == {"a1"}
    project = await alice.search("zebracorn", session_id="a1", within="project")
    assert {h.session_id for h in project.hits} == {"a1", "a2"}
    assert {h.session_id for h in (await alice.search("zebracorn", project="/work/other", within="project")).hits} == {
        "a3"
    }
    everything = await alice.search("zebracorn", within="all", limit=50)
    assert {h.session_id for h in everything.hits} == {"a1", "a2", "a3"}
    # Bob's words never reach Alice, by any query, scope or session id.
    for query in ("secret of bob", "bob", "zebracorn OR secret", '"secret of"'):
        for kwargs in ({"within": "all"}, {"session_id": "a1"}, {"session_id": "a1", "within": "project"}):
            page = await alice.search(query, **kwargs)  # type: ignore[arg-type]
            assert all("bob" not in h.text for h in page.hits), (query, kwargs)
    with pytest.raises(NotFoundError):
        await alice.search("zebracorn", session_id="b9")
    with pytest.raises(NotFoundError):
        await alice.search(expand="m1", session_id="b9")
    assert all("bob" not in h.text for h in (await alice.search(expand="m1", session_id="a1")).hits)


async def test_time_windows_use_the_messages_stored_times(service, tmp_path):
    await _project_session(service, tmp_path, "old", "/p", "quartzlamp from november twentieth")
    await service.open_session("new", model="gpt-4o")
    await service.append("new", [{"role": "user", "content": "quartzlamp from today"}])
    everything = await service.search("quartzlamp", within="all")
    assert {h.session_id for h in everything.hits} == {"old", "new"}
    day = await service.search("quartzlamp", within="all", since="2026-11-20", until="2026-11-20")
    assert {h.session_id for h in day.hits} == {"old"}
    recent = await service.search("quartzlamp", within="all", since="last 2 hours")
    assert {h.session_id for h in recent.hits} == {"new"}
    assert (await service.search("quartzlamp", within="all", until="2026-11-19")).hits == []


async def test_pages_and_the_token_bound(service):
    await service.open_session("s", model="gpt-4o")
    await service.append(
        "s", [{"role": "user", "content": f"pagingword number {i} " + "filler " * 200} for i in range(30)]
    )
    first = await service.search("pagingword", session_id="s", limit=5)
    assert len(first.hits) == 5 and first.next_offset == 5
    second = await service.search("pagingword", session_id="s", limit=5, offset=first.next_offset)
    assert not {h.ref for h in first.hits} & {h.ref for h in second.hits}
    wide = await service.search("pagingword", session_id="s", limit=50)
    counter = service._scope.counter("default", service._scope.settings)
    assert len(wide.hits) == 30 and wide.next_offset is None  # snippets are short
    assert counter.count(wide.text) <= service._scope.settings.search_answer_tokens
    # Whole messages are not: 30 of about 200 tokens each pass the bound, which cuts and says so.
    expanded = await service.search(expand="m1-m30", session_id="s")
    assert counter.count(expanded.text) <= service._scope.settings.search_answer_tokens
    assert 0 < len(expanded.hits) < 30 and "search_answer_tokens" in expanded.notes[-1]


async def test_hostile_queries_answer_with_one_line(service):
    await service.open_session("s", model="gpt-4o")
    await service.append("s", [{"role": "user", "content": 'he said "quote" (NEAR) AND * OR - ^ col:umn'}])
    # Query syntax is never passed through: any of this is just text.
    for query in ('"unbalanced', "NEAR(a b)", "col:umn", "a AND * OR", ")))(((", "^start", "quote\"'", "NOT quote"):
        await service.search(query + " said", session_id="s")
    assert (await service.search('"quote" (NEAR)', session_id="s")).hits
    cases = {
        "x" * 1_000_000: "search_max_query_chars",
        " OR ".join(f"w{i}x" for i in range(100)): "search_max_terms",
        "a b": "shorter than 3",
        "   ": "give words",
    }
    for query, says in cases.items():
        with pytest.raises(InvalidInput) as raised:
            await service.search(query, session_id="s")
        assert says in str(raised.value) and "\n" not in str(raised.value)
    await service.append("s", [{"role": "user", "content": "a" * 50_000 + "b"}])
    started = time.monotonic()
    with pytest.raises(InvalidInput) as raised:
        await service.search("(a+)+$", mode="regex", session_id="s")
    assert "pattern" in str(raised.value)
    assert time.monotonic() - started < 30


def test_time_phrases():
    now = 1_795_000_000.0  # 2026-11-19 ...
    day = time_window("2026-11-20", now=now, field="since")
    assert day[1] - day[0] == 86400
    yesterday = time_window("yesterday", now=now, field="since")
    today = time_window("today", now=now, field="since")
    assert yesterday[1] == today[0] and today[0] <= now < today[1]
    assert time_window("last 2 hours", now=now, field="since") == (now - 7200, now)
    assert time_window("3 days ago", now=now, field="since")[0] == now - 3 * 86400
    assert time_window("past week", now=now, field="since")[0] == now - 7 * 86400
    assert time_window("90 minutes", now=now, field="since")[0] == now - 5400
    assert time_window("1795000000", now=now, field="since") == (now, now)
    assert (
        time_window("2026-11-20T14:00:00+01:00", now=now, field="since")[0]
        == time_window("2026-11-20T13:00Z", now=now, field="since")[0]
    )
    assert window("yesterday", "yesterday", now=now) == yesterday
    for bad in ("someday", "last blue moon", "", "nan", "inf", "1e300"):
        with pytest.raises(InvalidInput):
            time_window(bad, now=now, field="since")
    with pytest.raises(InvalidInput):
        window("today", "yesterday", now=now)


def test_terms():
    assert parse_terms('a "two  words" c_d c_D', max_chars=100, max_terms=5).terms == ("a", "two words", "c_d")
    assert parse_terms("x1y OR z2w", max_chars=100, max_terms=5).any_term
    assert parse_terms("(foo.py),", max_chars=100, max_terms=5).terms == ("foo.py",)


def test_ranking_weighs_who_wrote_the_words():
    hit = partial(SearchHit, "s", "id", 1, "assistant", 0.0, False)
    tool, reply = hit(-3.0), hit(-2.9, prose=True)
    user, summary = (
        replace(hit(-2.0, prose=True), role="user"),
        replace(hit(-5.0, prose=True), role="user", summary=True),
    )
    assert ranked([tool, reply, user, summary]) == [user, tool, reply, summary]  # -4, -3, -2.9, -2.5
    assert ranked([reply, tool]) == [tool, reply]  # the store's relevance decides the rest
    far = replace(user, score=-1.0)  # a user's text far less relevant stays behind
    assert ranked([tool, far]) == [tool, far]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow])]
)
async def test_a_query_matching_too_much_stops_at_its_time_limit_and_the_next_one_runs(
    tmp_path, backend: str, request: pytest.FixtureRequest
):
    # PostgreSQL's statement_timeout counts whole milliseconds: 1 ms, against a query that reads and
    # ranks 20,000 matching messages (tens of milliseconds at the least).
    overrides: dict[str, object] = {"home": tmp_path, "search_timeout_seconds": 1e-6}
    if backend == "postgres":
        overrides["database"] = request.getfixturevalue("pg_url")
    service = await ContextService.open(load_settings(overrides, environ={}))
    try:
        await service.open_session("s", model="gpt-4o")
        for batch in range(10 if backend == "postgres" else 1):
            await service.append(
                "s", [{"role": "user", "content": f"common words everywhere {batch} {i}"} for i in range(2_000)]
            )
        with pytest.raises(InvalidInput) as raised:
            await service.search("common words", session_id="s")
        assert "search_timeout_seconds" in str(raised.value)
        # The connection is free again: everything else goes on.
        assert (await service.status("s")).tokens_in_view > 0
    finally:
        await service.close()


async def test_a_windows_path_typed_as_written_finds_the_tool_call_that_used_it(service):
    path = "C:\\Users\\me\\proj\\gen_word.py"
    await service.open_session("w", model="gpt-4o")
    await service.append(
        "w",
        [
            {"role": "user", "content": "Fix the generator."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "Edit", "arguments": json.dumps({"file_path": path})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "edited"},
            {"role": "assistant", "content": 'Quoted "as said" and done.'},
        ],
    )
    for query in (f'"{path}"', "Users\\me\\proj", "gen_word.py"):
        page = await service.search(query, session_id="w")
        assert _refs(page)[:1] == [("w", "m2")], query
    assert _refs(await service.search('"as said"', session_id="w")) == [("w", "m3")]


async def test_a_two_character_chinese_word_is_found_by_reading_the_scope(service):
    await service.open_session("z", model="gpt-4o")
    await service.append("z", [{"role": "user", "content": "请把画册的封面改成蓝色"}])
    await service.append("z", [{"role": "assistant", "content": "好的，我先看看封面。"}])
    page = await service.search("画册", session_id="z")
    assert _refs(page) == [("z", "m1")]
    assert any("under 3 characters" in note for note in page.notes)
    assert _refs(await service.search("封面 蓝色", session_id="z"))[0] == ("z", "m1")  # then m2, holding one
    assert {ref for _, ref in _refs(await service.search("封面", session_id="z"))} == {"m1", "m2"}
    with pytest.raises(InvalidInput, match="shorter than 3 characters"):
        await service.search("go", session_id="z")  # one or two Latin letters match nearly everything


async def test_a_session_whose_matches_rank_below_another_sessions_hundreds_still_gets_them(service):
    # Another session holds 500 messages that each say the word many times: they fill the best
    # few hundred matches (a search reads the best 400 parts first). The session asked for says it
    # once, in a long message; it is found, and a page reaching past the crowded session's first
    # hits is complete and in order.
    await service.open_session("crowd", model="gpt-4o")
    await service.append(
        "crowd", [{"role": "user", "content": f"zebrafish {i} " + "zebrafish " * (5 + i % 7)} for i in range(500)]
    )
    await service.open_session("quiet", model="gpt-4o")
    await service.append("quiet", [{"role": "user", "content": "notes " * 400 + "one zebrafish here"}])
    assert _refs(await service.search("zebrafish", session_id="quiet")) == [("quiet", "m1")]
    everyone = await service.search("zebrafish", within="all", limit=10)
    assert len(everyone.hits) == 10 and all(sid == "crowd" for sid, _ in _refs(everyone))
    deep = await service.search("zebrafish", session_id="crowd", offset=490, limit=20)
    assert len(deep.hits) == 10 and deep.next_offset is None
    assert not set(_refs(deep)) & set(
        _refs(await service.search("zebrafish", session_id="crowd", offset=470, limit=20))
    )
    # One strong match among the best and four weak ones below them: all five, the strong first.
    await service.open_session("mixed", model="gpt-4o")
    await service.append("mixed", [{"role": "user", "content": "zebrafish " * 20}])
    await service.append("mixed", [{"role": "user", "content": "notes " * 400 + f"zebrafish {i}"} for i in range(4)])
    mixed = _refs(await service.search("zebrafish", session_id="mixed"))
    assert mixed[0] == ("mixed", "m1") and sorted(mixed) == [("mixed", f"m{i}") for i in range(1, 6)]
