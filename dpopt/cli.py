"""The ``dpopt`` command: solve, verify, release, report, audit; sign and keygen (Ed25519 signatures).

Exit codes: 0 success; 1 a certificate (or a ledger) failed verification; 2 a bad spec, certificate,
data file or ledger, or an output folder that cannot be written (one line on stderr naming the field or
cause, never a traceback); 3 a release refused by its ledger (``--ledger``: the budget would be exceeded;
nothing released); 130 interrupted (Ctrl-C, also during a DuckDB query: "dpopt: interrupted"). An
``--out`` folder is written whole or not at all.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from dpopt._version import __version__
from dpopt.core.output import check_output_folder, output_folder, stdout_to_stderr
from dpopt.errors import DpoptError, LedgerDamagedError, SpecError, UnsupportedSpecError

# Each command imports the stages it runs when it runs, so that ``dpopt --help`` and a
# command that needs few stages (``verify``) do not pay for the others.


PROGRESS_AFTER = 2.0
"""Seconds after which a long step shows its progress on stderr."""


@contextmanager
def _progress(description: str):
    """Show ``description: stage [elapsed]`` on stderr (tqdm) once a step has taken :data:`PROGRESS_AFTER`
    seconds, refreshed twice a second until it ends; stderr that is not a terminal gets nothing. Yields a
    function that names the current stage. tqdm is imported only then (a short step does not pay for it)."""
    stage = [""]
    done = threading.Event()
    started = time.time()

    def tick() -> None:
        if done.wait(PROGRESS_AFTER) or not sys.stderr.isatty():
            return
        from tqdm import tqdm

        with tqdm(file=sys.stderr, disable=None, leave=False, bar_format="{desc} [{elapsed}]", desc=description) as bar:
            bar.start_t = started  # the elapsed time of the whole step, not of the bar
            while not done.wait(0.5):
                bar.set_description_str(f"{description}: {stage[0]}" if stage[0] else description)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield lambda text: stage.__setitem__(0, text)
    finally:
        done.set()
        thread.join()


def _is_plan(path: str) -> bool:
    """A spec file holding a ``queries`` list (a release plan)."""
    from dpopt.plan import is_plan_document
    from dpopt.spec.load import read_document

    return is_plan_document(read_document(path))


def _solve_plan(args: argparse.Namespace) -> int:
    from dpopt.certificate.model import write_atomic
    from dpopt.plan import solve_plan
    from dpopt.plan.report import plan_markdown
    from dpopt.report.reading import claims_sentence
    from dpopt.report.words import format_parameters

    with stdout_to_stderr():
        with _progress("dpopt solve: designing and composing the plan"):
            sol = solve_plan(args.spec)
        cert = sol.certificate
        if args.out:
            with output_folder(args.out) as staging:
                cert.write(staging / "certificate.json")
                write_atomic(staging / "report.md", plan_markdown(cert) + "\n")
    if args.json:
        sys.stdout.write(cert.to_json())
    elif not args.out or not args.quiet:
        a = cert["allocation"]
        if sol.joint is not None:
            print(f"joint design: {sol.joint.mechanism.title} on the shared histogram answers every query")
        for q in cert["queries"]:
            print(f"{q['name']}: share {q['share']:.4f}, {q['family']} ({format_parameters(q['parameters'])})"
                  f" -> {q['utility']['metric']} = {q['utility']['value']:.6g}")
        print(f"{sol.plan.name}: {len(sol.designs)} queries under {cert['guarantee']['definition']} "
              f"{sol.plan.privacy.parameters}; weighted total {cert['utility']['value']:.6g} "
              f"(optimal/equal split = {a['ratio_optimal_to_equal']:.4f}); {claims_sentence(None)}"
              + _wrote([Path(args.out) / "certificate.json", Path(args.out) / "report.md"] if args.out else []))
    return 0


def _wrote(paths) -> str:
    """``; wrote out/a.json, out/b.json`` for the files a command wrote (empty when none)."""
    return "; wrote " + ", ".join(str(p) for p in paths) if paths else ""


def _has_geography(document) -> bool:
    """A spec (not a certificate) with a ``geography`` block: a hierarchical release."""
    return isinstance(document, dict) and document.get("geography") is not None and "spec_sha256" not in document


def _is_hierarchy(path: str) -> bool:
    """A spec file with a ``geography`` block."""
    from dpopt.spec.load import read_document

    return _has_geography(read_document(path))


def _is_selection(path: str) -> bool:
    """A spec file with a ``releases`` list (private keys, quantiles: :mod:`dpopt.selection`)."""
    from dpopt.spec.load import read_document
    from dpopt.spec.load import is_selection_document

    return is_selection_document(read_document(path))


def _solve(args: argparse.Namespace) -> int:
    from dpopt.report.reading import claim_counts, epsilon_by_delta, epsilon_line
    from dpopt.report.words import format_parameters
    from dpopt.solve import solve
    from dpopt.stats.log_volume import utility_value_text

    if _is_selection(args.spec):  # private keys and quantiles: certified from the spec alone
        from dpopt.selection.commands import solve_command

        return solve_command(args.spec, args.out, args.json, args.quiet)
    if _is_plan(args.spec):
        return _solve_plan(args)
    if _is_hierarchy(args.spec):
        return _solve_hierarchy(args)
    written = []
    with stdout_to_stderr():
        with _progress("dpopt solve: deriving, designing and certifying"):
            sol = solve(args.spec)
        cert = sol.certificate
        if args.out:
            written = _write_solution(sol, args.out)
    if args.json:
        sys.stdout.write(cert.to_json())
    elif not args.out or not args.quiet:
        u = cert["utility"]
        claims, unavailable = claim_counts(cert.data)
        eps = epsilon_line(epsilon_by_delta(cert.data))
        print(f"{sol.spec.name}: {sol.mechanism.title} ({format_parameters(sol.mechanism.parameters)}) "
              f"-> {u['metric']} = {utility_value_text(u)}; " + (f"{eps}; " if eps else "")
              + f"{claims} claims hold (as `dpopt verify` counts them"
              + (f"; {unavailable} not available)" if unavailable else ")") + _wrote(written))
    return 0


def _solve_hierarchy(args: argparse.Namespace) -> int:
    """A spec with ``geography``: every level designed and the whole release certified, as ``release`` does it."""
    from dpopt.certificate.model import write_atomic
    from dpopt.release.hierarchy_design import solve_hierarchy
    from dpopt.report.hierarchy import hierarchy_markdown
    from dpopt.report.reading import claims_sentence, epsilon_line
    from dpopt.report.words import format_parameters

    written = []
    with stdout_to_stderr():
        with _progress("dpopt solve: designing and certifying every level"):
            sol = solve_hierarchy(args.spec)
            cert = sol.certificate()
        if args.out:
            written = sol.write(args.out) + [Path(args.out) / "report.md"]
            write_atomic(written[-1], hierarchy_markdown(cert) + "\n")
    if args.json:
        sys.stdout.write(cert.to_json())
    elif not args.out or not args.quiet:
        for level, share, solution in zip(sol.names, sol.shares, sol.solutions):
            print(f"{level}: share {float(share):.4f}, {solution.mechanism.title} "
                  f"({format_parameters(solution.mechanism.parameters)}) under "
                  f"{solution.spec.privacy.definition} {format_parameters(solution.spec.privacy.parameters)}")
        g = cert["guarantee"]
        eps = epsilon_line(g["epsilon_at_delta"] or {})
        print(f"{sol.spec.name}: the whole release is {g['definition']} "
              f"{format_parameters({k: g[k] for k in sol.spec.privacy.parameters})}"
              + (f"; {eps}" if eps else "") + f"; {claims_sentence(None)}" + _wrote(written))
    return 0


def _write_solution(sol, folder: str) -> list:
    """``mechanism.json``, ``certificate.json`` and ``report.md`` of a solution in ``folder``; the files written."""
    from dpopt.report.folder import write_solution

    with _progress("dpopt solve: report") as stage:
        return write_solution(sol, folder, progress=stage)


def _verify_result(cert):
    """The verification of a certificate (a plan's and a hierarchical release's by their own verifiers)."""
    from dpopt.certificate.hierarchy_release import is_hierarchy_certificate, verify_hierarchy_release
    from dpopt.certificate.verify import verify
    from dpopt.plan import is_plan_certificate
    from dpopt.selection.kind import is_selection_certificate
    from dpopt.synthesis.kind import is_synthesis_certificate

    if is_synthesis_certificate(cert.data):
        from dpopt.synthesis.certificate import verify_synthesis  # verifies the embedded measurements: loaded only then

        return verify_synthesis(cert)
    if is_selection_certificate(cert.data):
        from dpopt.selection import verify_selection  # its verifier designs the releases: loaded only for them

        return verify_selection(cert)
    if is_plan_certificate(cert.data):
        from dpopt.plan import verify_plan  # a plan's verifier designs its queries: loaded only for plans

        return verify_plan(cert)
    if is_hierarchy_certificate(cert.data):
        return verify_hierarchy_release(cert)
    return verify(cert)


def _verify(args: argparse.Namespace) -> int:
    from dpopt.certificate.recorded import is_test_release
    from dpopt.certificate.second_route import is_not_available
    from dpopt.report.reading import human

    if Path(args.certificate).is_dir():
        return _verify_folder(args)
    cert = _read_certificate(args.certificate)
    with _progress("dpopt verify: re-deriving every claim"):
        result = _verify_result(cert)
    checks = list(result.checks)
    if args.public_key:
        from dpopt.certificate.signing import signature_check
        from dpopt.core.checks import Check

        checks.append(signature_check(args.certificate, args.public_key))
        if is_test_release(cert.data):  # a signature makes it a publication: seeded noise is refused by default
            checks.append(Check("signature.mode", "a signed certificate of a test release (seeded, predictable noise) "
                                "verifies under a public key only with --accept-seeded", args.accept_seeded,
                                "test release" + (", accepted (--accept-seeded)" if args.accept_seeded else "")))
    unavailable = [c for c in checks if is_not_available(c)]
    for check in checks:
        mark = "N/A " if check in unavailable else "PASS" if check.passed else "FAIL"
        print(human(f"{mark}  {check.claim}: {check.method} — {check.detail}"))
    failed = [c for c in checks if not c.passed]
    if not failed:
        print(f"certificate holds: {len(checks) - len(unavailable)} claims re-derived"
              + (f" ({len(unavailable)} not available: {', '.join(c.claim for c in unavailable)})"
                 if unavailable else ""))
        if is_test_release(cert.data):
            from dpopt.release.bind import TEST_RELEASE

            print(TEST_RELEASE)
        return 0
    print("certificate FAILED: " + ", ".join(c.claim for c in failed), file=sys.stderr)
    return 1


def _charge(args: argparse.Namespace, certificate) -> dict | None:
    """With ``--ledger``: the release charged to the ledger before anything is output (refused past the
    budget: BudgetExceededError, exit 3), and the ``ledger`` block of its document; None without."""
    if not args.ledger:
        return None
    from dpopt.ledger import Ledger

    ledger = Ledger(args.ledger, key=args.ledger_key)
    return ledger.release_block(ledger.charge(certificate, data=str(args.data)))


def _check_ledger_room(args: argparse.Namespace) -> None:
    """With ``--ledger``: a missing, damaged or sealed-without-key ledger, or one whose remaining budget
    cannot cover the spec's target, refuses before any data are read or anything is designed (one line;
    exit 3 for the budget). Specs with ``releases`` or ``geography`` are refused with ``--ledger`` later,
    also before the data."""
    from dpopt.ledger import Ledger
    from dpopt.plan.spec import load_plan
    from dpopt.spec.load import load_spec

    ledger = Ledger(args.ledger, key=args.ledger_key)
    if _is_selection(args.spec):
        return
    source = load_plan(args.spec) if _is_plan(args.spec) else load_spec(args.spec)
    if getattr(source, "geography", None) is not None:
        return
    unit = source.data.privacy_unit
    target = {"definition": source.privacy.definition, **source.privacy.parameters}
    ledger.check_room(target, "row" if unit is None else unit.model_dump(exclude_none=True),
                      source.adjacency.model_dump(), source.name)


def _read_certificate(path: str):
    """The certificate in ``path``; a spec given instead is named as one.

    Raises
    ------
    CertificateError
    """
    from dpopt.certificate.model import Certificate
    from dpopt.core.documents import decode, parse_json
    from dpopt.errors import CertificateError

    advice = f"{path} is a spec: verify takes a certificate; to check a spec, run `dpopt solve {path}`"
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        raise CertificateError(advice)
    try:
        return Certificate.from_file(path)
    except CertificateError:
        try:
            document = parse_json(decode(Path(path).read_bytes()))
        except (OSError, DpoptError):  # unreadable, not strict JSON: from_file's message says so
            document = None
        if isinstance(document, dict) and "spec_sha256" not in document and ("query" in document or "queries" in document):
            raise CertificateError(advice) from None
        raise


def _verify_folder(args: argparse.Namespace) -> int:
    """``dpopt verify DIR``: a release folder, one line per file (:func:`dpopt.release.bind.verify_folder`); with
    ``--public-key``, its signed manifest too (:func:`dpopt.release.signature.release_signature_check`)."""
    from dpopt.release.bind import verify_folder
    from dpopt.synthesis.folder import is_synthesis_folder, verify_synthesis_folder

    if is_synthesis_folder(args.certificate):  # dpopt synthesize --out: the certificate and every file against it
        lines = verify_synthesis_folder(args.certificate)
    else:
        lines = verify_folder(args.certificate, _verify_result)
    if args.public_key:
        from dpopt.release.signature import release_signature_check

        lines.append(release_signature_check(args.certificate, args.public_key, args.accept_seeded))
    for line in lines:
        print(f"{'PASS' if line.passed else 'FAIL'}  {line.file}: {line.detail}")
    failed = [line.file for line in lines if not line.passed]
    if failed:
        print("release FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    print(f"release holds: {len(lines)} files checked")
    return 0


def _sign(args: argparse.Namespace) -> int:
    """``dpopt sign CERT``: the certificate's bytes; ``dpopt sign DIR``: a release (or synthesis) folder that
    verifies, as a whole (:func:`dpopt.release.signature.sign_release`)."""
    if not Path(args.certificate).is_dir():
        from dpopt.certificate.signing import sign_file

        print(f"wrote {sign_file(args.certificate, args.key)}")
        return 0
    from dpopt.release.bind import verify_folder
    from dpopt.release.signature import TEST, release_mode, sign_release
    from dpopt.synthesis.folder import is_synthesis_folder, verify_synthesis_folder

    with _progress("dpopt sign: verifying the release folder"):
        lines = (verify_synthesis_folder(args.certificate) if is_synthesis_folder(args.certificate) else
                 verify_folder(args.certificate, _verify_result))
        failed = [line.file for line in lines if not line.passed]
    if failed:
        print(f"not signed: the release folder does not verify ({', '.join(failed)}; see dpopt verify "
              f"{args.certificate})", file=sys.stderr)
        return 1
    mode = release_mode(Path(args.certificate))
    print(f"wrote {sign_release(args.certificate, args.key)} (every file of the folder; "
          + ("a TEST release: seeded noise, verifies only with --accept-seeded)" if mode == TEST else
             "a production release)"))
    return 0


def _keygen(args: argparse.Namespace) -> int:
    from dpopt.certificate.signing import generate_keys

    private, public = generate_keys(args.out)
    print(f"wrote {private} (private: keep it secret) and {public} (public: publish it)")
    return 0


def _emit_release(document: dict, certificate, args: argparse.Namespace) -> int:
    """The release document on stdout (JSON, or the per-cell CSV with ``--format csv``), or ``release.json``,
    ``release.csv`` and ``certificate.json`` in the folder ``--out``; the document names the certificate's
    SHA-256 (:func:`dpopt.release.bind.bind`), and the release is charged to ``--ledger`` first."""
    from dpopt.release.batch import write_release
    from dpopt.release.bind import bind

    document, certificate = bind(document, certificate)
    block = _charge(args, certificate)
    if block is not None:
        document = document | {"ledger": block}
    return _emit(lambda: document, args, lambda: write_release(document, certificate, args.out))


def _emit(document, args: argparse.Namespace, write) -> int:
    """Call ``write`` (files in ``--out``; it returns them) and name what it wrote, or print ``document()`` (built
    only then: with every group's values, it is large)."""
    from dpopt.release.batch import release_json
    from dpopt.release.cells import document_csv

    if args.out:
        print(_wrote(write()).removeprefix("; "), file=sys.stderr)
    else:
        sys.stdout.write(document_csv(document()) if args.format == "csv" else release_json(document()))
    return 0


def _for_operator(args: argparse.Namespace, report: dict, code: int) -> int:
    """With ``--operator-report FILE``, once the release is out: the exact counts of the data (not private,
    :mod:`dpopt.release.operator`) written to FILE, outside the published folder; returns ``code``."""
    if args.operator_report:
        from dpopt.release.operator import write_operator_report

        path = write_operator_report(args.operator_report, report)
        print(f"wrote {path} (NOT private: exact counts for the operator, never to publish)", file=sys.stderr)
    return code


def _release_plan(args: argparse.Namespace, randomness) -> int:
    from dpopt.plan.release import release_plan, release_plan_groups
    from dpopt.release.operator import operator_report

    if args.groups:
        raise SpecError("--groups", "a release plan is released for the groups its plan declares (data.attributes) "
                                    "(--groups applies to a single-query spec)")
    if not args.group_by and (args.engine != "duckdb" or args.scheduler):
        raise SpecError("--group-by", "--engine and --scheduler apply to a grouped release (--group-by)")
    with stdout_to_stderr(), _progress("dpopt release: designing the plan, counting and releasing"):
        if args.group_by:
            client = _dask_client(args.scheduler) if args.engine == "dask" else None
            sol, document, cert = release_plan_groups(args.spec, args.data, args.group_by, randomness,
                                                      engine=args.engine, client=client)
            operator = operator_report(None)
        else:
            sol, document, operator = release_plan(args.spec, args.data, randomness)
            cert = sol.certificate
    if sol.plan.output is not None:  # the plan's rounding, stated in every query's certificate (output block)
        from dpopt.release.rounded import round_tree, rounded_document

        document = rounded_document(document, sol.plan.output.decimals)
        if args.group_by:
            document["groups"] = round_tree(document["groups"], sol.plan.output.decimals)
    return _for_operator(args, operator, _emit_release(document, cert, args))


def _release(args: argparse.Namespace) -> int:
    from dpopt.release import random_source, release_groups, release_once
    from dpopt.release.batch import release_document
    from dpopt.release.cells import release_cells
    from dpopt.release.operator import operator_report
    from dpopt.release.postprocessed import document_block, postprocess_once, published_bounds
    from dpopt.spec.load import load_spec

    randomness = random_source(args.seed, args.insecure_seed)
    if args.operator_report:
        from dpopt.release.operator import check_operator_path

        check_operator_path(args.operator_report, args.out)
    if args.ledger:  # a missing, damaged or spent ledger fails before the data and the design, not after them
        _check_ledger_room(args)
    elif args.ledger_key:
        raise SpecError("--ledger-key", "goes with --ledger (the key of a sealed ledger)")
    if _is_plan(args.spec):
        return _release_plan(args, randomness)
    if _is_selection(args.spec):
        return _release_selection(args, randomness)
    spec = load_spec(args.spec)
    if args.error_draws < 0:
        raise SpecError("--error-draws", f"must be 0 or more (got {args.error_draws})")
    if spec.geography is not None:
        return _release_hierarchy(args, randomness)
    if args.group_by and spec.postprocess is not None:
        raise SpecError("postprocess", "a grouped release (--group-by) is not post-processed: declare "
                                       "geography: {levels: [...]} for tables consistent across units")
    if args.group_by:
        public = {column: args.groups for column in args.group_by} if args.groups else None
        client = _dask_client(args.scheduler) if args.engine == "dask" else None
        with stdout_to_stderr(), _progress("dpopt release: designing, counting and releasing every group"):
            rel = release_groups(args.spec, args.data, args.group_by, groups=public, randomness=randomness,
                                 engine=args.engine, client=client)
        block = _charge(args, rel.certificate)
        document = rel.document if block is None else (lambda: rel.document() | {"ledger": block})
        code = _emit(document, args, lambda: rel.write(args.out, csv=args.format == "csv", ledger=block))
        return _for_operator(args, operator_report({lv.column: lv.records for lv in rel.levels}, rel.bounding), code)
    if args.groups:
        raise SpecError("--group-by", "--groups applies to a grouped release (--group-by)")
    if args.scheduler and args.engine != "dask":
        raise SpecError("--scheduler", "--scheduler applies to --engine dask")
    if spec.postprocess is not None:  # refused before the release, not after its noise is drawn
        from dpopt.domain.queries import compile_query
        from dpopt.postprocess.marginals import require_roundable

        require_roundable(compile_query(spec), spec.postprocess)
    client = _dask_client(args.scheduler) if args.engine == "dask" else None
    with stdout_to_stderr(), _progress("dpopt release: designing, counting and releasing"):
        sol, noisy, records, bounding = release_once(args.spec, args.data, randomness, engine=args.engine,
                                                     client=client)
    document = release_document(sol, noisy, randomness, bounding)
    certificate = sol.certificate
    if sol.spec.postprocess is not None:  # the raw answer stays under "release"; the published table is added
        post, certificate = postprocess_once(sol, noisy, args.data, args.error_draws)
        document["postprocess"] = document_block(post, sol.problem.labels)
        document["cells"] = release_cells(certificate["utility"]["per_cell"], sol.problem.labels, noisy,
                                          post.answers, "; ".join(post.method["steps"]),
                                          published_bounds(sol, post, args.data))
    if sol.spec.output is not None:  # the rounding the spec states, recorded in the certificate's output block
        from dpopt.release.rounded import rounded_document

        document = rounded_document(document, sol.spec.output.decimals)
    return _for_operator(args, operator_report(records, bounding), _emit_release(document, certificate, args))


def _release_selection(args: argparse.Namespace, randomness) -> int:
    """A spec with ``releases``: bounded, selected and released part by part (:mod:`dpopt.selection.release`)."""
    from dpopt.selection import release_selection

    if args.group_by or args.groups or args.scheduler or args.engine != "duckdb" or args.ledger:
        raise SpecError("releases", "a spec with releases groups by its own keys: drop --group-by, --groups, --engine, "
                                    "--scheduler and --ledger")
    with stdout_to_stderr(), _progress("dpopt release: bounding, selecting keys and releasing"):
        certificate, document, operator = release_selection(args.spec, args.data, randomness)
    return _for_operator(args, operator, _emit_release(document, certificate, args))


def _release_hierarchy(args: argparse.Namespace, randomness) -> int:
    """A spec with ``geography``: every level released, post-processed top-down."""
    from dpopt.release.hierarchy import release_hierarchy
    from dpopt.release.operator import operator_report

    if args.group_by or args.scheduler:
        raise SpecError("--group-by", "a spec with geography releases its levels itself: drop --group-by, --scheduler "
                                      "(--groups FILE gives its public geography)")
    if args.ledger:
        raise UnsupportedSpecError("--ledger", "a spec with geography (one certificate per level) is not charged "
                                               "to a ledger: release its levels as single specs or a plan")
    with stdout_to_stderr():
        with _progress("dpopt release: designing, releasing and post-processing every level"):
            rel = release_hierarchy(args.spec, args.data, randomness=randomness,
                                    engine="dask" if args.engine == "dask" else "numpy", error_draws=args.error_draws,
                                    units=args.groups)
    return _for_operator(args, operator_report(rel.records), _emit(rel.document, args, lambda: rel.write(args.out)))


def _synthesize(args: argparse.Namespace) -> int:
    """``dpopt synthesize SPEC --data FILE --out DIR``: certified marginals, synthetic records, certificate and report
    (:mod:`dpopt.synthesis.pipeline`); each step named on stderr; the folder whole or not at all."""
    from dpopt.release import random_source
    from dpopt.synthesis.pipeline import OWNED, synthesize

    check_output_folder(args.out, OWNED)
    randomness = random_source(args.seed, args.insecure_seed)

    def say(text: str) -> None:
        print(f"dpopt synthesize: {text}", file=sys.stderr, flush=True)

    with stdout_to_stderr():
        release = synthesize(args.spec, args.data, randomness=randomness, progress=say)
        say("writing " + args.out)
        written = release.write(args.out)
    worst = max(release.residual.values(), default=0.0)
    print(f"{release.spec.name}: {release.records.shape[0]} synthetic records from {len(release.tables)} certified "
          f"tables ({release.certificate['mechanism']['parameters']['selection']} selection); largest residual "
          f"{worst:.6g}; {len(release.certificate['checks'])} claims recorded, each re-derived by dpopt verify"
          + _wrote(written))
    return 0


def _dask_client(address: str | None):
    """A dask.distributed Client for ``--scheduler ADDRESS``; None uses dask's local scheduler."""
    if address is None:
        return None
    from distributed import Client

    return Client(address)


def _audit(args: argparse.Namespace) -> int:
    from dpopt.audit import audit
    from dpopt.audit.empirical import AUDIT_DRAWS, AUDIT_SEED
    from dpopt.certificate.hierarchy_release import is_hierarchy_certificate
    from dpopt.certificate.model import Certificate
    from dpopt.plan import is_plan_certificate, is_plan_document, solve_plan
    from dpopt.plan.audit import audit_hierarchy_certificate, audit_plan, audit_plan_certificate
    from dpopt.release.hierarchy_design import solve_hierarchy
    from dpopt.spec.load import read_document

    draws = AUDIT_DRAWS if args.draws is None else args.draws
    seed = AUDIT_SEED if args.seed is None else args.seed
    document = read_document(args.source, max_bytes=None)  # a spec or a certificate
    if isinstance(document, dict) and document.get("kind") == "synthesis":
        raise SpecError("report", "a synthesis certificate's report is report.md / report.html of the folder "
                                  "`dpopt synthesize --out` wrote (it shows the records' agreement with the tables); "
                                  "check the certificate with `dpopt verify`")
    if _is_selection_document(document):
        raise UnsupportedSpecError("releases", "dpopt audit does not audit private keys and quantiles yet (their "
                                               "release path is audited in tests/test_selection.py)")
    with stdout_to_stderr(), _progress(f"dpopt audit: {draws} draws per dataset and pair"):
        if is_plan_certificate(document):
            result = audit_plan_certificate(Certificate.from_dict(document, str(args.source)), draws=draws, seed=seed)
        elif is_plan_document(document):
            result = audit_plan(solve_plan(args.source), draws=draws, seed=seed)
        elif is_hierarchy_certificate(document) or _has_geography(document):
            cert = (Certificate.from_dict(document, str(args.source)) if is_hierarchy_certificate(document)
                    else solve_hierarchy(args.source).certificate())
            result = audit_hierarchy_certificate(cert, draws=draws, seed=seed)
        else:
            result = audit(args.source, draws=draws, seed=seed)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    elif result.note:
        print(result.note)
    else:
        for row in result.rows:
            print(f"pair |v|_1={row['l1']:.6g} |v|_2={row['l2']:.6g}: {row['statistic']}, "
                  f"alpha={row['alpha']:.4g}, beta={row['beta']:.4g} -> {result.parameter} >= {row['lower_bound']:.4g}")
        verdict = "not refuted" if result.passed else "REFUTED"
        at = f" at delta = {result.delta:g}" if result.delta else ""
        print(f"{verdict}: {result.confidence:.0%} lower bound {result.parameter} >= {result.lower_bound:.4g}{at}, "
              f"certified {result.certified:.6g}{at}" + (f" ({result.certified_from})" if result.certified_from else "")
              + f" ({result.draws} draws per dataset, seed {result.seed})")
    return 0 if result.passed else 1


def _report(args: argparse.Namespace) -> int:
    from dpopt.certificate.model import Certificate
    from dpopt.report.document import Report, build_report
    from dpopt.report.render import render_markdown, write_report
    from dpopt.solve import solve
    from dpopt.spec.load import read_document

    document = read_document(args.source, max_bytes=None)  # a spec or a certificate
    if isinstance(document, dict) and document.get("kind") == "synthesis":
        raise SpecError("report", "a synthesis certificate's report is report.md / report.html of the folder "
                                  "`dpopt synthesize --out` wrote (it shows the records' agreement with the tables); "
                                  "check the certificate with `dpopt verify`")
    if _is_selection_document(document):
        from dpopt.selection import is_selection_certificate
        from dpopt.selection.commands import report_command

        if is_selection_certificate(document):
            _refuse_unverified(Certificate.from_dict(document, source=str(args.source)))
        return report_command(document, str(args.source), args.out)
    if _is_composed(document):
        return _report_composed(args, document)
    cert = Certificate.from_document(document, source=str(args.source))
    if cert is None:
        with _progress("dpopt report: solving the spec"):
            cert = solve(args.source).certificate
    with _progress("dpopt report") as stage:
        report = build_report(cert, audit_draws=None if args.no_audit else args.draws, progress=stage)
    if args.out:
        written = write_report(report, args.out)
        figures = (f"{len(report.figures)} figures embedded" if len(written) == 1
                   else f"{len(written) - 1} figures next to it")
        notes = f"; {len(report.notes)} part(s) not drawn, see Caveats" if report.notes else ""
        print(f"wrote {written[0]} ({figures}{notes})")
    else:  # figures need a file: Markdown on stdout carries the text, tables and audit
        sys.stdout.write(render_markdown(Report(cert, (), report.audit,
                                                report.notes + ("figures: written with --out FILE.html or FILE.md",))))
    return 0


def _refuse_unverified(cert) -> tuple:
    """A composite certificate is reported only when it verifies: its recorded checks and blocks are what the
    report prints; returns the verifier's checks (the report states their count).

    Raises
    ------
    CertificateError
        Naming the claims that fail.
    """
    from dpopt.errors import CertificateError

    with stdout_to_stderr(), _progress("dpopt report: verifying the certificate"):
        checks = _verify_result(cert).checks
    failed = [c.claim for c in checks if not c.passed]
    if failed:
        raise CertificateError(f"the certificate does not verify ({', '.join(failed[:4])}"
                               f"{', …' if len(failed) > 4 else ''}): run dpopt verify")
    return tuple(checks)


def _is_selection_document(document) -> bool:
    """A spec with ``releases`` or its certificate (:mod:`dpopt.selection`)."""
    from dpopt.selection import is_selection_certificate
    from dpopt.spec.load import is_selection_document

    return is_selection_document(document) or is_selection_certificate(document)


def _is_composed(document) -> bool:
    """A plan or a hierarchical release (spec or certificate): reported by :func:`_report_composed`."""
    from dpopt.certificate.hierarchy_release import is_hierarchy_certificate
    from dpopt.plan import is_plan_certificate, is_plan_document

    return (is_plan_document(document) or is_plan_certificate(document) or is_hierarchy_certificate(document)
            or _has_geography(document))


def _report_composed(args: argparse.Namespace, document) -> int:
    """The report of a plan or a hierarchical release: the composed guarantee with its ε per δ, the parts (queries
    or levels) and their per-cell error, the checks; Markdown, or one HTML page for ``--out FILE.html``."""
    from dpopt.certificate.hierarchy_release import is_hierarchy_certificate
    from dpopt.certificate.model import Certificate, write_atomic
    from dpopt.plan import is_plan_certificate, is_plan_document, solve_plan
    from dpopt.plan.report import plan_html, plan_markdown
    from dpopt.release.hierarchy_design import solve_hierarchy
    from dpopt.report.hierarchy import hierarchy_html, hierarchy_markdown

    html = bool(args.out) and Path(args.out).suffix.lower() in (".html", ".htm")
    if args.out and not html and Path(args.out).suffix.lower() != ".md":
        raise SpecError("--out", "this report is FILE.html (one page) or FILE.md")
    plan = is_plan_document(document) or is_plan_certificate(document)
    if is_plan_certificate(document) or is_hierarchy_certificate(document):
        cert = Certificate.from_dict(document, source=str(args.source))
    else:
        with stdout_to_stderr(), _progress("dpopt report: designing"):
            cert = solve_plan(args.source).certificate if plan else solve_hierarchy(args.source).certificate()
    verified = _refuse_unverified(cert)  # the report states the verifier's claim count
    render = (plan_html if html else plan_markdown) if plan else (hierarchy_html if html else hierarchy_markdown)
    text = render(cert, verified) + "\n"
    if args.out:
        write_atomic(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpopt", description="Certified differential-privacy mechanisms from a spec.")
    parser.add_argument("--version", action="version", version=f"dpopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("solve", help="derive, design and certify a mechanism for a spec",
                       description="Derive the sensitivity space of SPEC, design the best mechanism for its "
                                   "utility metric and certify its privacy guarantee.")
    p.add_argument("spec", metavar="SPEC",
                   help="a spec file (YAML or JSON) naming the data's attributes, the query, the invariants "
                        "published exactly, the adjacency, the privacy target, the mechanism (or auto) and the "
                        "utility metric; examples in specs/")
    p.add_argument("--out", help="folder for mechanism.json, certificate.json, report.md")
    p.add_argument("--json", action="store_true", help="print the certificate as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing when --out is given")
    p.set_defaults(run=_solve)

    p = sub.add_parser("verify", help="re-check every claim of a certificate, or a release folder")
    p.add_argument("certificate", metavar="CERT.json|DIR",
                   help="a certificate.json (from `dpopt solve --out` or `dpopt release --out`), or a release folder")
    p.add_argument("--public-key", metavar="PUB.pem",
                   help="also check the Ed25519 signature by this key: CERT.json.sig for a certificate; for a "
                        "release folder, release.sig.json (every file of the folder and its mode)")
    p.add_argument("--accept-seeded", action="store_true",
                   help="with --public-key: accept a signed test release (seeded noise), a folder or a "
                        "certificate; refused by default")
    p.set_defaults(run=_verify)

    p = sub.add_parser("sign", help="sign a certificate file (writes CERT.json.sig) or a release folder (writes "
                                    "DIR/release.sig.json) with an Ed25519 private key")
    p.add_argument("certificate", metavar="CERT.json|DIR")
    p.add_argument("--key", required=True, metavar="KEY.pem", help="the private key (dpopt keygen)")
    p.set_defaults(run=_sign)

    p = sub.add_parser("keygen", help="write a new Ed25519 key pair: KEY.pem (private) and KEY.pub.pem")
    p.add_argument("out", metavar="KEY.pem")
    p.set_defaults(run=_keygen)

    p = sub.add_parser("release", help="compute the query on records and release it with noise")
    p.add_argument("spec")
    p.add_argument("--data", required=True, help="CSV or Parquet file of records, one column per attribute")
    p.add_argument("--group-by", action="append", metavar="COLUMN",
                   help="release the query for every group of COLUMN (repeat for several grouping columns)")
    p.add_argument("--groups", metavar="FILE", help="CSV/Parquet file listing the public groups (a column per "
                                                    "grouping column), or, for a spec with geography, its public "
                                                    "units (a column per level, one row per finest unit)")
    p.add_argument("--engine", choices=["duckdb", "dask"], default="duckdb",
                   help="where the records are counted (default: DuckDB on this machine); without --group-by, dask "
                        "counts a stack of marginals")
    p.add_argument("--scheduler", metavar="ADDRESS", help="dask.distributed scheduler for --engine dask")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise: refused unless --insecure-seed (default: OS-entropy CSPRNG)")
    p.add_argument("--insecure-seed", action="store_true",
                   help="accept predictable noise from --seed (tests and reproductions only)")
    p.add_argument("--out", help="folder for release.json, release.csv (each cell's value, standard error and 95%% "
                                 "margin of error), certificate.json (and release_COLUMN.parquet); default: print")
    p.add_argument("--format", choices=["json", "csv"], default="json",
                   help="what is printed without --out: the release document (json) or its per-cell table (csv); "
                        "with --out and --group-by, csv also writes release_COLUMN.csv")
    p.add_argument("--error-draws", type=int, default=100, metavar="N",
                   help="Monte Carlo releases for the error before/after post-processing (spec with postprocess "
                        "or geography; 0: none); 100 state the RMSE to about 2 significant digits; not simulated for "
                        "marginal tables post-processed in marginal space)")
    p.add_argument("--ledger", metavar="LEDGER",
                   help="charge the release to this privacy budget ledger (`dpopt ledger init`) before it is "
                        "output; refused with exit code 3, nothing released, when the budget would be exceeded")
    p.add_argument("--operator-report", metavar="FILE",
                   help="also write the exact counts of the data (records; rows and persons kept, dropped and "
                        "truncated by contribution bounding) to FILE: NOT private, for the operator only, never "
                        "published (refused inside --out)")
    p.add_argument("--ledger-key", metavar="FILE",
                   help="the key of a sealed ledger (`ledger init --key`): the HMAC key file or the Ed25519 "
                        "private key")
    p.set_defaults(run=_release)

    p = sub.add_parser("synthesize", help="synthetic records from certified marginals (a spec with a synthesize block)",
                       description="Measure the spec's marginals with the certified design (or select them, "
                                   "selection: adaptive), turn the published tables into records and write "
                                   "synthetic.csv, synthetic.parquet, marginals.json, certificate.json and the report.")
    p.add_argument("spec", metavar="SPEC", help="a spec with a synthesize block (examples: specs/synthesize_*.yaml)")
    p.add_argument("--data", required=True, help="CSV or Parquet file of records, one column per attribute")
    p.add_argument("--out", required=True, metavar="DIR", help="the output folder (written whole or not at all)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise: refused unless --insecure-seed (default: OS-entropy CSPRNG)")
    p.add_argument("--insecure-seed", action="store_true",
                   help="accept predictable noise from --seed (tests and reproductions only)")
    p.set_defaults(run=_synthesize)

    p = sub.add_parser("audit", help="Monte Carlo attempt to refute the privacy of a spec's or certificate's mechanism")
    p.add_argument("source", help="a spec (YAML/JSON) or a certificate.json")
    p.add_argument("--draws", type=int, default=None, help="draws per dataset and pair (default: AUDIT_DRAWS of dpopt.audit.empirical)")
    p.add_argument("--seed", type=int, default=None, help="seed of the audit's draws (default: AUDIT_SEED of dpopt.audit.empirical)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_audit)

    p = sub.add_parser("report", help="the audit report for a spec or a certificate")
    p.add_argument("source", help="a spec (YAML/JSON) or a certificate.json")
    p.add_argument("--out", help="FILE.html (self-contained) or FILE.md (figures as FILE_*.png next to it); "
                                 "default: Markdown on stdout, without figures")
    p.add_argument("--draws", type=int, default=50_000, help="draws per dataset and pair for the empirical audit")
    p.add_argument("--no-audit", action="store_true", help="leave the empirical audit out")
    p.set_defaults(run=_report)
    _ledger_parser(sub)
    return parser


def _ledger_parser(sub) -> None:
    """``dpopt ledger init|show|verify``."""
    p = sub.add_parser("ledger", help="a privacy budget ledger: every release from one data set, composed",
                       description="A ledger folder records every release from one data set (its certificate, "
                                   "in a hash chain) and refuses a release that would exceed its budget.")
    lsub = p.add_subparsers(dest="ledger_command", required=True)
    q = lsub.add_parser("init", help="create an empty ledger with its budget")
    q.add_argument("ledger", metavar="LEDGER", help="a folder (created; must be new or empty)")
    q.add_argument("--budget", required=True,
                   help="the total budget, as in a spec's privacy (YAML; numbers count as the decimals written): "
                        "'zcdp: {rho: 0.3}', 'gdp: {mu: 1}', 'pure: {epsilon: 2}' or "
                        "'approx: {epsilon: 3, delta: 1e-6}'")
    q.add_argument("--unit", metavar="ID|row",
                   help="who the ledger protects: 'row', or the id column of a person (default: the unit of the "
                        "first release)")
    q.add_argument("--max-rows", type=int, metavar="K",
                   help="with --unit ID: the most rows any person has in the data; row-level releases are then "
                        "charged at their cost for groups of K rows (refused without it)")
    q.add_argument("--key", metavar="FILE",
                   help="seal the ledger: an HMAC key file (at least 32 random bytes) or an Ed25519 private key "
                        "(`dpopt keygen`); a rewritten chain then fails `ledger verify --key`")
    q.set_defaults(run=_ledger_init)
    q = lsub.add_parser("show", help="spent and remaining budget, and the table of releases")
    q.add_argument("ledger", metavar="LEDGER")
    q.add_argument("--json", action="store_true", help="the spending and the entries as JSON")
    q.set_defaults(run=_ledger_show)
    q = lsub.add_parser("verify", help="re-derive the composition from the stored certificates")
    q.add_argument("ledger", metavar="LEDGER")
    q.add_argument("--key", metavar="FILE", help="check the seals with this HMAC key (or Ed25519 private key)")
    q.add_argument("--public-key", metavar="PUB.pem", help="check Ed25519 seals with this public key")
    q.set_defaults(run=_ledger_verify)


def _ledger_init(args: argparse.Namespace) -> int:
    from dpopt.ledger.store import Ledger, budget_text, unit_text

    if args.max_rows is not None and args.unit in (None, "row"):
        raise SpecError("--max-rows", "goes with --unit ID (the most rows a person named by ID has)")
    if args.max_rows is not None and args.max_rows < 1:
        raise SpecError("--max-rows", f"the most rows a person has is 1 or more (got {args.max_rows})")
    unit = args.unit if args.unit in (None, "row") else {"id": args.unit, "max_rows": args.max_rows}
    ledger = Ledger.create(args.ledger, args.budget, unit=unit, key=args.key)
    sealed = f", sealed ({ledger.key.method})" if ledger.key else ""
    print(f"created ledger {ledger.path} with budget {budget_text(ledger.budget)}, protecting "
          f"{unit_text(ledger.unit)}{sealed}")
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    from dpopt.ledger import Ledger

    ledger = Ledger(args.ledger)
    if args.json:
        entries = ledger.entries
        sys.stdout.write(json.dumps({**ledger.spending().to_dict(), "unit": ledger.ledger_unit(entries),
                                     "seal_method": ledger.header.get("seal_method"), "head_sha256": ledger.head(),
                                     "entries": entries}, indent=2, ensure_ascii=False) + "\n")
    else:
        print(ledger.show())
    return 0


def _ledger_verify(args: argparse.Namespace) -> int:
    from dpopt.ledger import Ledger

    if args.key and args.public_key:
        raise SpecError("--public-key", "give --key or --public-key, not both")
    try:
        result = Ledger(args.ledger, key=args.key or args.public_key).verify()
    except LedgerDamagedError as exc:  # a ledger that cannot be read at all is exit 2, not a failed verification
        print(f"ledger FAILED: {exc}", file=sys.stderr)
        return 1
    for check in result.checks:
        print(f"{'PASS' if check.passed else 'FAIL'}  {check.claim}: {check.method} — {check.detail}")
    if result.passed:
        print(f"ledger holds: {len(result.checks)} checks re-derived")
        return 0
    print("ledger FAILED: " + ", ".join(c.claim for c in result.failed), file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run one ``dpopt`` command; its exit code. ``argv`` None: the command line, and the process ends with it."""
    if argv is not None:
        return _main(argv)
    try:
        return _main(None)
    finally:
        # The process ends next: objects alive now are frozen (gc.freeze) so that the interpreter's
        # collections at exit do not walk them again (about 80 ms of CPU after a one-count solve, a fifth
        # of the command; benchmarks/bench_small_solve.py). Nothing else about the exit changes.
        gc.freeze()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _warnings_shown_on_success():
            if args.command in ("solve", "release") and args.out:  # refused before the work, not after
                check_output_folder(args.out)
            return args.run(args)
    except DpoptError as exc:
        print(f"dpopt: error: {exc}{_earlier_output(args, exc)}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except KeyboardInterrupt:
        print("dpopt: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not _is_interrupted_query(exc):
            raise
        print("dpopt: interrupted", file=sys.stderr)
        return 130


@contextmanager
def _warnings_shown_on_success():
    """Hold the Python warnings a command raises (numpy's "divide by zero" inside a family that then fails)
    and show them when it ends normally; a command that fails says so in one line, without them."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        yield
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _earlier_output(args: argparse.Namespace, exc: DpoptError) -> str:
    """`` (OUT was not replaced: ...)`` when a command that failed had an ``--out`` folder that holds an
    earlier run's certificate, so that no one takes it for this command's; else empty."""
    from dpopt.errors import OutputError

    out = getattr(args, "out", None)
    if not out or isinstance(exc, OutputError) or not (Path(out) / "certificate.json").is_file():
        return ""
    return f" ({out} was not replaced: its files are an earlier run's, not this command's)"


def _is_interrupted_query(exc: Exception) -> bool:
    """DuckDB's answer to Ctrl-C during a query (``duckdb.InterruptException``), recognised
    without importing DuckDB."""
    kind = type(exc)
    return kind.__name__ == "InterruptException" and kind.__module__.lstrip("_") == "duckdb"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
