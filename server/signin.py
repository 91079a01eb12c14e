"""The teachers' sign-in: the admin key is typed once, then an HttpOnly, SameSite=Strict cookie.

- `POST /api/signin` with `Authorization: Bearer <ADMIN_KEY>`: sets the cookie `samvad_admin`, a
  signed token that opens what the admin key opens for SIGNIN_TTL_SECONDS, while the key stays the
  same. HttpOnly: no script (and no injected one) reads it; SameSite=Strict: no other site's page
  sends it; `Secure` in production and over https. 204; 401 for a wrong key.
- A teacher signs in the same way with their own credential (a teacher token, server/classes/api.py):
  the cookie `samvad_teacher` holds a fresh teacher token for SIGNIN_TTL_SECONDS. 204.
- `POST /api/signout`: clears both. 204.
- `GET /api/signin`: `{"admin": bool, "open": bool, "teacher": id or null}`, whether this request is
  signed in (or needs no key: development without ADMIN_KEY), and as which teacher.

So the key never sits in a URL, a page's storage, or a link the teacher shares (docs/security.md).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from server.auth import TokenError
from server.services import ADMIN_COOKIE, TEACHER_COOKIE, Services, bearer, error_response

__all__ = ["signin_routes"]


async def sign_in(request: Request) -> Response:
    services: Services = request.app.state.services
    settings = services.settings
    try:
        teacher = services.tokens.verify_teacher(bearer(request))
    except TokenError:
        pass
    else:
        response = Response(status_code=204)
        response.set_cookie(TEACHER_COOKIE, services.tokens.issue_teacher(teacher, settings.SIGNIN_TTL_SECONDS),
                            max_age=settings.SIGNIN_TTL_SECONDS, path="/", httponly=True, samesite="strict",
                            secure=settings.production or request.url.scheme == "https")
        return response
    key = settings.ADMIN_KEY
    if not key:
        return JSONResponse({"admin": services.admin_open, "open": services.admin_open},
                            status_code=200 if services.admin_open else 401)
    if not services.tokens.check_admin(bearer(request), key):
        return error_response(401, "unauthorized", "send the admin key as Authorization: Bearer")
    response = Response(status_code=204)
    response.set_cookie(ADMIN_COOKIE, services.tokens.issue_admin(key, settings.SIGNIN_TTL_SECONDS),
                        max_age=settings.SIGNIN_TTL_SECONDS, path="/", httponly=True, samesite="strict",
                        secure=settings.production or request.url.scheme == "https")
    return response


async def sign_out(request: Request) -> Response:
    response = Response(status_code=204)
    response.delete_cookie(ADMIN_COOKIE, path="/", httponly=True, samesite="strict")
    response.delete_cookie(TEACHER_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def signed_in(request: Request) -> JSONResponse:
    services: Services = request.app.state.services
    return JSONResponse({"admin": services.is_admin(request), "open": services.admin_open,
                         "teacher": services.teacher_of(request)})


def signin_routes() -> list[BaseRoute]:
    return [
        Route("/api/signin", sign_in, methods=["POST"]),
        Route("/api/signin", signed_in, methods=["GET"]),
        Route("/api/signout", sign_out, methods=["POST"]),
    ]
