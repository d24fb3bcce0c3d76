"""The report rendered: Markdown (figures as PNG files next to it) or one self-contained HTML
page (figures embedded as base64 PNG, styles inline, no script, no network), written atomically."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from dpopt.certificate.model import Certificate, write_atomic
from dpopt.report.document import Report
from dpopt.report.reading import human
from dpopt.report.sections import Image, report_sections, summary_paragraph


def render_markdown(source: Report | Certificate, image_prefix: str = "") -> str:
    """The report as Markdown; figures are linked as ``{image_prefix}{name}.png`` (see :func:`write_report`)."""
    cert = source.certificate if isinstance(source, Report) else source
    return markdown_page(f"dpopt report: {cert['spec']['name']}", summary_paragraph(cert), report_sections(source),
                         image_prefix)


def markdown_page(title: str, summary: str, sections, image_prefix: str = "") -> str:
    """A page in Markdown: the title, the summary paragraph, then each ``(heading, blocks)`` section (a block
    is text, a table as a list of rows, header first, or an :class:`Image`)."""
    lines = [f"# {title}", "", summary, ""]
    for heading, blocks in sections:
        lines += [f"## {heading}", ""]
        for block in blocks:
            if isinstance(block, Image):
                f = block.figure
                lines += [f"![{f.title}]({image_prefix}{f.name}.png)", "", f"*{f.caption}*"]
            elif isinstance(block, list):
                header, *body = block
                lines.append("| " + " | ".join(map(str, header)) + " |")
                lines.append("|" + "---|" * len(header))
                lines += ["| " + " | ".join(human(x).replace("|", "\\|").replace("\n", " ") for x in row) + " |"
                          for row in body]
            else:
                lines.append(human(block))
            lines.append("")
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d1d1f;max-width:72em;margin:2em auto;
padding:0 1.2em;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #1f77b4;padding-bottom:.3em}h2{font-size:1.25em;margin-top:1.8em;
color:#174a7c}
.summary{background:#eef4fb;border-left:4px solid #1f77b4;padding:.6em 1em}
.tablewrap{overflow-x:auto;margin:.8em 0}table{border-collapse:collapse;font-size:.88em}
th{background:#e8eef5;text-align:left}td,th{border:1px solid #c8d0da;padding:.3em .6em;vertical-align:top}
tr:nth-child(even) td{background:#fafbfd}code{background:#f1f1f4;padding:0 .25em;border-radius:3px}
figure{margin:1.2em 0;text-align:center}figure img{max-width:100%;height:auto;border:1px solid #e0e0e0}
figcaption{font-size:.88em;color:#444;max-width:52em;margin:.4em auto 0}
"""


def _inline(text: str) -> str:
    """Escape, then the Markdown the sections use: **bold**, *italic*, `code`."""
    out = html.escape(human(text))
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", out)


def render_html(source: Report | Certificate) -> str:
    """The report as one self-contained HTML page: styles inline, figures as base64 PNG data URIs."""
    cert = source.certificate if isinstance(source, Report) else source
    return html_page(f"dpopt report: {cert['spec']['name']}", summary_paragraph(cert), report_sections(source))


def html_page(title: str, summary: str, sections) -> str:
    """A self-contained HTML page with the sections of :func:`markdown_page`."""
    title = html.escape(title)
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{title}</title><style>{_CSS}</style></head><body>",
        f"<h1>{title}</h1>",
        f"<p class='summary'>{_inline(summary)}</p>",
    ]
    for heading, blocks in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for block in blocks:
            if isinstance(block, Image):
                f = block.figure
                data = base64.b64encode(f.png).decode("ascii")
                parts.append(f"<figure><img alt='{html.escape(f.title, quote=True)}' "
                             f"src='data:image/png;base64,{data}'><figcaption><strong>{html.escape(f.title)}."
                             f"</strong> {_inline(f.caption)}</figcaption></figure>")
            elif isinstance(block, list):
                header, *body = block
                parts.append("<div class='tablewrap'><table><thead><tr>"
                             + "".join(f"<th>{_inline(h)}</th>" for h in header) + "</tr></thead><tbody>")
                parts += ["<tr>" + "".join(f"<td>{_inline(x)}</td>" for x in row) + "</tr>" for row in body]
                parts.append("</tbody></table></div>")
            else:
                parts.append(f"<p>{_inline(block)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(report: Report, path: str | Path, image_prefix: str | None = None) -> list[Path]:
    """Write the report to ``path`` (.html: one self-contained file; otherwise Markdown with a PNG
    per figure next to it, named ``{image_prefix}{name}.png``, by default ``{stem}_{name}.png``).

    Returns the files written.
    """
    path = Path(path)
    if path.suffix.lower() in (".html", ".htm"):
        write_atomic(path, render_html(report))
        return [path]
    prefix = f"{path.stem}_" if image_prefix is None else image_prefix
    written = []
    for f in report.figures:
        target = path.parent / f"{prefix}{f.name}.png"
        write_atomic(target, f.png)
        written.append(target)
    write_atomic(path, render_markdown(report, prefix))
    return [path, *written]
