"""Looking inside a session, read-only: tokens in view by category, its spilled outputs, its
compactions and prunes over time. What `show --breakdown`, `contextfold ui` and the HTML export read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextfold.policy.breakdown import CATEGORIES, split_view
from contextfold.results import Breakdown, BreakdownCategory

if TYPE_CHECKING:
    from contextfold.service.runtime import Scope


class Inspecting:
    """Read one tenant's sessions for a person to look at; nothing here writes."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    async def breakdown(self, session_id: str) -> Breakdown:
        """The view's tokens by category, adding up to `status(session_id).tokens_in_view`."""
        session = await self._scope.store.get_session(session_id)
        visible = await self._scope.view(session)
        status = await self._scope.status(session, visible)
        settings = self._scope.settings_for(session)
        budget = self._scope.budget(session, settings)
        split = split_view(session.system, visible, self._scope.counter(session.model, settings))
        # The stored total of the view is what `status` counts; a difference from its messages
        # (none, unless a total drifted) is shown, never spread over the categories.
        split.add("unattributed", status.tokens_counted - split.total)
        split.add("reported_extra", status.tokens_in_view - status.tokens_counted)
        return Breakdown(
            session_id=session.id,
            model=session.model,
            method=status.method,
            tokens_in_view=status.tokens_in_view,
            tokens_counted=status.tokens_counted,
            tokens_reported=status.tokens_reported,
            context_window=budget.context,
            reserved=budget.reserved,
            usable=status.usable,
            soft_threshold=int(status.usable * settings.soft_ratio),
            hard_threshold=int(status.usable * settings.hard_ratio),
            state=status.state,
            messages_in_view=len(visible),
            categories=[
                BreakdownCategory(name=name, label=label, tokens=split.tokens[name], known=name != "tool_definitions")
                for name, label in CATEGORIES
                if name not in ("reported_extra", "unattributed") or split.tokens[name]
            ],
        )
