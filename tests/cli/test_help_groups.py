"""`--help` grouped by purpose (issue 23 item 3). The reference is click's own record of each
command's parameters: the rendered help is parsed back into sections and option rows and
checked against it (every option once, in a group; compare and report name the shared ones
without repeating their help; sweep lists each knob's values)."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from accelsim.cli.common import LAZY_COMMANDS, cli
from accelsim.cli.helpgroups import GROUP_OF, GROUPS, OTHER, SHARED_TITLE, GroupedCommand
from accelsim.sim.knobs import KNOBS

_HEADER = re.compile(r"^(\S.*):$")
_ROW = re.compile(r"^  (-\S.*?)(?:\s{2,}|$)")


def command(name: str) -> click.Command:
    found = cli.get_command(click.Context(cli), name)
    assert found is not None
    return found


def help_text(name: str) -> str:
    result = CliRunner().invoke(cli, [name, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def sections(text: str) -> dict[str, list[str]]:
    """Section title -> its lines (the usage and description come before the first)."""
    out: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            title = match.group(1)
            assert title not in out, f"section {title!r} twice"
            out[title] = []
        elif title is not None:
            out[title].append(line)
    return out


def flags_in_rows(lines: list[str]) -> list[str]:
    """The option spellings at the start of each option row (--a / --no-a gives both)."""
    found = []
    for line in lines:
        match = _ROW.match(line)
        if match:
            found += re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", match.group(1))
    return found


def options(name: str) -> list[click.Option]:
    cmd = command(name)
    return [p for p in cmd.get_params(click.Context(cmd)) if isinstance(p, click.Option)]


@pytest.mark.parametrize("name", ["simulate", "sweep"])
def test_every_option_is_in_exactly_one_group_section(name):
    parts = sections(help_text(name))
    assert OTHER not in parts, f"options without a group: {parts.get(OTHER)}"
    assert set(parts) <= set(GROUPS)
    assert len(parts) >= 8  # workload, hardware, pipeline, training, serving, LLM, ...
    rows = {title: flags_in_rows(lines) for title, lines in parts.items()}
    for opt in options(name):
        where = [t for t, flags in rows.items() if opt.opts[0] in flags]
        assert len(where) == 1, (opt.opts[0], where)
        assert rows[where[0]].count(opt.opts[0]) == 1, opt.opts[0]


def test_the_table_names_every_option_of_simulate_and_sweep_once():
    assert sum(len(names) for names in GROUPS.values()) == len(GROUP_OF)  # none twice
    for name in ("simulate", "sweep"):
        cmd = command(name)
        helper = cmd.get_help_option(click.Context(cmd))
        missing = [p.name for p in options(name) if p is not helper and p.name not in GROUP_OF]
        assert missing == [], f"{name}: give these options a group in GROUPS: {missing}"


def test_an_option_without_a_group_shows_under_other_options():
    cmd = GroupedCommand("demo", params=[click.Option(["--batch"], help="Batch size."),
                                         click.Option(["--new-knob"], help="Not grouped.")])
    text = CliRunner().invoke(cmd, ["--help"]).output
    parts = sections(text)
    assert flags_in_rows(parts["Workload"]) == ["--batch"]
    assert flags_in_rows(parts[OTHER]) == ["--new-knob"]


@pytest.mark.parametrize("name", ["compare", "report"])
def test_compare_and_report_show_their_own_options_and_fold_the_shared(name):
    text = help_text(name)
    assert len(text.splitlines()) < len(help_text("simulate").splitlines()) / 3
    parts = sections(text)
    shared_names = {*KNOBS, "seq_len", "image_size", "settings"}
    own = [o for o in options(name) if o.name not in shared_names]
    assert own and set(flags_in_rows(parts["Options"])) >= {o.opts[0] for o in own}
    for opt in own:  # each with its help, in full
        first_words = " ".join((opt.help or "").split()[:3])
        if first_words:
            assert first_words in " ".join(" ".join(parts["Options"]).split()), opt.opts[0]
    folded = " ".join(parts[SHARED_TITLE])
    names = re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*)", folded)
    shared = [o for o in options(name) if o.name in shared_names]
    assert sorted(names) == sorted(max(o.opts, key=len) for o in shared)
    for opt in shared:  # named, not explained
        assert opt.help and opt.help not in text


def test_sweep_lists_the_values_of_every_knob_with_a_fixed_set():
    sim = {o.name: o for o in options("simulate")}
    sweep = {o.name: o for o in options("sweep")}
    checked = 0
    for knob in KNOBS:
        kind = sim[knob].type
        if isinstance(kind, click.Choice):
            # each value named once: in a "Values:" list, or already in the knob's own words
            said = sweep[knob].help
            words = set(re.findall(r"[\w+-]+(?:\.[\w+-]+)*", said))
            assert set(kind.choices) <= words, knob
            assert (f"Values: {', '.join(kind.choices)}." in said) != (
                "Values:" not in said), knob
            assert said.count("Values:") <= 1, knob
            checked += 1
    assert checked >= 10


def test_a_long_choice_list_is_in_the_help_not_the_metavar():
    text = re.sub(r"-\s+", "-", " ".join(help_text("simulate").split()))
    software = next(o for o in options("simulate") if o.name == "software")
    assert isinstance(software.type, click.Choice) and len(software.type.choices) > 10
    assert "--software SOFTWARE " in text
    assert f"One of: {', '.join(software.type.choices)}." in text


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_no_help_line_is_wider_than_100_columns(name):
    for line in help_text(name).splitlines():
        assert len(line) <= 100, line


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_no_help_line_breaks_a_word_at_its_hyphen(name):
    """`pytorch-compiled` or `time-to-train` wraps whole: no line ends in a letter and "-"
    with the word going on below (click's wrapper breaks after hyphens)."""
    lines = help_text(name).splitlines()
    for line, below in zip(lines, lines[1:], strict=False):
        assert not (re.search(r"[A-Za-z]-$", line) and re.match(r"\s+[a-z]", below)), line


def test_hyphenated_words_are_kept_in_the_help_text():
    """The non-breaking hyphen is only a stand-in while wrapping: the text says "-"."""
    text = help_text("simulate")
    assert "pytorch-compiled" in text and "\u2011" not in text


def test_plan_help_has_every_option_once_in_its_own_groups():
    from accelsim.cli.helpgroups import PLAN_GROUPS

    parts = sections(help_text("plan"))
    assert OTHER not in parts, f"options without a group: {parts.get(OTHER)}"
    assert list(parts) == list(PLAN_GROUPS)
    rows = {title: flags_in_rows(lines) for title, lines in parts.items()}
    for opt in options("plan"):
        where = [t for t, flags in rows.items() if opt.opts[0] in flags]
        assert len(where) == 1, (opt.opts[0], where)
