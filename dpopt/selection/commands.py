"""``dpopt solve`` and ``dpopt report`` of a spec with private keys and quantiles (called by :mod:`dpopt.cli`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dpopt.certificate.model import Certificate, write_atomic
from dpopt.core.output import output_folder
from dpopt.errors import SpecError
from dpopt.report.reading import claims_sentence
from dpopt.selection.design import certify
from dpopt.selection.report import selection_html, selection_markdown
from dpopt.selection.kind import is_selection_certificate
from dpopt.selection.verify import verify_selection
from dpopt.spec.selection import load_selection_spec


def solve_command(spec: str, out: str | None, as_json: bool, quiet: bool) -> int:
    """Certify the spec and verify the certificate; ``certificate.json`` and ``report.md`` in ``out``; one line per
    release and the composed guarantee with the verifier's claim count on stdout (the certificate with ``as_json``).
    Exit code 0, or 1 when a check fails."""
    cert = certify(load_selection_spec(spec))
    verified = verify_selection(cert).checks
    failed = [c.claim for c in verified if not c.passed]
    written = []
    if out:
        with output_folder(out) as staging:
            cert.write(staging / "certificate.json")
            write_atomic(staging / "report.md", selection_markdown(cert, verified) + "\n")
        written = [Path(out) / "certificate.json", Path(out) / "report.md"]
    if as_json:
        sys.stdout.write(cert.to_json())
    elif not out or not quiet:
        for block in cert["releases"]:
            if block["kind"] == "count":
                how = (f"δ = {block['guarantee']['delta']:g}, "
                       f"selection {block['partition_selection']['method'].split(':')[0]}")
            elif block["kind"] == "mean":
                how = f"discrete Laplace noise on (lattice centred sum, count) per key of {block['keys_from']}"
            else:
                how = f"exponential mechanism on {block['grid']['size']} grid points"
            print(f"{block['name']}: {block['kind']}, ε = {block['guarantee']['epsilon']:g}, {how}")
        g = cert["guarantee"]
        print(f"{cert['spec']['name']}: {g['definition']} ε = {g['epsilon']:g}"
              + (f", δ = {g['delta']:g}" if "delta" in g else "")
              + " (basic composition); "
              + (f"FAILED: {', '.join(failed)}" if failed else claims_sentence(verified))
              + ("; wrote " + ", ".join(map(str, written)) if written else ""))
    return 0 if not failed else 1


def report_command(document: Any, source: str, out: str | None) -> int:
    """The report of a spec (certified first) or of its certificate: Markdown on stdout, or ``out`` (.md or .html)."""
    html = bool(out) and Path(out).suffix.lower() in (".html", ".htm")
    if out and not html and Path(out).suffix.lower() != ".md":
        raise SpecError("--out", "this report is FILE.html (one page) or FILE.md")
    cert = (Certificate.from_dict(document, source=source) if is_selection_certificate(document)
            else certify(load_selection_spec(document)))
    text = (selection_html if html else selection_markdown)(cert, verify_selection(cert).checks) + "\n"
    if out:
        write_atomic(out, text)
        print(f"wrote {out}")
    else:
        sys.stdout.write(text)
    return 0
