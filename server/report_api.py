"""`GET /api/sessions/{id}/report`: the learner report of an ended session, as JSON or as a page.

With `Accept: text/html` (or `?format=html`, for a plain link) the answer is a printable page:
the outcome and the price against the fair range, the score and its parts, charts of the
concession curve (the vendor's quotes against the learner's offers) and of the vendor's
happiness, the stages, etiquette, the three suggestions and the cards earned. The charts are
inline SVG drawn here, so the page needs no script, prints as it shows and can be saved as one
file. Every value from the session is HTML-escaped.

The same token rules as `GET /api/sessions/{id}` (a token of that session, either role, as
`Authorization: Bearer`), and one more, for a plain link: `?token=` with a report token of that
session (the `report_url` of a learner's progress, short-lived: it opens this report and nothing
else), or the spectator token the watch page already holds. A player token is never read from the
URL. A session still being played answers 409 `not_ended`.
"""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from schemas.enums import Role
from schemas.report import CurvePoint, LearnerReport
from server.auth import TokenError
from server.http_api import find_actor, session_actor
from server.services import Services, bearer, error_response
from session.actor import SessionActor
from session.report import learner_report

__all__ = ["report_routes"]

_W, _H, _PAD = 560, 200, 32
NONE, DASH = "\u2013", "\u2013"  # an en dash: no value, and a range


def _polyline(points: list[tuple[int, float]], top: float, turns: int, color: str, dashed: bool = False) -> str:
    if not points:
        return ""
    def x(turn: int) -> float:
        return _PAD + (_W - 2 * _PAD) * (turn - 1) / max(1, turns - 1)

    def y(value: float) -> float:
        return _H - _PAD - (_H - 2 * _PAD) * value / max(1.0, top)

    path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
    dots = "".join(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>' for t, v in points)
    dash = ' stroke-dasharray="5 4"' if dashed else ""
    return f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>{dots}'


def _chart(title: str, series: list[tuple[str, str, list[tuple[int, float]], bool]], top: float, turns: int) -> str:
    axis = (f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#94a3b8"/>'
            f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_H - _PAD}" stroke="#94a3b8"/>'
            f'<text x="{_PAD}" y="{_PAD - 8}" font-size="11" fill="#475569">{escape(str(round(top)))}</text>'
            f'<text x="{_W - _PAD}" y="{_H - 8}" font-size="11" fill="#475569" text-anchor="end">turn {turns}</text>')
    lines = "".join(_polyline(points, top, turns, color, dashed) for _, color, points, dashed in series)
    legend = " ".join(f'<span class="key" style="border-color:{color}">{escape(name)}</span>'
                      for name, color, _, _ in series)
    return (f'<figure><figcaption>{escape(title)} {legend}</figcaption>'
            f'<svg viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" aria-label="{escape(title)}">'
            f'{axis}{lines}</svg></figure>')


def _curves(curve: tuple[CurvePoint, ...]) -> str:
    turns = max((p.turn for p in curve), default=1)
    quotes = [(p.turn, float(p.quote)) for p in curve if p.quote is not None]
    offers = [(p.turn, float(p.offer)) for p in curve if p.offer is not None]
    top = max([v for _, v in quotes + offers] or [1.0])
    happiness = [(p.turn, float(p.happiness)) for p in curve]
    return (_chart("Concession curve", [("vendor's quote", "#b45309", quotes, False),
                                        ("your offer", "#0f766e", offers, True)], top, turns)
            + _chart("Vendor's happiness", [("happiness", "#7c3aed", happiness, False)], 100.0, turns))


def report_page(report: LearnerReport, vendor: str, currency: str) -> str:
    """The printable HTML page of a report."""
    p, e = report.price, report.etiquette
    def money(value: int | None) -> str:
        return NONE if value is None else f"{escape(currency)} {value}"

    fair = NONE if p.fair is None else f"{money(p.fair[0])}{DASH}{p.fair[1]}"
    # Every value below is escaped (or a number) before it goes into the page.
    facts = [("Outcome", escape(report.outcome.value.replace("_", " "))), ("Item", escape(report.item or NONE)),
             ("Price paid", money(p.paid)), ("First quote", money(p.first_quote)), ("Fair range", fair),
             ("Vendor's floor", money(p.floor)),
             ("Discount", NONE if p.discount_pct is None else f"{p.discount_pct}%"), ("Turns", str(report.turns))]
    parts = " · ".join(f"{escape(k)} {v}" for k, v in report.score_parts.items())
    stages = "".join(f"<li>{escape(s.stage.value)}: {s.turns} turns, {s.seconds} s</li>" for s in report.stages)
    cards = "".join(f"<li><strong>{escape(c.title)}</strong> (turn {c.turn})</li>" for c in report.cards_earned) \
        or "<li>No grounded card this time.</li>"
    etiquette = (f"<li>Respectful turns: {e.respectful_turns}"
                 + (f" ({escape(', '.join(e.respectful_words))})" if e.respectful_words else "") + "</li>"
                 f"<li>Insults: {e.insults} · taboo words: {e.taboo} · lowballs: {e.lowballs}</li>"
                 f"<li>Walked away: {'yes' if e.walked_away else 'no'}"
                 + (", and the haggle resumed" if e.came_back else "") + "</li>")
    c = report.coaching
    coaching = (f"<li>Level: {escape(report.level.value)}</li>"
                f"<li>Hints asked: {c.hints[0]} about the situation, {c.hints[1]} sentence frames, "
                f"{c.hints[2]} whole lines · offered unasked: {c.hints_offered}</li>"
                f"<li>Repeats: {c.repeats} · undos: {c.undos} · silences: {c.timeouts} · "
                f"unclear turns: {c.unclear}</li>")
    est = report.estimate
    if est is not None:
        ev = est.evidence
        share = f", {round(100 * ev.target_share)} % of known words in the language learned" \
            if ev.target_share is not None else ""
        coaching += (f"<li class=\"estimate\" data-band=\"{est.band}\">Estimated level this session: {est.band} "
                     f"({escape(est.level.value)}), {round(100 * est.confidence)} % sure, from {ev.learner_turns} "
                     f"lines of {ev.mean_words:g} words{share}, {ev.hints_per_turn:g} hints and "
                     f"{ev.repairs_per_turn:g} repairs a line</li>")
    f = report.fluency
    if f is not None:
        coaching += (f"<li class=\"fluency\" data-wpm=\"{f.words_per_minute}\">Speaking, over {f.turns} spoken "
                     f"turn{'s' if f.turns != 1 else ''}: {f.words_per_minute:g} words a minute · "
                     f"{round(100 * f.pause_ratio)} % of the time in pauses · {f.mean_length_of_run:g} words "
                     f"between pauses · {f.fillers} filler{'s' if f.fillers != 1 else ''}</li>")
    practised = "".join(
        f'<li data-recalled="{str(k.recalled).lower()}">{escape(k.phrase)}: '
        + (f"said at turn {k.turn} (&ldquo;{escape(k.said)}&rdquo;)" if k.recalled and k.turn is not None
           else "kept" if k.recalled else "not yet")
        + (f" <small>(review: {escape(k.rating)})</small>" if k.rating else " <small>(no review: too short)</small>")
        + "</li>" for k in report.practised) or "<li>Nothing due for review this time.</li>"
    clamps = "".join(f"<li>Turn {k.turn}: {escape(k.explanation)} <small>({escape(k.flag)})</small></li>"
                     for k in report.clamps) or "<li>The vendor kept to the rules on his own.</li>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Samvad report: {escape(vendor)}, {escape(report.item or '')}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; max-width: 860px; margin: 24px auto; color: #0f172a; }}
h1 {{ margin: 0 0 4px; }} .score {{ font-size: 44px; font-weight: 700; }} dl {{ display: grid;
grid-template-columns: repeat(4, 1fr); gap: 8px; }} dt {{ color: #64748b; font-size: 12px; }} dd {{ margin: 0; }}
figure {{ margin: 12px 0; }} figcaption {{ font-weight: 600; }} .key {{ border-bottom: 3px solid; margin-left: 8px;
font-weight: 400; font-size: 12px; }} @media print {{ body {{ margin: 0; }} }}
</style></head><body class="report">
<h1>Your haggle with {escape(vendor)}</h1>
<p class="score" data-score="{report.score}">{report.score}<small>/100</small></p>
<p>{parts}</p>
<dl>{''.join(f'<div><dt>{escape(k)}</dt><dd>{v}</dd></div>' for k, v in facts)}</dl>
{_curves(report.curve)}
<h2>Next time</h2><ol class="suggestions">{''.join(f'<li>{escape(s)}</li>' for s in report.suggestions)}</ol>
<h2>Stages</h2><ul>{stages}</ul>
<h2>Etiquette</h2><ul>{etiquette}</ul>
<h2>Practice</h2><ul class="coaching">{coaching}</ul>
<h2>Brought back from last time</h2><ul class="practised">{practised}</ul>
<h2>Where the rules stepped in</h2><ul class="clamps">{clamps}</ul>
<h2>Cards you earned</h2><ul class="cards">{cards}</ul>
</body></html>"""


async def _linked_actor(services: Services, request: Request, token: str) -> SessionActor | JSONResponse:
    """The session of a report link's `?token=`: a report token, or a spectator token, of that session."""
    sid = request.path_params["session_id"]
    try:
        linked = services.tokens.verify_report(token)
    except TokenError:
        try:
            claims = services.tokens.verify(token)
        except TokenError as exc:
            return error_response(401, "unauthorized", f"bad token: {exc}")
        if claims.role is not Role.SPECTATOR:
            return error_response(401, "unauthorized", "a link carries a report or spectator token; send a "
                                  "player token as Authorization: Bearer")
        linked = claims.session_id
    if linked != sid:
        return error_response(403, "forbidden", "token is for another session")
    return await find_actor(services, sid)


async def get_report(request: Request) -> Response:
    services: Services = request.app.state.services
    linked = request.query_params.get("token")
    actor = (await _linked_actor(services, request, linked) if linked and bearer(request) is None
             else await session_actor(request))
    if isinstance(actor, JSONResponse):
        return actor
    negotiation = actor.negotiation
    if negotiation.outcome is None:
        return error_response(409, "not_ended", "the report is made when the session ends")
    report = learner_report(negotiation, services.knowledge)
    wants_page = request.query_params.get("format") == "html" or "text/html" in request.headers.get("accept", "")
    if wants_page:
        scenario = negotiation.scenario
        return HTMLResponse(report_page(report, scenario.vendor.name, scenario.currency))
    return JSONResponse(report.model_dump(mode="json"))


def report_routes() -> list[BaseRoute]:
    return [Route("/api/sessions/{session_id}/report", get_report, methods=["GET"])]
