"""How a gradient report reads: the aligned text table, the printed report, and its HTML for Jupyter.

:class:`~microtape.check.rows.GradientReport` holds the rows and the
verdict; these functions lay them out (its ``table()``, ``str()`` and
``_repr_html_()`` call them). A report may rename its columns by overriding
``_columns`` (the tiled report does).
"""

import html
from typing import Any

__all__ = ["columns", "text_table", "report_text", "report_html"]


def columns(report: Any) -> Any:
    """The table's columns, ``(header, getter, alignment)``: the FD column only when finite differences ran."""
    listed = [
        ("gradient", lambda r: r.label, "<"),
        ("tape node", lambda r: r.name, "<"),
        ("formula", lambda r: r.formula, "<"),
        ("shape", lambda r: _shape_text(r.shape), "<"),
        ("|analytic|", lambda r: f"{r.analytic_norm:.4g}", ">"),
        ("|taped|", lambda r: f"{r.taped_norm:.4g}", ">"),
        ("max abs err", lambda r: _number(r.max_abs_error), ">"),
        ("max rel err", lambda r: _number(r.max_rel_error), ">"),
    ]
    if any(row.fd_entries for row in report.rows):
        listed.append(("FD err", lambda r: _number(r.fd_error) if r.fd_entries else "-", ">"))
    listed.append(("result", lambda r: "ok" if r.passed else "FAIL", "<"))
    return listed


def text_table(report: Any) -> Any:
    """The rows as an aligned text table (no title or details)."""
    columns = report._columns()
    cells = [[getter(row) for _, getter, _ in columns] for row in report.rows]
    widths = [max([len(header)] + [len(line[i]) for line in cells]) for i, (header, _, _) in enumerate(columns)]

    def line(values: Any) -> Any:
        parts = [f"{v:{align}{w}}" for v, (_, _, align), w in zip(values, columns, widths, strict=True)]
        return "  ".join(parts).rstrip()

    lines = [line([header for header, _, _ in columns]), "  ".join("-" * w for w in widths)]
    first = report.first_failing_row
    for row, values in zip(report.rows, cells, strict=True):
        text = line(values)
        if row is first:
            text += "   <-- first failure"
        lines.append(text)
    return "\n".join(lines)


def report_text(report: Any) -> Any:
    """The printed report: title, details, tolerance, the table, notes and the verdict."""
    lines = [report.title]
    lines += [f"  {detail}" for detail in report.details]
    lines.append(f"  tolerance: {report.tolerance_text}")
    if report.fd_text:
        lines.append(f"  finite differences: {report.fd_text}")
    lines += ["", report.table(), ""]
    notes = [f"  {row.label}: {row.note}" for row in report.rows if row.note]
    if notes:
        lines += ["notes:", *notes, ""]
    lines.append(("OK: " if report.ok else "FAILED: ") + report.verdict_text())
    return "\n".join(lines)


def report_html(report: Any) -> Any:
    """The report as HTML, for Jupyter: failing rows in red, the formula's LaTeX as its tooltip.

    Cells are padded (numbers never run into the next column's text) and wrap (names and formulas
    anywhere, numbers never), so the table fits a narrow column (JupyterLab's, beside its file browser); wider than
    that, it scrolls in its box.
    """
    escape = html.escape
    columns = report._columns()
    header = "".join(f"<th style='{_cell_style(h, align)}'>{escape(h)}</th>" for h, _, align in columns)
    body = []
    first = report.first_failing_row
    for row in report.rows:
        cells = []
        for title, getter, align in columns:
            if title == "formula":
                # The formula as text, readable with or without MathJax; its LaTeX is the tooltip.
                content = f"<code title='{escape(row.latex)}'>{escape(row.formula)}</code>"
            else:
                content = escape(getter(row))
                if title == "result" and row is first:
                    content += " &#9664; first failure"
            cells.append(f"<td style='{_cell_style(title, align)}'>{content}</td>")
        style = "" if row.passed else " style='background:#f8d7da;color:#721c24;font-weight:bold'"
        marker = " title='first failure: look here first'" if row is first else ""
        body.append(f"<tr{style}{marker}>{''.join(cells)}</tr>")
    color = "#155724" if report.ok else "#721c24"
    details = "".join(f"<li>{escape(d)}</li>" for d in report.details)
    details += f"<li>tolerance: {escape(report.tolerance_text)}</li>"
    if report.fd_text:
        details += f"<li>finite differences: {escape(report.fd_text)}</li>"
    notes = "".join(f"<li><b>{escape(r.label)}</b>: {escape(r.note)}</li>" for r in report.rows if r.note)
    notes_html = f"<p>Notes:</p><ul>{notes}</ul>" if notes else ""
    return (
        "<div class='microtape-report' style='overflow-x:auto;max-width:100%'>"
        f"<p><b>{escape(report.title)}</b></p><ul>{details}</ul>"
        "<table style='table-layout:auto;width:auto;margin-left:0'><thead><tr>"
        + header
        + "</tr></thead><tbody>"
        + "".join(body)
        + "</tbody></table>"
        f"{notes_html}<p style='color:{color};font-weight:bold'>{'OK' if report.ok else 'FAILED'}: "
        f"{escape(report.verdict_text())}</p></div>"
    )


def _shape_text(shape: Any) -> Any:
    return "scalar" if shape == () else "[" + ", ".join(str(n) for n in shape) + "]"


def _number(value: Any, digits: int = 3) -> Any:
    return "-" if value is None else f"{value:.{digits}e}"


def _css_align(align: Any) -> Any:
    return "right" if align == ">" else "left"


def _cell_style(title: str, align: Any) -> str:
    """A cell's CSS: padded, wrapping; a name or a formula may break anywhere, a number (right-aligned) never."""
    if align == ">":
        wrap = ""
    else:
        wrap = ";overflow-wrap:anywhere;min-width:" + ("8em" if title == "formula" else "5em")
    return f"text-align:{_css_align(align)};padding:2px 6px;white-space:normal{wrap}"
