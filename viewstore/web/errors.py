"""The one place errors become answers: a one-line JSON error under /api/, a small page
elsewhere; never a traceback, and never a driver's message for input a client controls."""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger("viewstore.web")


def error_response(request: Request, status: int, message: str) -> Response:
    message = " ".join(message.split())  # one line, whatever the exception said
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    page: Response = request.app.state.templates.TemplateResponse(
        request, "error.html", {"status": status, "message": message}, status_code=status
    )
    return page


def handler(status: int) -> Any:
    """The exception handler that answers ``status``."""

    def handle(request: Request, exc: Exception) -> Response:
        if status == 500:
            log.exception("viewer error on %s", request.url.path, exc_info=exc)
            message = "the viewer failed on this request; the server log has the details"
        elif status == 503:
            message = f"the database could not answer: {exc}"
        else:
            message = str(exc)
        return error_response(request, status, message)

    return handle


def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(request, exc.status_code, str(exc.detail))
