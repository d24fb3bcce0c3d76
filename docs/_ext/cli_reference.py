"""The command-line reference, generated from ``dpopt.cli.build_parser()`` at build time.

``.. cli-reference:: dpopt.cli.build_parser`` writes one section per command and sub-command
(``dpopt solve``, ``dpopt ledger init`` ...): its help line, its usage as argparse prints it, and a table
of its arguments (names, metavar, default, choices, help). An option added to the parser appears here
without editing a page. A small extension of our own rather than sphinx-argparse: it is about a hundred
lines, and needs nothing beyond argparse's public attributes.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from spec_schema import table


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each sub-command, in the order they were added."""
    out = []
    for action in parser._actions:  # noqa: SLF001 (argparse has no public accessor for its actions)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            helps = {a.dest: a.help or "" for a in action._choices_actions}  # noqa: SLF001
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


def _argument_rows(parser: argparse.ArgumentParser) -> list[list[nodes.Node]]:
    rows = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):  # noqa: SLF001
            continue
        name = ", ".join(action.option_strings) or action.metavar or action.dest
        value = "" if action.nargs == 0 else str(action.metavar or action.dest.upper())
        default = "" if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings \
            else str(action.default)
        choices = ", ".join(map(str, action.choices)) if action.choices else ""
        helptext = (action.help or "") % {"default": action.default, "prog": parser.prog} \
            if action.help and "%" in action.help else action.help or ""
        rows.append([nodes.literal(text=name), nodes.Text(value), nodes.Text(default), nodes.Text(choices),
                     nodes.Text(helptext)])
    return rows


def _section(name: str, helptext: str, parser: argparse.ArgumentParser) -> nodes.section:
    node = nodes.section(ids=[nodes.make_id(f"cli-{name}")])
    node += nodes.title(text=name)
    if helptext or parser.description:
        node += nodes.paragraph(text=parser.description or helptext)
    usage = parser.format_usage().strip()
    node += nodes.literal_block(usage, usage, language="text")
    rows = _argument_rows(parser)
    if rows:
        node += table(["argument", "value", "default", "choices", "help"], rows)
    return node


def command_sections(parser: argparse.ArgumentParser, name: str = "dpopt", helptext: str = "") -> list[nodes.section]:
    """One section per command, depth first: the parser itself, then each sub-command's."""
    out = [_section(name, helptext, parser)]
    for sub, subhelp, subparser in _subcommands(parser):
        out += command_sections(subparser, f"{name} {sub}", subhelp)
    return out


class CliReferenceDirective(SphinxDirective):
    """``cli-reference FACTORY``: the reference of the parser a function (dotted import path) builds."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        module_name, _, function = self.arguments[0].rpartition(".")
        module = importlib.import_module(module_name)
        self.env.note_dependency(module.__file__)
        return command_sections(getattr(module, function)())


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("cli-reference", CliReferenceDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
