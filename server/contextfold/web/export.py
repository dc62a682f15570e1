"""`contextfold export SESSION --html FILE`: the inspector's session pages in one file.

What the model sees now (the breakdown and the whole view), the session's life, its summaries with
each citation linked to the cited message (copied into the file, hidden ones included), and its
spilled outputs beside their previews. The stylesheet and script are inlined and every link is an
anchor inside the file: it opens from `file://` with no network at all.
"""

from __future__ import annotations

from contextfold.service.facade import Tenant
from contextfold.web import pages


async def export_html(tenant: Tenant, sid: str) -> str:
    """The whole export of session `sid` as one HTML document."""
    settings = tenant.settings
    now = await pages.session_now(tenant, sid, 1, per_page=10**9)
    life = await tenant.life(sid)
    summaries = await pages.with_dropped(tenant, sid, await tenant.summaries(sid))
    cited = sorted(
        {seq for message, _, dropped in summaries for seq in pages.cited_seqs(message.text + "\n" + dropped)}
    )
    messages = []
    for seq in cited[: settings.ui_page_messages * 5]:
        found = await tenant.stored_page(sid, after_seq=seq - 1, limit=1)
        messages += [(m, shown, pages.shown_parts(m, stored=True)) for m, shown in found if m.seq == seq]
    outputs = []
    for row in await tenant.spilled_outputs(sid):
        text = await tenant.output_text(row.record.id)
        limit = settings.ui_export_output_chars
        outputs.append((row, text[:limit], max(len(text) - limit, 0)))
    return pages.render(
        "export.html",
        links=pages.FileLinks(),
        sid=sid,
        title=f"{sid} — contextfold export",
        life=life,
        plot=pages.plot(life),
        summaries=summaries,
        cited=messages,
        outputs=outputs,
        output_rows=[row for row, _, _ in outputs],
        **now,
    )


__all__ = ["export_html"]
