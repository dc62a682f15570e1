"""The offline summarizer: every section filled by code from the history (docs/design.md §11).

No model, no network, deterministic: the same request always gives the same summary. It is the
last link of the summarizer chain, so it never fails; it is also what a session without any LLM
backend gets.

Where each section comes from (see `facts.extract_facts`):
- Goal: the user's task as first stated and the latest request when it differs (`userwords.goal`:
  greetings, thanks, "continue" and harness notes are no request; a task the user set aside is an
  earlier request);
- Constraints & Preferences: every message the user wrote, quoted word for word with the stored
  message it came from (`User [m12]: …`, see `userwords`: every message's opening, then the
  newest in full within `userwords.QUOTE_SHARE` of the budget); then the rules the user stated
  (must / never / always / 必须 / 不要 …) that no quote holds whole;
- Done: the plan's finished items, then outcomes (`outcomes`): each stretch of work up to the
  test run that passed or the commit that recorded it, its files grouped by directory (relative
  to the project root), repeated edits and reruns folded, shell plumbing left out; then errors a
  later success of the same thing fixed, with what fixed them (not a call the tool or the harness
  refused and a later one made: an edit the edit tool refused, a command a guard blocked — a
  retry, on record as what succeeded);
- In Progress: the plan's items under way (a plan tool's latest list, or a checklist the agent
  wrote); without them, the work under way: the check that fails, and the files changed since
  the last check when the history stops in the middle of the agent's work;
- Blocked: the latest error no later success of the same command, test or file answered, word
  for word, unless the work went on past it (the user spoke after it and a command did something
  since: it is then among the other unresolved errors);
- Key Decisions: the user's answers to the assistant's questions, then assistant sentences that
  choose ("I'll use …", "the fix is …");
- Next Steps: the plan's open items, the list the assistant announced last, or the action it said
  it would take when it stopped;
- Critical Context: other unresolved errors, the test command in use, the project root, and
  sentences matching the caller's focus;
- Relevant Files: edited files, as `path — how` (`edited (Edit ×3)`); then the working set
  (`workingset`, names the kept tail's own words hold left out): the files
  read, tests and identifiers the history worked with, ranked, within `workingset.SHARE` of the
  budget; a file the history only showed whose name's words the tail says in a row ("the prompt
  injection scanner" for `prompt_injection.py`) counts as referred to.
Done, Key Decisions, Blocked, the plan's items and the quotes cite the stored messages they came
from (`template.cite`); the summary ends with `template.HISTORY_NOTE`.

**Updating an anchor.** With `request.previous` the previous summary is parsed and merged, not
summarized: its bullets are kept unless the new history shows them stale. An In Progress or Next
Steps item moves to Done when a todo with the same text is now completed, when a file it names was
edited, or when a command it names (in backticks) now succeeds. A Blocked or Critical Context item
whose command (in backticks) now succeeds is dropped. Goal, constraints, decisions and files are
kept; new ones are merged in (a file's bullet is replaced when the new history says more about it).
Then each section is held to its cap (`SECTION_CAPS`), least important and oldest bullets first,
so a summary updated any number of times stays about the size of one: the new history's edited
files, its open error, the latest request and the constraints (bounded by `pins`) always stay, and
older edited files outlast every other file.

**Focus.** `request.instructions` is read as a focus: its words (three letters or more, minus
common words) and CJK runs are keywords. Bullets that mention one are trimmed last when the budget
is tight (just before the essentials), and up to five sentences of the history that mention one
are added to Critical Context.

**Budget.** The rendered summary must fit `request.budget_tokens` counted with `request.counter`.
Before the working set is sized, the account of the work (Done … Critical Context) is held to
`ACCOUNT_SHARE` of the budget, its oldest Done items going first, so that the names needed next
keep their room; each of its sections keeps its most important bullet there (the newest Done item
and decision, the step under way), so none of them reads as emptied while names are listed.
Bullets are dropped least important first:
oldest Done, the files only read, the working set's least relevant names (the newest Done outcome
outlives them as its first clause, when whole it would cost names), decisions, older context,
later next steps; then long bullets are shortened; only then, for a budget too small for them, the
essentials go (constraints, edited files, the unresolved error, the goal). Each bullet is counted
once and the summary rendered a few times, not once per bullet dropped. Sections are never
dropped: a section with nothing to say reads `(none)`, a section of the account the budget emptied
`LEFT_OUT`. When even the empty template does not fit, the empty template is returned (the section
list is the contract; the engine decides what to do with it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextfold.compaction import userwords, workingset
from contextfold.compaction.base import SummaryOutcome, SummaryRequest
from contextfold.compaction.facts import (
    MAX_EDITED_FILES,
    ErrorFact,
    Facts,
    FileTouch,
    assistant_prose,
    clip,
    collapse,
    command_key,
    extract_facts,
    is_path,
    names_path,
    resolves,
    sentences,
    suite_runner,
    user_instruction,
    user_prose,
)
from contextfold.compaction.outcomes import files_phrase, outcomes, project_root
from contextfold.compaction.pins import newest_constraints
from contextfold.compaction.prose import harness_turn
from contextfold.compaction.template import (
    BLOCKED,
    CONSTRAINTS,
    CRITICAL,
    DECISIONS,
    DONE,
    EMPTY,
    FILES,
    GOAL,
    IN_PROGRESS,
    LATEST_REQUEST,
    LEFT_OUT,
    NEXT_STEPS,
    PROJECT_ROOT,
    SECTIONS,
    Summary,
    cite,
    from_root,
    is_absolute,
    parse_summary,
    stated_root,
)
from contextfold.domain import Message, TextPart, ToolPart
from contextfold.formats.base import instruction_role
from contextfold.tokens.counting import TokenCounter

EARLIER_REQUEST = "Earlier request: "
EARLIER_ROOT = "Earlier project root: "
REQUEST = "Request: "
CARRIED_TASK = "From the earlier conversation's summary: "
LAST_STEP = "Last step: "
"""How older summaries began In Progress (the assistant's last words); dropped when updating one."""
WORKING_ON = "Changing "
FIXING = "Fixing the failure of "
USER_CHOSE = "User chose "
USER_DECLINED = "User declined "
USER_APPROVED = "User approved the plan "
"""How Key Decisions gives the plan the user approved at the harness's prompt (`Facts.approved_plan`)."""
"""How Key Decisions gives a call the user turned down at the harness's prompt (`Facts.declined`)."""
TEST_COMMAND = "Test command: "
SYSTEM_SAID = "System said: "
"""How Critical Context quotes the newest system/developer message sent after the conversation
began (`formats.base.instruction_message`: Codex's `<model_switch>`): no other section quotes it, and
the compaction that covers it would leave no trace of it."""
SYSTEM_SAID_CHARS = 400
UNRESOLVED = "Unresolved: "
RESOLVED = "Fixed: "
MAX_RESOLVED = 5
MAX_FOCUS_SENTENCES = 5
SHORTENED_CHARS = 160

# Trimming tiers: lower goes first when the budget is tight.
_DONE_TIER = 0
_READ_FILE_TIER = 1
_DECISION_TIER = 2
_CONTEXT_TIER = 3
_STEP_TIER = 4
_FOCUS_TIER = 5
_ESSENTIAL_TIER = 6


@dataclass
class _Item:
    text: str
    tier: int
    rank: float
    """Order of removal within a tier: lower goes first."""
    path: str | None = None
    """For a Relevant Files bullet, the path it names (so it can be shortened to just that)."""
    verbatim: bool = False
    """Never shortened: constraints, error lines and the latest request must stay word for word
    (pinning checks for them and would add them back)."""
    carried: bool = False
    """Comes from the previous summary (the anchor), not from the new history."""


@dataclass
class _Draft:
    sections: dict[str, list[_Item]] = field(default_factory=lambda: {name: [] for name in SECTIONS})
    _keys: dict[str, set[str]] = field(
        default_factory=lambda: {name: set() for name in SECTIONS}, init=False, repr=False
    )
    """Each section's texts, casefolded: the duplicate check of `add`."""
    _emptied: set[str] = field(default_factory=set, init=False, repr=False)
    """Sections of the account whose every bullet was dropped for room: they read `LEFT_OUT`, not
    `(none)` (counted in the budget like any bullet), unless `notes` is off."""
    notes: bool = field(default=True, init=False, repr=False)
    """Off once only the essentials are left to drop (a budget too small for the notes)."""

    def add(
        self,
        section: str,
        text: str,
        tier: int,
        rank: float,
        path: str | None = None,
        verbatim: bool = False,
        carried: bool = False,
    ) -> bool:
        text = collapse(text)
        if not text or text in (EMPTY, LEFT_OUT):
            return False
        key = text.casefold()
        if key in self._keys[section]:
            return False
        self._keys[section].add(key)
        self.sections[section].append(_Item(text, tier, rank, path, verbatim, carried))
        return True

    def texts(self, section: str) -> list[str]:
        return [item.text for item in self.sections[section]]

    def summary(self, leaving_out: frozenset[int] = frozenset()) -> Summary:
        """The draft as a summary, without the items whose `id` is in `leaving_out`."""
        summary = Summary()
        for name in SECTIONS:
            for item in self.sections[name]:
                if id(item) not in leaving_out:
                    summary.add(name, item.text)
            emptied = self.sections[name] or name in self._emptied
            if self.notes and name in ACCOUNT_SECTIONS and emptied and not summary.sections[name]:
                summary.add(name, LEFT_OUT)
        return summary

    def render(self, leaving_out: frozenset[int] = frozenset()) -> str:
        return self.summary(leaving_out).render()

    def remove(self, gone: frozenset[int]) -> None:
        """Drop the items whose `id` is in `gone`, in one pass over each section."""
        if gone:
            for name, items in self.sections.items():
                self.sections[name] = [item for item in items if id(item) not in gone]
                self._keys[name] = {item.text.casefold() for item in self.sections[name]}
                if items and not self.sections[name]:
                    self._emptied.add(name)


class ExtractiveSummarizer:
    """Summarizes by extraction; see the module docstring for what goes where."""

    name = "extractive"

    async def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        return self.summarize_sync(request)

    def summarize_sync(self, request: SummaryRequest) -> SummaryOutcome:
        text = build_summary(
            [*request.earlier, *request.head],
            previous=request.previous,
            counter=request.counter,
            budget_tokens=request.budget_tokens,
            instructions=request.instructions,
            facts=request.facts,
            tail=request.tail,
        )
        return SummaryOutcome(text=text, summarizer=self.name)


def build_summary(
    head: Sequence[Message],
    *,
    previous: str | None,
    counter: TokenCounter,
    budget_tokens: int,
    instructions: str | None = None,
    facts: Facts | None = None,
    tail: Sequence[Message] = (),
) -> str:
    """The anchored summary of `head` (merged into `previous` when given), within the budget.
    `facts`: those of `head`, when the caller has extracted them already; `tail`: the messages
    kept after the summary, whose words the working set need not repeat (`_own_words`)."""
    facts = extract_facts(head) if facts is None else facts
    keywords = focus_keywords(instructions)
    draft = _Draft()
    prior = parse_summary(previous) if previous else None
    root = _root(facts)
    _constraints(draft, facts, prior, userwords.quote_budget(budget_tokens))
    _goal(draft, facts, prior)
    _progress(draft, facts, prior, root)
    _decisions(draft, facts, prior)
    _context(draft, facts, prior, root, head, keywords)
    _files(draft, facts, prior, root)
    _hold_accounts(draft, counter, budget_tokens)
    room = _working_set_budget(draft, counter, budget_tokens)
    _working_set(draft, facts, head, counter, room, root, *_own_words(tail))
    _protect_focus(draft, keywords)
    if prior is not None:
        _cap(draft)
    return _fit(draft, counter, budget_tokens)


# -- sections -----------------------------------------------------------------------------------


def _goal(draft: _Draft, facts: Facts, prior: Summary | None) -> None:
    """The user's task as first stated and the latest request (`userwords.goal`), each cited; a task
    the user set aside is kept as an earlier request. With an anchor: its Goal, the new history's
    latest request added (a set-aside anchor goal yields to it)."""
    goal = userwords.goal(facts.said, facts.first_instruction)
    quoted = "\n".join(t for t in draft.texts(CONSTRAINTS) if userwords.parse_quote(t) is not None)
    task, latest = goal.task, goal.latest
    shown_task, shown_latest = _opening_of(task, quoted), _opening_of(latest, quoted)
    if prior is None and facts.carried_task is not None:
        # A session going on from a compaction: the task is the one its summary states; what the
        # user asked since is the latest request ("continue" is none).
        carried, seq = facts.carried_task
        draft.add(GOAL, _cited(CARRIED_TASK + carried, (seq,)), _ESSENTIAL_TIER, 0)
        newest, shown, newest_seqs = (
            (latest, shown_latest, goal.latest_seqs) if latest else (task, shown_task, goal.task_seqs)
        )
        if newest and shown and userwords.is_request(newest):
            draft.add(GOAL, _cited(LATEST_REQUEST + shown, newest_seqs), _ESSENTIAL_TIER, 1, verbatim=True)
        return
    if prior is None:
        if task:
            label = EARLIER_REQUEST if goal.replaced else ""
            tier = _CONTEXT_TIER if goal.replaced else _ESSENTIAL_TIER
            draft.add(GOAL, _cited(label + shown_task, goal.task_seqs), tier, 0, verbatim=latest is None)
        if latest:
            draft.add(GOAL, _cited(LATEST_REQUEST + shown_latest, goal.latest_seqs), _ESSENTIAL_TIER, 1, verbatim=True)
        return
    newest, newest_seqs = (latest, goal.latest_seqs) if latest else (task, goal.task_seqs)
    set_aside = goal.replaced or (newest is not None and userwords.redirects(newest))
    bullets = prior[GOAL]
    for index, bullet in enumerate(bullets):
        # The goal as first stated stays essential, unless the user set it aside; later requests
        # yield to the newest one.
        if newest and bullet.startswith(LATEST_REQUEST):
            bullet = EARLIER_REQUEST + bullet[len(LATEST_REQUEST) :]
        elif set_aside and index == 0 and not bullet.startswith((EARLIER_REQUEST, REQUEST)):
            bullet = EARLIER_REQUEST + bullet
        tier = _ESSENTIAL_TIER if index == 0 and not set_aside else _CONTEXT_TIER
        draft.add(GOAL, bullet, tier, index, verbatim=newest is not None and newest in bullet, carried=True)
    stated = " ".join(draft.texts(GOAL))
    if task and latest and task not in stated and shown_task not in stated:
        draft.add(GOAL, _cited(REQUEST + shown_task, goal.task_seqs), _CONTEXT_TIER, len(bullets))
    shown_newest = _opening_of(newest, quoted)
    if newest and newest not in stated and shown_newest not in stated:
        draft.add(
            GOAL, _cited(LATEST_REQUEST + shown_newest, newest_seqs), _ESSENTIAL_TIER, len(bullets) + 1, verbatim=True
        )


GOAL_OPENING_CHARS = 160
"""What the Goal shows of a request that Constraints quotes whole: its opening, cited; the quote
holds the rest. The same words twice cost the summary about 3 % on the corpus."""


def _opening_of(request: str | None, quoted: str) -> str:
    """`request` as the Goal states it: its opening when `quoted` (the Constraints quotes) holds all
    of it, else whole. '' for no request."""
    if not request:
        return ""
    whole = collapse(request).removesuffix("…")
    if len(whole) > GOAL_OPENING_CHARS and whole in quoted:
        return userwords.clip_quote(whole, GOAL_OPENING_CHARS)
    return request


def _constraints(draft: _Draft, facts: Facts, prior: Summary | None, quote_chars: int) -> None:
    """The user's own messages quoted (`userwords`), then the rules they stated that no quote holds
    whole (a long message is quoted only in part)."""
    carried = prior[CONSTRAINTS] if prior else []
    rank = 0
    for quote, shown in userwords.quotes(facts.said, carried, quote_chars):
        draft.add(CONSTRAINTS, quote.bullet(shown), _ESSENTIAL_TIER, rank, verbatim=True)
        rank += 1
    quoted = " ".join(draft.texts(CONSTRAINTS)).casefold()
    rules, _older = newest_constraints([b for b in carried if userwords.parse_quote(b) is None] + facts.constraints)
    for rule in rules:
        if collapse(rule).casefold() not in quoted:
            draft.add(CONSTRAINTS, rule, _ESSENTIAL_TIER, rank, verbatim=True)
            rank += 1


def _progress(draft: _Draft, facts: Facts, prior: Summary | None, root: str) -> None:
    completed = [text for status, text in facts.todos if status == "completed"]
    rank = 0.0
    # Done: the anchor's first (oldest), then what moved out of In Progress, then the new facts.
    if prior:
        for bullet in prior[DONE]:
            draft.add(DONE, bullet, _DONE_TIER, rank)
            rank += 1
    carried_in_progress: list[str] = []
    carried_next: list[str] = []
    if prior:
        for section, carried in ((IN_PROGRESS, carried_in_progress), (NEXT_STEPS, carried_next)):
            for bullet in prior[section]:
                if bullet.startswith((LAST_STEP, WORKING_ON, FIXING)) and (facts.steps or facts.latest_assistant_text):
                    continue  # where the work stood then: the new history says where it stands now
                if _now_done(bullet, facts, completed):
                    draft.add(DONE, bullet, _CONTEXT_TIER, rank)
                    rank += 1
                else:
                    carried.append(bullet)
    for text in completed:
        # A finished plan item says what was achieved better than the commands behind it.
        draft.add(DONE, _cited(text, facts.sources.get(text, ())), _CONTEXT_TIER, rank)
        rank += 1
    active = [_cited(t, facts.sources.get(t, ())) for status, t in facts.todos if status == "in_progress"]
    if not active:
        active = _under_way(facts, root)
    changing = any(text.startswith(WORKING_ON) for text in active)
    # What went wrong and was fixed is worth knowing (it may come back), and how it was fixed;
    # a call refused and a later one made is a retry, on record as what succeeded. Shown after
    # the outcomes, ranked with them by when each happened: for room the oldest goes first, of
    # either kind (five long Fixed bullets must not push out everything that was done).
    done = outcomes(facts.steps, root, open_in_progress=changing)
    resolved = [error for error in facts.resolved_errors if not error.routine][-MAX_RESOLVED:]
    fixed = [(RESOLVED + _fixed_bullet(error), error.fix_seq or error.seq) for error in resolved]
    ranks = {text: rank + index for index, (text, _) in enumerate(sorted(fixed + done, key=lambda item: item[1]))}
    for text, _ in done + fixed:
        draft.add(DONE, text, _DONE_TIER, ranks[text])
    rank += len(ranks)

    # In Progress: the plan's items under way; without them, the work under way (the failing
    # check, the files being changed since the last check), then what the anchor had in flight.
    for index, text in enumerate(active + carried_in_progress):
        draft.add(IN_PROGRESS, text, _STEP_TIER, -index)

    # Blocked: the anchor's still-open blockers, then the latest unresolved error.
    if prior:
        for index, bullet in enumerate(prior[BLOCKED]):
            if not _resolved(bullet, facts):
                draft.add(BLOCKED, bullet, _STEP_TIER, index)
    if facts.unresolved_error is not None:
        draft.add(BLOCKED, _error_bullet(facts.unresolved_error), _ESSENTIAL_TIER, 0, verbatim=True)

    # Next Steps: the plan's open items; without a plan, the list the assistant announced last,
    # or the action it said it would take next; then the anchor's.
    pending = [_cited(t, facts.sources.get(t, ())) for status, t in facts.todos if status == "pending"]
    steps = pending + [s for s in facts.plan_steps if s not in pending]
    if not steps and facts.intent is not None and not facts.todos:
        intent, seq = facts.intent
        steps.append(_cited(intent, (seq,)))
    for index, text in enumerate(steps + carried_next):
        draft.add(NEXT_STEPS, text, _STEP_TIER, -index)


def _root(facts: Facts) -> str:
    """The project's root directory: where most edited files live, else most files touched — or,
    above that, the directory the agent works from (`_working_directory`), so that the relative
    paths it typed read as relative to the root too."""
    root = project_root([f.path for f in facts.edited_files]) or project_root([f.path for f in facts.files])
    working = _working_directory([f.path for f in facts.files])
    return working if working and root.startswith(working) else root


def _working_directory(paths: Sequence[str]) -> str:
    """The directory the agent's relative paths resolve from: the one that, put before a relative
    path it wrote, gives an absolute path it also wrote (`src/a.py` and `/home/u/proj/src/a.py`
    say `/home/u/proj/`), when at least two such pairs agree; '' otherwise."""
    absolute = [p for p in paths if p.startswith("/")]
    votes: dict[str, int] = {}
    for relative in {p.removeprefix("./") for p in paths if not is_absolute(p) and "/" in p}:
        for path in absolute:
            if path.endswith("/" + relative):
                folder = path[: -len(relative)]
                votes[folder] = votes.get(folder, 0) + 1
    agreed = [folder for folder, count in votes.items() if count >= 2]
    return max(agreed, key=lambda folder: (votes[folder], -len(folder))) if agreed else ""


def _under_way(facts: Facts, root: str) -> list[str]:
    """What the work was doing when the history stops, for In Progress when no plan says: the check
    that fails, and, when the history stops in the middle of the agent's work, the files it changed
    since the last check passed."""
    found: list[str] = []
    error = facts.unresolved_error
    if error is not None:
        found.append(_cited(FIXING + clip(error.source, 120), (error.seq,)))
    changed: dict[str, list[int]] = {}
    for step in reversed(facts.steps):
        if step.kind in ("test", "commit", "user") and step.ok:
            break
        if step.kind in ("edit", "create"):
            changed.setdefault(step.text, []).append(step.seq)
    if changed and not facts.at_rest:
        paths = list(reversed(changed))
        seqs = [s for v in changed.values() for s in v]
        found.append(_cited(f"{WORKING_ON}{files_phrase(paths, root)} (not yet checked)", seqs))
    return found


def _cited(text: str, seqs: Sequence[int]) -> str:
    citation = cite(seqs)
    return f"{text} {citation}" if citation else text


def _decisions(draft: _Draft, facts: Facts, prior: Summary | None) -> None:
    """The user's choices (their answers to the assistant's questions), then the assistant's."""
    decisions = list(prior[DECISIONS]) if prior else []
    task_seqs = {seq for seq in userwords.goal(facts.said, facts.first_instruction).task_seqs if seq > 0}
    for choice in facts.choices:
        if choice.seqs and choice.seqs[-1] in task_seqs:
            continue  # the task, said in answer to "What can I help with?": the Goal states it
        decisions.append(_cited(f'{USER_CHOSE}"{choice.answer}" (asked: {choice.question})', choice.seqs))
    if facts.approved_plan is not None:
        plan, seq = facts.approved_plan
        decisions.append(_cited(f"{USER_APPROVED}{plan}", (seq,)))
    for declined in facts.declined:
        decisions.append(_cited(f"{USER_DECLINED}{declined.shown}", (declined.seq,)))
    decisions += [_cited(text, facts.sources.get(text, ())) for text in facts.decisions]
    for index, text in enumerate(decisions):
        draft.add(DECISIONS, text, _DECISION_TIER, index)


def _context(
    draft: _Draft, facts: Facts, prior: Summary | None, root: str, head: Sequence[Message], keywords: list[str]
) -> None:
    rank = 0.0
    tests = [c for c in facts.commands if suite_runner(c)]
    instruction = next(
        (m for m in reversed(head) if instruction_role(m) is not None and m.text.strip() and not harness_turn(m)), None
    )
    if prior:
        for bullet in prior[CRITICAL]:
            if tests and bullet.startswith(TEST_COMMAND):
                continue  # replaced by the new history's test command below
            if instruction is not None and bullet.startswith(SYSTEM_SAID):
                continue  # replaced by the new history's newest instruction below
            if bullet.startswith(PROJECT_ROOT) and root:
                # The new history's root is stated below; an earlier one stays for the Done lines
                # written from it.
                earlier = stated_root([bullet])
                if earlier and earlier != root:
                    draft.add(
                        CRITICAL, f"{EARLIER_ROOT}`{earlier}` (earlier Done lines read from it)", _CONTEXT_TIER, rank
                    )
                    rank += 1
                continue
            if not _resolved(bullet, facts):
                draft.add(CRITICAL, bullet, _CONTEXT_TIER, rank)
                rank += 1
    others = [error for error in facts.unresolved_errors if error is not facts.unresolved_error]
    for error in others[-3:]:
        draft.add(CRITICAL, UNRESOLVED + _error_bullet(error), _CONTEXT_TIER, rank)
        rank += 1
    if tests:
        draft.add(CRITICAL, f"{TEST_COMMAND}`{command_key(tests[-1])}`", _CONTEXT_TIER, rank)
        rank += 1
    if root:
        draft.add(
            CRITICAL,
            f"{PROJECT_ROOT}`{root}` (the paths below under it are written relative to it)",
            _ESSENTIAL_TIER,  # the relative paths read from it
            rank,
        )
        rank += 1
    if instruction is not None:
        quote = userwords.clip_quote(collapse(instruction.text), SYSTEM_SAID_CHARS)
        draft.add(CRITICAL, _cited(f"{SYSTEM_SAID}{quote}", (instruction.seq,)), _CONTEXT_TIER, rank)
        rank += 1
    for sentence in _focus_sentences(head, keywords):
        draft.add(CRITICAL, sentence, _FOCUS_TIER, rank)
        rank += 1


def _files(draft: _Draft, facts: Facts, prior: Summary | None, root: str) -> None:
    """Edited files first, then read-only ones. The anchor's entries are kept; a file the new
    history edits gets the new bullet, and one edited before and only read since keeps its old one.
    Paths under the project root (`root`) are written relative to it (the anchor's read from its own
    root)."""
    prior_root = stated_root(prior[CRITICAL]) if prior else ""
    new = {f.path: f for f in facts.files}
    edited: list[tuple[str, str, bool]] = []
    read: list[tuple[str, str, bool]] = []
    kept_edits: set[str] = set()
    if prior:
        for bullet in prior[FILES]:
            if workingset.listed(bullet) is not None:
                continue  # merged into the new working set
            written = _bullet_path(bullet)
            path = _absolute(written, prior_root)
            if bullet.startswith(written + " — "):
                bullet = from_root(path, root) + bullet[len(written) :]
            was_edited = _looks_edited(bullet)
            touch = new.get(path)
            if touch is not None and (touch.action == "edited" or not was_edited):
                continue  # the new history says more about this file
            if touch is not None:
                kept_edits.add(path)  # edited before, only read since: it stays an edited file
            (edited if was_edited else read).append((bullet, path, True))
    for touch in facts.edited_files:
        if touch.path not in kept_edits:
            edited.append((_file_bullet(touch, root), touch.path, False))
    for index, (bullet, path, carried) in enumerate(edited):
        draft.add(FILES, bullet, _ESSENTIAL_TIER, index, path=path, carried=carried)
    for index, (bullet, path, carried) in enumerate(read):
        draft.add(FILES, bullet, _READ_FILE_TIER, -1 - index, path=path, carried=carried)


def _absolute(path: str, root: str) -> str:
    """A path an anchor wrote relative to the root it stated, whole again."""
    return root + path if root and not is_absolute(path) else path


ACCOUNT_SECTIONS = (DONE, IN_PROGRESS, BLOCKED, DECISIONS, NEXT_STEPS, CRITICAL)
ACCOUNT_SHARE = 0.08
"""Of the budget, what the account of the work (Done, In Progress, Blocked, Key Decisions, Next
Steps, Critical Context) may take with its bullets that are not essential, before the working set
is sized: a long Done list would otherwise take the room where the names needed next are listed.
On the corpus the account held 433 of the 2,176 names needed after a cut, 5 of them nowhere
else; the working set held 702 that stood nowhere else."""
ACCOUNT_MIN_TOKENS = 300
"""What the account may take however small the budget (a small head's summary keeps its account)."""


def _hold_accounts(draft: _Draft, counter: TokenCounter, budget_tokens: int) -> None:
    """Drop the account's least important bullets (lowest tier, then rank: the oldest first) beyond
    `ACCOUNT_SHARE` of the budget (at least `ACCOUNT_MIN_TOKENS`). Done keeps at least half of that
    room, more when the other sections leave it; they keep the rest. Essential and focus bullets
    stay, and are counted, and so does each section's most important bullet (its newest decision,
    the step under way): a section the reader sees emptied for room says less than one line of it."""
    allowance = max(ACCOUNT_MIN_TOKENS, int(budget_tokens * ACCOUNT_SHARE))
    done = draft.sections[DONE]
    others = [item for name in ACCOUNT_SECTIONS if name != DONE for item in draft.sections[name]]
    costs = {id(item): counter.count(f"- {item.text}\n") for item in [*done, *others]}
    if sum(costs.values()) <= allowance:
        return
    gone: set[int] = set()
    kept = _leading(draft)

    def hold(items: list[_Item], room: int) -> int:
        spent = sum(costs[id(item)] for item in items)
        held = (i for i in items if i.tier < _FOCUS_TIER and id(i) not in kept)
        for item in sorted(held, key=lambda item: (item.tier, item.rank)):
            if spent <= room:
                break
            gone.add(id(item))
            spent -= costs[id(item)]
        return spent

    other_cost = sum(costs[id(item)] for item in others)
    done_spent = hold(done, max(allowance - other_cost, allowance // 2))
    hold(others, allowance - done_spent)
    draft.remove(frozenset(gone))


def _leading(draft: _Draft) -> set[int]:
    """The most important bullet of each section of the account (ids): the last to go for room.
    Done has two when it holds both kinds: the newest outcome and the newest `Fixed:` bullet."""
    groups = [draft.sections[name] for name in ACCOUNT_SECTIONS if name != DONE]
    done = draft.sections[DONE]
    groups += [[i for i in done if i.text.startswith(RESOLVED)], [i for i in done if not i.text.startswith(RESOLVED)]]
    return {id(max(items, key=lambda item: (item.tier, item.rank))) for items in groups if items}


def _working_set_budget(draft: _Draft, counter: TokenCounter, budget_tokens: int) -> int:
    """`workingset.SHARE` of the budget, or up to `workingset.MAX_SHARE` of it when the sections
    drafted so far leave that much room (a short history with many names read keeps them)."""
    share = int(budget_tokens * workingset.SHARE)
    room = budget_tokens - counter.count(draft.render()) - _WORKING_SET_MARGIN
    grown = max(share, min(int(budget_tokens * workingset.MAX_SHARE), room))
    return min(grown, workingset.MAX_TOKENS)


_WORKING_SET_MARGIN = 100
"""Tokens left free when the working set grows into the room other sections leave: the bullets'
markup and the closing note, counted with the whole summary only at the end."""


def _working_set(
    draft: _Draft,
    facts: Facts,
    head: Sequence[Message],
    counter: TokenCounter,
    budget: int,
    root: str,
    typed: str = "",
    said: str = "",
) -> None:
    """The files read, tests and identifiers the history worked with (`workingset`), within
    `budget` tokens, after the edited files; an anchor's lists follow the new history's names.
    Names the kept tail's own words hold (`typed`) are left out: the model reads them there."""
    prior_names = [pair for bullet in draft.texts(FILES) for pair in (workingset.listed(bullet) or [])]
    found = workingset.working_set(
        head, {f.path for f in facts.edited_files}, [f.path for f in facts.files if f.action == "read"], said
    )
    written = "\n".join(item.text for items in draft.sections.values() for item in items)
    # Named elsewhere already: in the summary, or typed in the kept tail.
    tail_words = _words_of(typed)
    ranked = [pair for pair in found.ranked if pair[0] not in written and pair[0] not in tail_words]
    names = {name for name, _ in ranked}
    ranked += [pair for pair in prior_names if pair[0] not in names]
    bullets = workingset.fit_working_set(workingset.WorkingSet(ranked), counter, budget, root)
    for index, bullet in enumerate(bullets):
        draft.add(FILES, bullet, _READ_FILE_TIER, len(bullets) - index)


MAX_TAIL_CHARS = 400_000
"""Of the kept tail's own words, what the working set checks its names against (the newest)."""


def _own_words(tail: Sequence[Message]) -> tuple[str, str]:
    """What the kept tail's messages say in their own words, the newest `MAX_TAIL_CHARS` of each:
    typed (the user's and the assistant's text and the tool calls' arguments — not tool outputs,
    which pruning may later cut from view) and said (the text alone)."""
    typed: list[str] = []
    said: list[str] = []
    for message in tail:
        if message.summary or message.compaction is not None:
            continue
        for part in message.parts:
            if isinstance(part, TextPart) and not part.synthetic:
                typed.append(part.text)
                said.append(part.text)
            elif isinstance(part, ToolPart) and not part.input_cleared:
                typed.append(part.input if isinstance(part.input, str) else json.dumps(part.input, ensure_ascii=False))
    return "\n".join(typed)[-MAX_TAIL_CHARS:], "\n".join(said)[-MAX_TAIL_CHARS:]


def _words_of(text: str) -> frozenset[str]:
    """The whole names `text` holds: its longest runs of name characters (`_NAME_RUN`), each also
    without the dots that end a sentence."""
    runs = _NAME_RUN.findall(text)
    return frozenset(runs) | frozenset(run.rstrip(".") for run in runs)


_NAME_RUN = re.compile(r"[\w./-]+")


def _file_bullet(touch: FileTouch, root: str = "") -> str:
    """`path — how` (`edited (Edit ×3)`), the path relative to `root` when under it: the
    assistant's sentence about it, which Done and the quotes say better, is left out."""
    return f"{from_root(touch.path, root)} — {touch.why.split(' — ', 1)[0]}"


def _fixed_bullet(error: ErrorFact) -> str:
    how = ""
    if error.fix and error.fix not in error.source:
        how = f"; then `{clip(error.fix, 120)}` succeeded"
    return _cited(f"{error.text} — {error.source}{how}", (error.seq, error.fix_seq))


def _error_bullet(error: ErrorFact) -> str:
    return _cited(f"{error.text} — {error.source}", (error.seq,))


_EDIT_WORDS = re.compile(
    r"\b(?:edit|creat|writ|wrote|modif|patch|updat|chang|add|delet|remov|renam|moved)", re.IGNORECASE
)


def _looks_edited(bullet: str) -> bool:
    why = bullet.split(" — ", 1)[1] if " — " in bullet else bullet
    return bool(_EDIT_WORDS.search(why))


_BACKTICKED = re.compile(r"`([^`]+)`")


def _bullet_path(bullet: str) -> str:
    """The path a Relevant Files bullet names: before ` — `, or its first backticked span."""
    if " — " in bullet:
        return bullet.split(" — ", 1)[0].strip().strip("`*")
    span = _BACKTICKED.search(bullet)
    if span:
        return span.group(1)
    return bullet.split()[0].strip("`*:,") if bullet.split() else bullet


# -- anchor updates -----------------------------------------------------------------------------


def _normal(text: str) -> str:
    return re.sub(r"[^\w\s]", "", collapse(text).casefold())


def _same_task(a: str, b: str) -> bool:
    a, b = _normal(a), _normal(b)
    if not a or not b:
        return False
    return a == b or (min(len(a), len(b)) >= 12 and (a in b or b in a))


def _names_file(bullet: str, path: str) -> bool:
    """The bullet names `path`, or a path-like word that is the same file written relative to a
    different directory (`lib/x.ex` for `/home/u/proj/lib/x.ex`)."""
    if names_path(bullet, path):
        return True
    for word in re.split(r"[\s`'\"(),;]+", bullet):
        word = word.rstrip(".:")
        if not is_path(word) or "/" not in word and "." not in word:
            continue
        if path.endswith("/" + word.lstrip("./")) or word.endswith("/" + path.lstrip("./")):
            return True
    return False


def _now_done(bullet: str, facts: Facts, completed: list[str]) -> bool:
    """Whether an anchor's In Progress or Next Steps item is finished according to the new history."""
    if any(_same_task(bullet, text) for text in completed):
        return True
    if any(_names_file(bullet, f.path) for f in facts.edited_files):
        return True
    return _resolved(bullet, facts)


def _resolved(bullet: str, facts: Facts) -> bool:
    """A command the bullet names in backticks has succeeded in the new history."""
    spans = _BACKTICKED.findall(bullet)
    if not spans or not facts.succeeded:
        return False
    for span in spans:
        key = command_key(span)
        if key and any(resolves(key, success) for success in facts.succeeded):
            return True
    return False


# -- focus ---------------------------------------------------------------------------------------

_STOPWORDS = frozenset(
    """
    the and for with that this from into about keep keeping make sure please focus focused on all any
    are was were been being have has had not but also more most very much such only just what which
    who whom whose when where why how its it's our your their them they you we she him her his
    details detail important summary summarize summarise context information info things thing stuff
    should would could will can may might must shall let lets use used using via per each other some
    """.split()
)
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
_WORD = re.compile(r"[A-Za-z0-9_][\w./:-]*[\w]|[A-Za-z0-9_]")
_CJK_FILLER = ("保留", "关注", "重点", "细节", "请", "注意", "相关", "内容", "信息", "的")


def focus_keywords(instructions: str | None) -> list[str]:
    """Words of a focus instruction worth matching: identifiers and content words (three letters
    or more, common words left out), and runs of CJK characters with filler words removed."""
    if not instructions:
        return []
    words: list[str] = []
    for word in _WORD.findall(instructions):
        lowered = word.casefold()
        if len(lowered) >= 3 and lowered not in _STOPWORDS and lowered not in words:
            words.append(lowered)
    for run in _CJK_RUN.findall(instructions):
        for filler in _CJK_FILLER:
            run = run.replace(filler, " ")
        for piece in run.split():
            if len(piece) >= 2 and piece not in words:
                words.append(piece)
    return words


def _mentions_focus(text: str, keywords: list[str]) -> bool:
    lowered = text.casefold()
    return any(k in lowered for k in keywords)


def _focus_sentences(head: Sequence[Message], keywords: list[str]) -> list[str]:
    """The latest sentences of the conversation (user or assistant prose) that mention a focus
    keyword, oldest first."""
    if not keywords:
        return []
    found: list[str] = []
    for index in range(len(head) - 1, -1, -1):
        message = head[index]
        if message.summary or message.compaction is not None:
            continue
        previous = head[index - 1] if index else None
        prose = assistant_prose(message) if message.role == "assistant" else user_prose(message, previous=previous)
        if message.role == "user" and user_instruction(message, previous=previous) is None:
            continue
        for sentence in reversed(list(sentences(prose))):
            if len(sentence) >= 12 and _mentions_focus(sentence, keywords):
                item = clip(sentence)
                if item not in found:
                    found.append(item)
            if len(found) >= MAX_FOCUS_SENTENCES:
                return list(reversed(found))
    return list(reversed(found))


def _protect_focus(draft: _Draft, keywords: list[str]) -> None:
    if not keywords:
        return
    for items in draft.sections.values():
        for item in items:
            if item.tier < _FOCUS_TIER and _mentions_focus(item.text, keywords):
                item.tier = _FOCUS_TIER


# -- bounds ----------------------------------------------------------------------------------------

SECTION_CAPS: dict[str, int] = {
    GOAL: 3,
    DONE: 15,
    IN_PROGRESS: 4,
    BLOCKED: 2,
    DECISIONS: 8,
    NEXT_STEPS: 6,
    CRITICAL: 5,
    FILES: 25,
}
"""Bullets a section keeps when a previous summary is merged in, so that a summary updated any
number of times stays about the size of one (Constraints are bounded by `pins`). Beyond the cap
only the new history's essentials and verbatim bullets stay (its edited files, the error that
blocks the work, the latest request)."""


def _cap(draft: _Draft) -> None:
    """Hold each section to its cap, dropping least important first: the lowest tier, then the
    lowest rank (within most tiers, the oldest). Never dropped here: the new history's essentials,
    and verbatim bullets (constraints, the latest request, the open error). The working set's
    lists are not counted: their own share of the budget bounds them."""
    gone: set[int] = set()
    for name, cap in SECTION_CAPS.items():
        items = [i for i in draft.sections[name] if name != FILES or workingset.listed(i.text) is None]
        if len(items) <= cap:
            continue
        droppable = [
            i for i in items if (i.carried or i.tier < _ESSENTIAL_TIER) and not i.verbatim and not _edited_file(name, i)
        ]
        droppable.sort(key=lambda item: (item.tier, item.rank))
        gone.update(id(item) for item in droppable[: len(items) - cap])
        if name == FILES:
            gone.update(_carried_edits_beyond_cap(draft.sections[FILES], gone))
    draft.remove(frozenset(gone))


def _edited_file(section: str, item: _Item) -> bool:
    """A Relevant Files bullet for an edited file (the new history's or the anchor's): a path the
    summary must keep however many updates it goes through, shortened to the path if need be."""
    return section == FILES and item.path is not None and item.tier >= _ESSENTIAL_TIER


def _shortened_file(item: _Item) -> str:
    """A Relevant Files bullet cut to its path; an edited file's keeps saying so, so that the next
    update still reads it as an edit (`_looks_edited`)."""
    path = _bullet_path(item.text) if item.path is not None else item.text
    return f"{path} — edited" if item.tier >= _ESSENTIAL_TIER else path


def _carried_edits_beyond_cap(items: Sequence[_Item], gone: set[int]) -> set[int]:
    """The anchor's edited-file bullets are shortened to their path once the section is over its
    cap; beyond `facts.MAX_EDITED_FILES` edited files in all, the oldest carried ones go (the
    cap that guards against runaway input). Returns the ids to drop."""
    edited = [i for i in items if id(i) not in gone and _edited_file(FILES, i)]
    carried = [i for i in edited if i.carried]
    for item in carried:
        item.text = _shortened_file(item)
    excess = len(edited) - MAX_EDITED_FILES
    return {id(item) for item in carried[: max(0, excess)]}


# -- budget ---------------------------------------------------------------------------------------

_ESTIMATED_TRIES = 3
"""Drops guided by the running estimate before `_drop` falls back to a binary search."""


def _brief(text: str) -> str:
    """A Done bullet cut to its first clause (`SHORTENED_CHARS` at most), its citation kept."""
    at = text.rfind(" [m")
    body, citation = (text[:at], text[at:]) if at > 0 and text.endswith("]") else (text, "")
    first, _, rest = body.partition("; ")
    return clip(first, SHORTENED_CHARS) + ("; …" if rest else "") + citation


def _fit(draft: _Draft, counter: TokenCounter, budget: int) -> str:
    """Render, dropping and shortening bullets least important first until the summary fits."""
    text = draft.render()
    total = counter.count(text)
    if total <= budget:
        return text

    optional = [item for name in SECTIONS for item in draft.sections[name] if item.tier < _ESSENTIAL_TIER]
    # (A plan's finished item or one moved from In Progress stands higher already: not this rule's.)
    outcomes_done = [i for i in draft.sections[DONE] if i.tier == _DONE_TIER and not i.text.startswith(RESOLVED)]
    newest = max(outcomes_done, key=lambda item: item.rank) if outcomes_done else None

    def shed_order(item: _Item) -> tuple[int, float]:
        # The newest outcome whole goes after the files only read, before the working set's names.
        return (_READ_FILE_TIER, 0.0) if item is newest else (item.tier, item.rank)

    optional.sort(key=shed_order)
    count, fitted = _fewest(draft, optional, counter, budget, total)
    if newest is not None and count > optional.index(newest):
        # Whole, it would cost names: its first clause stays instead, after all of them (Done
        # must say what the work achieved, not only that something was left out).
        newest.text = _brief(newest.text)
        optional.remove(newest)
        optional.insert(sum(1 for item in optional if item.tier <= _READ_FILE_TIER), newest)
        count, fitted = _fewest(draft, optional, counter, budget, counter.count(draft.render()))
    draft.remove(frozenset(id(item) for item in optional[:count]))
    if fitted is not None:
        return fitted

    # Only essentials left: shorten before dropping any of them (and say nothing of what went).
    draft.notes = False
    for items in draft.sections.values():
        for item in items:
            if item.path is not None and item.text != _shortened_file(item):
                item.text = _shortened_file(item)
            elif len(item.text) > SHORTENED_CHARS and item.path is None and not item.verbatim:
                item.text = clip(item.text, SHORTENED_CHARS)
    text = draft.render()
    total = counter.count(text)
    if total <= budget:
        return text

    # A budget too small for the essentials: the oldest constraints and files go first, the goal
    # and the error that blocks the work last.
    order = {CONSTRAINTS: 0, FILES: 1, GOAL: 2, BLOCKED: 3}
    essentials = [(name, item) for name in SECTIONS for item in draft.sections[name] if item.tier >= _ESSENTIAL_TIER]
    essentials.sort(key=lambda pair: (order.get(pair[0], -1), pair[1].rank))
    fitted = _drop(draft, [item for _, item in essentials], counter, budget, total)
    return fitted if fitted is not None else draft.render()


def _drop(draft: _Draft, candidates: list[_Item], counter: TokenCounter, budget: int, total: int) -> str | None:
    """Remove the fewest leading `candidates` (in order) for the draft, now `total` tokens, to fit;
    the fitting text, or None when even removing them all does not fit (they are all removed then)."""
    count, text = _fewest(draft, candidates, counter, budget, total)
    draft.remove(frozenset(id(item) for item in candidates[:count]))
    return text


def _fewest(
    draft: _Draft, candidates: list[_Item], counter: TokenCounter, budget: int, total: int
) -> tuple[int, str | None]:
    """How many leading `candidates` (in order) the draft, now `total` tokens, must leave out to
    fit, and the fitting text (None when leaving them all out does not fit); nothing is removed.

    Each bullet's cost is counted once; a running total says how many to remove, and the rendered
    text, counted exactly, confirms it. A few such tries, then a binary search: the summary is
    rendered O(log n) times, never once per bullet.
    """
    costs = [counter.count(f"- {item.text}\n") for item in candidates]

    def without(k: int) -> tuple[str, int]:
        text = draft.render(frozenset(id(item) for item in candidates[:k]))
        return text, counter.count(text)

    def done(k: int, text: str | None) -> tuple[int, str | None]:
        return k, text

    removed = 0
    known_over = 0  # removals known not to be enough
    for _ in range(_ESTIMATED_TRIES):
        while removed < len(candidates) and total > budget:
            total -= costs[removed]
            removed += 1
        text, total = without(removed)
        if total <= budget:
            return done(removed, text)
        if removed == len(candidates):
            return done(removed, None)
        known_over = removed
    text, total = without(len(candidates))
    if total > budget:
        return done(len(candidates), None)
    low, high = known_over, len(candidates)
    while high - low > 1:
        middle = (low + high) // 2
        attempt, total = without(middle)
        if total <= budget:
            high, text = middle, attempt
        else:
            low = middle
    return done(high, text)


__all__ = [
    "ACCOUNT_MIN_TOKENS",
    "ACCOUNT_SECTIONS",
    "ACCOUNT_SHARE",
    "ExtractiveSummarizer",
    "build_summary",
    "focus_keywords",
]
