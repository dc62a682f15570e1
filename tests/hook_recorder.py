"""A hook command for the agent tests: appends the event it is handed to a JSON-lines file.

    python hook_recorder.py LOG LABEL

Each line is `{"label": LABEL, "payload": <the event's JSON on stdin>, "env": {...}}`, where `env` holds
the variables the agent set for its hooks (CLAUDE_*, CODEX_*, CONTEXTFOLD_HOME). It prints nothing, so
the agent carries on as if there were no hook; it always exits 0.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    log, label = sys.argv[1], sys.argv[2]
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = {"unparsed": raw}
    env = {k: v for k, v in os.environ.items() if k.startswith(("CLAUDE", "CODEX", "CONTEXTFOLD_HOME"))}
    line = json.dumps({"label": label, "payload": payload, "env": env}) + "\n"
    # One write of one line in append mode: concurrent hooks (Codex starts them together) do not interleave.
    with open(log, "a", encoding="utf-8") as f:
        f.write(line)


if __name__ == "__main__":
    main()
