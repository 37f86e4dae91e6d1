"""The ASGI app: the page, its assets, ``POST /api/plan`` (check's JSON) and ``POST /api/view`` (JSON + charts + what
the sliders show, from the engine: ``Engine.slider_view``).

Guards: Host must be 127.0.0.1 or localhost (no DNS rebinding); a POST must be JSON (a cross-site form cannot
send it without a preflight, which is never answered) and, when the browser names its Origin, come from this
page; bodies are bounded in size and time; errors are one line, ``{"error": ...}`` with HTTP 400 (408 too slow, 413 too
large, 415 not JSON, 503 no planning slot: ``serve.limits``).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError

MAX_BODY = 512 * 1024
ASSETS = {"style.css": "text/css", "copy.js": "text/javascript", "page.js": "text/javascript"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
       "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def _read_json(request: Any) -> Any:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise BadRequest(415, "send the request as JSON (Content-Type: application/json)")
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host')}":
        raise BadRequest(403, "requests come from the kvplan page only")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
        raise BadRequest(413, f"the request is over {MAX_BODY // 1024} KiB")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise BadRequest(413, f"the request is over {MAX_BODY // 1024} KiB")
    from kvplan import validate

    try:
        return validate.json_value(bytes(body), "the request")
    except KvplanError as e:
        raise BadRequest(400, str(e)) from None


def _error(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=HEADERS)


async def _answer(request: Any, with_html: bool, slots: Any) -> Any:
    import asyncio

    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    from kvplan.serve import limits
    from kvplan.serve.inputs import parse_request
    from kvplan.serve.planner import plan_view

    try:
        try:
            body = await asyncio.wait_for(_read_json(request), limits.BODY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise BadRequest(408, f"the request did not arrive within {limits.BODY_TIMEOUT_S:g} s") from None
        req = parse_request(body)
        async with slots:  # a body that arrived waits for a planning slot (a slow client holds none)
            d, sliders = await run_in_threadpool(plan_view, req)
            if not with_html:
                return JSONResponse(d, headers=HEADERS)
            from kvplan.report.html.render import render_check_fragment

            html = await run_in_threadpool(render_check_fragment, d)
        return JSONResponse({"plan": d, "html": html, "sliders": sliders}, headers=HEADERS)
    except limits.Busy as e:
        return _error(503, f"kvplan serve is busy ({e}); try again")
    except BadRequest as e:
        return _error(e.status, str(e))
    except KvplanError as e:
        return _error(400, str(e))
    except RecursionError:
        return _error(400, "the request is nested too deeply")
    except Exception as e:  # noqa: BLE001 - one line for the page, never a traceback
        return _error(500, f"internal error: {type(e).__name__}: {e}")


def create_app() -> Any:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import HTMLResponse, Response
    from starlette.routing import Route

    from kvplan.serve.limits import PlanSlots
    from kvplan.serve.page import asset_text, render_index

    slots = PlanSlots()

    async def index(request: Any) -> Any:
        return HTMLResponse(render_index(), headers=HEADERS)

    async def asset(request: Any) -> Any:
        name = request.path_params["name"]
        if name not in ASSETS:
            return _error(404, "no such asset")
        return Response(asset_text(name), media_type=ASSETS[name], headers=HEADERS)

    async def api_plan(request: Any) -> Any:
        return await _answer(request, with_html=False, slots=slots)

    async def api_view(request: Any) -> Any:
        return await _answer(request, with_html=True, slots=slots)

    async def not_found(request: Any, exc: Any) -> Any:
        code = getattr(exc, "status_code", 404)
        return _error(code, "use POST with a JSON body" if code == 405 else "not found")

    routes = [Route("/", index), Route("/assets/{name}", asset), Route("/api/plan", api_plan, methods=["POST"]),
              Route("/api/view", api_view, methods=["POST"])]
    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware,
                                                           allowed_hosts=["127.0.0.1", "localhost"])],
                     exception_handlers={404: not_found, 405: not_found})
