"""A report (`core.report.content.Report`) as self-contained HTML, GitHub-ready Markdown or
JSON. Everything shown comes from `report.data`, already redacted when asked."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from typing import Any

from tfdoctor.core.report import svgplot
from tfdoctor.core.report.content import Report

FORMATS = ("html", "md", "json")
SUFFIXES = {"html": ".html", "md": ".md", "json": ".json"}
# no script, no request anywhere: the report shows the same offline and in a mail client
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def render(report: Report, fmt: str) -> str:
    """The report in `fmt` (html, md or json).

    Raises:
        ValueError: an unknown format.
    """
    renderers: dict[str, Callable[[Report], str]] = {
        "html": to_html,
        "md": to_markdown,
        "json": to_json,
    }
    if fmt not in renderers:
        raise ValueError(f"unknown report format {fmt!r}: choose html, md or json")
    return renderers[fmt](report)


def to_json(report: Report) -> str:
    return json.dumps(report.data, indent=2, ensure_ascii=False, default=str) + "\n"


# --------------------------------------------------------------------------- HTML

_STYLE = """
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;
max-width:960px;margin:24px auto;padding:0 16px;line-height:1.45}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;border-bottom:1px solid #d8dee4;
padding-bottom:4px;margin-top:28px}h3{font-size:16px;margin:14px 0 4px}
.meta{color:#59636e;font-size:13px}.headline{font-size:17px;margin:10px 0}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #d8dee4;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f6f8fa}
pre{background:#f6f8fa;border:1px solid #d8dee4;padding:8px;overflow-x:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all}
.cause{border-left:4px solid #c62828;padding:2px 12px;margin:10px 0}
.cause.rest{border-left-color:#b26a00}.conf{color:#59636e}
.sev-error{color:#c62828;font-weight:bold}.sev-warning{color:#b26a00;font-weight:bold}
.redaction{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;font-size:13px}
figure{margin:8px 0}figure img{max-width:100%;border:1px solid #d8dee4}
figcaption{font-size:12px;color:#59636e}.swatch{display:inline-block;width:18px;height:3px;
vertical-align:middle;margin:0 4px 0 10px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _where(row: dict[str, Any]) -> str:
    src, line = row.get("source"), row.get("line")
    if src and line is not None:
        return f"{src}:{line}: "
    if line is not None:
        return f"line {line}: "
    return f"{src}: " if src else ""


def _evidence_text(rows: list[dict[str, Any]]) -> str:
    return "\n".join(_where(r) + str(r.get("text", "")) for r in rows)


def to_html(report: Report) -> str:
    d = report.data
    out: list[str] = []
    add = out.append
    add("<!DOCTYPE html>")
    add('<html lang="en"><head><meta charset="utf-8">')
    add(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">')
    add('<meta name="viewport" content="width=device-width, initial-scale=1">')
    add(f"<title>tfdoctor report: {_e(d['summary']['headline'])}</title>")
    add(f"<style>{_STYLE}</style></head><body>")
    add('<h1 id="top">tfdoctor report</h1>')
    meta = f"tfdoctor {_e(d['tool']['version'])} · {_e(d['generated_at'])}"
    if d.get("investigation"):
        meta += f" · from {_e(d['investigation'])}"
    add(f'<p class="meta">{meta}</p>')
    add(f'<p class="headline" id="headline"><b>Most likely:</b> {_e(d["summary"]["headline"])}</p>')
    add(f'<p class="redaction" id="redaction">{_e(d["redaction"]["note"])}')
    if d["redaction"]["replaced"]:
        add(" Replaced: " + _e("; ".join(d["redaction"]["replaced"])) + ".")
    add("</p>")

    add('<h2 id="environment">Environment</h2><table>')
    for row in d["environment"]:
        add(f"<tr><th>{_e(row['label'])}</th><td>{_e(row['value'])}</td></tr>")
    add("</table>")

    err = d["error"]
    add('<h2 id="error">The error</h2>')
    if err["lines"]:
        add(f"<p>From {_e(err['from'])}:</p><pre>{_e(_evidence_text(err['lines']))}</pre>")
    else:
        add(f"<p>{_e(err.get('note') or 'none')}</p>")

    add('<h2 id="diagnosis">Diagnosis</h2>')
    if not d["causes"]:
        add(f"<p>{_e(d['summary']['headline'])}.</p>")
    for c in d["causes"]:
        add(_cause_html(c))
    if d["experiments"]:
        add("<h3>What tfdoctor's own runs showed (not evidence about your crash)</h3>")
        for c in d["experiments"]:
            add(_cause_html(c))

    tried = d["tried"]
    add('<h2 id="tried">What was tried</h2>')
    if not tried["actions"] and not tried["verifications"]:
        add("<p>No fix was applied or verified in this investigation.</p>")
    if tried["actions"]:
        add("<ul>")
        for a in tried["actions"]:
            what = ", ".join(a["fixes"])
            add(f"<li>{_e(a['action'])}: {_e(what)} on {_e(a['target'])} ({_e(a['at'])})</li>")
        add("</ul>")
    for v in tried["verifications"]:
        add(f"<h3>Verified: {_e(' + '.join(v['fixes']))}: {_e(v['verdict'])}</h3>")
        add("<table><tr><th></th><th>before</th><th>with the fix</th></tr>")
        for r in v["table"]:
            add(f"<tr><td>{_e(r['measure'])}</td><td>{_e(r['before'])}</td>")
            add(f"<td>{_e(r['after'])}</td></tr>")
        add("</table>")
        for n in v["notes"]:
            add(f"<p>{_e(n)}</p>")
        add(_figure(report, v.get("plot")))

    if d["runs"]:
        add('<h2 id="runs">Runs</h2>')
    for r in d["runs"]:
        if r["kind"] == "benchmark":
            add(f"<h3>Benchmark: {_e(r['config'])}</h3>")
            said = f"{r['outcome_words']} after {r['duration_s']} s"
            if r.get("detail"):
                said += f": {r['detail']}"
            add(f"<p>{_e(said)}</p>")
            if r.get("memory_cap"):
                add(f"<p>Memory cap for the run: {_e(r['memory_cap'])}</p>")
            if r["numbers"]:
                add(
                    "<p>"
                    + " · ".join(f"{_e(k)}: <b>{_e(v)}</b>" for k, v in r["numbers"].items())
                    + "</p>"
                )
        else:
            add(f"<h3>Watch of {_e(r['watched'])}</h3>")
            add(f"<p>{_e(r['outcome_words'])} after {_e(r['duration_s'])} s</p>")
        add(_figure(report, r.get("plot")))

    if d["findings"]:
        add('<h2 id="findings">Environment check</h2>')
        for f in d["findings"]:
            add(
                f'<p><span class="sev-{_e(f["severity"])}">{_e(f["severity"].upper())}</span> '
                f"<b>{_e(f['title'])}</b><br>{_e(f['explanation'])}</p>"
            )
            if f["evidence"]:
                add(f"<pre>{_e(_evidence_text(f['evidence']))}</pre>")

    add('<h2 id="fix-script">Fix script</h2>')
    script = d["fix_script"]
    if script["text"]:
        add("<p>A dry run by default; <code>--apply</code> makes the changes.</p>")
        add(f"<details><summary>tfdoctor-fix.sh</summary><pre>{_e(script['text'])}</pre>")
        add("</details>")
    else:
        add(f"<p>No fix script: {_e(script['why_not'])}</p>")

    if d["logs"]:
        add('<h2 id="logs">Logs</h2>')
    for lg in d["logs"]:
        n = len(lg.get("tail") or [])
        add(f"<details><summary>{_e(lg['name'])}: its last {n} lines</summary>")
        add(f"<pre>{_e(chr(10).join(lg.get('tail') or []))}</pre></details>")
    add(f'<p class="meta">Made by tfdoctor {_e(d["tool"]["version"])}.</p>')
    add("</body></html>")
    return "\n".join(out) + "\n"


def _cause_html(c: dict[str, Any]) -> str:
    cls = "cause" if c["rank"] == 1 else "cause rest"
    parts = [
        f'<div class="{cls}"><h3>{c["rank"]}. {_e(c["title"])} '
        f'<span class="conf">— {_e(c["confidence_words"])} '
        f"({round(c['confidence'] * 100)}%)</span></h3>",
        f"<p>{_e(c['explanation'])}</p>",
    ]
    if c["seen_in"]:
        parts.append(f"<p class='conf'>Seen in: {_e(', '.join(c['seen_in']))}</p>")
    if c["evidence"]:
        parts.append(f"<pre>{_e(_evidence_text(c['evidence']))}</pre>")
    if c["fixes"]:
        parts.append(
            "<p>Fixes: " + ", ".join(f"{_e(f['title'])} [{_e(f['id'])}]" for f in c["fixes"])
        )
        parts.append("</p>")
    parts.append("</div>")
    return "\n".join(parts)


def image_uri(svg: str) -> str:
    """An SVG picture as a data: URI (an embedded image: no file beside the report)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _figure(report: Report, plot_id: str | None) -> str:
    plot = next((p for p in report.plots if p.id == plot_id), None)
    if plot is None:
        return ""
    legend = "".join(
        f'<span class="swatch" style="background:{_e(colour)}"></span>{_e(label)}'
        + (" (dashed)" if dashed else "")
        for label, colour, dashed in plot.legend
    )
    return (
        f'<figure id="plot-{_e(plot.id)}"><img src="{image_uri(plot.svg)}" alt="{_e(plot.alt)}" '
        f'width="{svgplot.WIDTH}" height="{svgplot.HEIGHT}"><figcaption>{_e(plot.title)}<br>'
        f"{legend}</figcaption></figure>"
    )


# --------------------------------------------------------------------------- Markdown


def _fence(text: str, lang: str = "text") -> str:
    """A code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _details(summary: str, body: str) -> str:
    # the blank lines let GitHub render the Markdown inside the block
    return f"<details><summary>{html.escape(summary)}</summary>\n\n{body}\n\n</details>"


def to_markdown(report: Report) -> str:
    d = report.data
    out: list[str] = []
    add = out.append
    add(f"### tfdoctor report: {d['summary']['headline']}")
    add("")
    meta = f"_tfdoctor {d['tool']['version']} · {d['generated_at']}"
    add(meta + (f" · from {d['investigation']}_" if d.get("investigation") else "_"))
    add("")
    add("| | |")
    add("|---|---|")
    for row in d["environment"]:
        add(f"| **{_cell(row['label'])}** | {_cell(row['value'])} |")
    add("")
    err = d["error"]
    add("**The error**" + (f" (from {err['from']}):" if err["lines"] else ""))
    add("")
    add(_fence(_evidence_text(err["lines"])) if err["lines"] else f"_{err.get('note')}_")
    add("")
    add("**Diagnosis**")
    add("")
    if not d["causes"]:
        add(f"{d['summary']['headline']}.")
        add("")
    for c in d["causes"] + [{**e, "experiment": True} for e in d["experiments"]]:
        if c.get("experiment") and c["rank"] == 1:
            add("**What tfdoctor's own runs showed** (not evidence about your crash)")
            add("")
        pct = round(c["confidence"] * 100)
        add(f"{c['rank']}. **{c['title']}** — {c['confidence_words']} ({pct}%)")
        add(f"   {c['explanation']}")
        if c["seen_in"]:
            add(f"   Seen in: {', '.join(c['seen_in'])}.")
        if c["fixes"]:
            add("   Fixes: " + ", ".join(f"{f['title']} (`{f['id']}`)" for f in c["fixes"]))
        if c["evidence"]:
            add("")
            evidence = _fence(_evidence_text(c["evidence"]))
            add(_details(f"Evidence ({len(c['evidence'])} lines)", evidence))
        add("")
    tried = d["tried"]
    add("**What was tried**")
    add("")
    if not tried["actions"] and not tried["verifications"]:
        add("No fix was applied or verified yet.")
    for a in tried["actions"]:
        add(f"- {a['action']}: {', '.join(a['fixes'])} on {a['target']} ({a['at']})")
    for v in tried["verifications"]:
        add(f"- verified {' + '.join(v['fixes'])}: **{v['verdict']}**")
        add("")
        add("  | | before | with the fix |")
        add("  |---|---|---|")
        for r in v["table"]:
            add(f"  | {_cell(r['measure'])} | {_cell(r['before'])} | {_cell(r['after'])} |")
    add("")
    for r in d["runs"]:
        if r["kind"] == "benchmark":
            nums = ", ".join(f"{k} {v}" for k, v in r["numbers"].items())
            add(
                f"**Benchmark** ({r['config']}): {r['outcome_words']} after {r['duration_s']} s"
                + (f"; {nums}" if nums else "")
            )
        else:
            add(f"**Watch** of {r['watched']}: {r['outcome_words']} after {r['duration_s']} s")
        add("")
    if report.plots:
        peaks = "\n".join(f"- {p.alt}" for p in report.plots)
        add(peaks + "\n\n_The memory plots are in the HTML report (`--format html`)._")
        add("")
    if d["findings"]:
        rows = "\n".join(
            f"- **{f['severity'].upper()}** {f['title']}: {f['explanation']}" for f in d["findings"]
        )
        add(_details(f"Environment check: {len(d['findings'])} findings", rows))
        add("")
    script = d["fix_script"]
    if script["text"]:
        what = "Fix script (tfdoctor-fix.sh, a dry run until --apply)"
        add(_details(what, _fence(script["text"], "sh")))
        add("")
    for lg in d["logs"]:
        tail = "\n".join(lg.get("tail") or [])
        add(_details(f"{lg['name']}: its last {len(lg.get('tail') or [])} lines", _fence(tail)))
        add("")
    note = d["redaction"]["note"]
    if d["redaction"]["replaced"]:
        note += " Replaced: " + "; ".join(d["redaction"]["replaced"]) + "."
    add(f"<sub>{html.escape(note)}</sub>")
    return "\n".join(out).rstrip() + "\n"
