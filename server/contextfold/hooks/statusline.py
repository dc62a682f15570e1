"""Claude Code's status line: tokens in view against the usable budget, the state, what was spilled.

Claude Code runs its `statusLine` command after each message with a JSON object on stdin and shows
the first line it prints. That object carries the window Claude Code itself counts
(`context_window.total_input_tokens`, `context_window_size`) and the model; contextfold adds its
own reading of it — the usable budget (the window less what is kept for the reply, as `catalog`
computes it for every session), the state with contextfold's thresholds (`soft` at 70 % of usable,
`hard` at 90 %, `overflow`), and the outputs its hooks spilled in this session. Cheap: no store,
no settings model, no tokenizer (the spill count comes from the hooks' own state file).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def status_line(event: Mapping[str, Any], limits: Mapping[str, Any], spilled: int) -> str:
    from contextfold.policy.overflow import assess
    from contextfold.tokens.catalog import budget, lookup

    given, described = event.get("context_window"), event.get("model")
    window: Mapping[str, Any] = given if isinstance(given, dict) else {}
    model = described.get("id") if isinstance(described, dict) else None
    tokens = window.get("total_input_tokens")
    size = window.get("context_window_size")
    info = lookup(model if isinstance(model, str) else "claude")
    limit = budget(
        info,
        context=int(size) if isinstance(size, (int, float)) and size > 0 else None,
        reserved=limits.get("reserved"),
    )
    outputs = f" · {spilled:,} output{'s' if spilled != 1 else ''} spilled" if spilled else ""
    if not isinstance(tokens, (int, float)):
        return f"contextfold · {limit.usable:,} usable{outputs}"
    seen = assess(int(tokens), limit, soft_ratio=limits["soft_ratio"], hard_ratio=limits["hard_ratio"])
    return f"contextfold · {int(tokens):,} of {limit.usable:,} usable ({seen.ratio:.0%}) · {seen.state}{outputs}"


__all__ = ["status_line"]
