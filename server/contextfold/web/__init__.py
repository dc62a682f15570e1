"""`contextfold ui` and `contextfold export --html`: a session seen in a browser.

Server-rendered pages (Starlette on uvicorn, which the HTTP transport already brings, and jinja2
templates) with a little plain JavaScript for the theme, the keyboard and live updates; the
composition bar and the session's life are SVG drawn by the templates. Nothing is fetched from
anywhere else: the stylesheet and the script are inlined in every page, so the HTML export is the
same pages in one file. Everything goes through the service (`ContextService`, a `Tenant`), never
the store, and nothing here writes.
"""
