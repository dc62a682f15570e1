"""`contextfold hook AGENT EVENT` (what an agent runs) and `contextfold hooks install|uninstall|status AGENT`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

if TYPE_CHECKING:
    from contextfold.config import Settings
    from contextfold.hooks.install import FileChange, Status


def hook(args: argparse.Namespace, settings: Settings | None) -> int:
    """Run one hook event. Never fails the agent: the answer is printed or nothing is (exit 0)."""
    from contextfold.hooks.runner import run

    answer = run(args.agent, args.event, sys.stdin.buffer.read(), home=args.home, config=args.config)
    if answer:  # UTF-8 whatever the locale says: the agent reads JSON (the runner left no lone surrogate in it)
        sys.stdout.buffer.write((answer + "\n").encode("utf-8", "replace"))
    return 0


def install(args: argparse.Namespace, settings: Settings) -> int:
    return _change(args, settings, "install")


def uninstall(args: argparse.Namespace, settings: Settings) -> int:
    return _change(args, settings, "uninstall")


def _change(args: argparse.Namespace, settings: Settings, action: str) -> int:
    from contextfold.hooks import install as setup

    project = Path(args.project) if args.project else None
    no_trust = getattr(args, "no_trust", False)
    if no_trust and args.agent != "codex":
        from contextfold.cli.views import UsageError

        raise UsageError("--no-trust is for codex, whose hooks run only once trusted; Claude Code has no such review")
    plan = setup.plan(
        args.agent,
        action,  # type: ignore[arg-type]
        home=settings.home.resolve(),
        scope=args.scope,
        project=project,
        trust=not no_trust,
    )
    changed = plan.changed
    if args.dry_run:
        for change in changed:
            print(change.diff(), end="")
        verb = "would change" if changed else "would change nothing:"
        print(
            f"{action} {args.agent} ({args.scope} scope) {verb} {_files(changed) if changed else 'already ' + _state(action)}"
        )
        return 0
    setup.apply(plan)
    if changed:
        print(f"{action}ed contextfold for {args.agent} ({args.scope} scope): {_files(changed)}")
    else:
        print(f"contextfold for {args.agent} ({args.scope} scope) is already {_state(action)}; nothing changed")
    if action == "install":
        print(f"data home: {settings.home.resolve()} (hooks and server)")
    for note in plan.notes:
        print(f"note: {note}")
    return 0


def status(args: argparse.Namespace, settings: Settings) -> int:
    """One agent's installation, or, with no agent named, both agents' one after the other."""
    from contextfold.hooks import install as setup

    project = Path(args.project) if args.project else None
    agents = [args.agent] if args.agent else list(get_args(setup.Agent))
    found = [setup.status(agent, scope=args.scope, project=project) for agent in agents]
    failed = any(f.problems for f in found)
    if args.json:
        from contextfold.cli.commands._output import print_json

        shown = [_status_json(f) for f in found]
        print_json(shown[0] if args.agent else shown)
        return 1 if failed else 0
    for i, one in enumerate(found):
        if i:
            print()
        installed = sum(h.installed for h in one.hooks)
        print(f"{one.agent} ({one.scope} scope): {installed} of {len(one.hooks)} hooks in {one.hooks_file}")
        for entry in one.hooks:
            mark = "installed" if entry.installed else "missing"
            trust = f", {entry.trust}" if entry.trust else ""
            print(f"  {entry.event:<17} {mark}{trust}")
        print(f"  MCP server        {'in ' + str(one.server_file) if one.server else 'missing'}")
        if one.home:
            print(f"  data home         {one.home}")
        for problem in one.problems:
            print(f"problem: {problem}")
    return 1 if failed else 0


def _status_json(found: Status) -> dict[str, Any]:
    return {
        "agent": found.agent,
        "scope": found.scope,
        "hooks_file": str(found.hooks_file),
        "server_file": str(found.server_file),
        "home": found.home,
        "hooks": [vars(h) for h in found.hooks],
        "server": found.server,
        "problems": found.problems,
    }


def _files(changes: list[FileChange]) -> str:
    return ", ".join(str(c.path) for c in changes)


def _state(action: str) -> str:
    return "installed" if action == "install" else "not installed"
