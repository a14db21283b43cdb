"""web: the explorer — a JSON API (FastAPI) over the library and one self-contained page.

A face: every endpoint validates its input with a pydantic model, calls a library function and
returns its ``to_dict()``. The page (``static/``) draws with plotly's own bundled
``plotly.min.js``, served from the installed ``plotly`` package: no CDN, no build step.

Layer rule: imports the library layers and ``report``; only ``cli`` imports ``web``, lazily, since
fastapi, uvicorn and plotly are the optional extra ``web`` (``pip install ridgeline[web]``).
"""
