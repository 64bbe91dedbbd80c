"""What the docs cite resolves (issue 68): a claim ID (``Q5``, ``I6``) is a row of the claims index in
docs/results.md; a ``results.md#anchor`` or ``results/<page>.md, "Section"`` names a heading that page has;
a ``python scripts/<x>.py key=value`` command in the README or docs composes against configs/ (a mistyped
or removed key fails here, not in a reader's terminal); every figure the README quotes is in the claims index.
Sections move between the results pages and the archive, and claim IDs get reused: fifteen such references
had gone stale before this check."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from helpers import ROOT

RESULTS = ROOT / "docs" / "results.md"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = [
    *PAGES,
    *sorted((ROOT / "configs").rglob("*.yaml")),
    *sorted((ROOT / "act").rglob("*.py")),
    *sorted((ROOT / "scripts").glob("*.py")),
    ROOT / "Makefile",
]
# A claim ID: one of the index's letters and a number. T4 is NVIDIA's GPU of that name, never a claim.
CLAIM = re.compile(r"(?<![\w.-])([A-Z])(\d{1,2})(?![\w.])")
NOT_CLAIMS = {"T4"}
ANCHOR_REF = re.compile(r"(?<![\w/])(?:docs/|\.\./)?(results(?:/\w+)?\.md)#([\w-]+)")
SECTION_REF = re.compile(r"(?<![\w/])(?:docs/)?(results(?:/\w+)?\.md),? \"([^\"]+)\"")
COMMAND = re.compile(r"python scripts/(\w+)\.py((?: [^`|\n]*)?)")
MAKE_DEMO = re.compile(r'make demo(?: TASK=(\w+))? ARGS="([^"]*)"')  # scripts/demo.py under the Makefile's TASK
FIGURE = re.compile(r"(?<![\w./])(\d+\.\d+)(?![\d.])")
# Version numbers the README names (Python, MuJoCo, torch, a pin) are not figures.
VERSION_BEFORE = re.compile(r"(?:python|mujoco|torch|arxiv:|==|>=)\s*\(?$", re.IGNORECASE)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but hyphens and underscores dropped,
    spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def prose_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, inside a fenced code block) for every line of a Markdown page."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        lines.append((number, line, fenced))
    return lines


def headings(page: Path) -> list[str]:
    """The anchors of a page's headings, in order (a ``#`` line in a code block is a comment, not a heading)."""
    return [
        slug(line.lstrip("#"))
        for _, line, fenced in prose_lines(page.read_text())
        if not fenced and re.match(r"#{1,6} ", line)
    ]


def claim_ids(index: str) -> set[str]:
    """The IDs of the claims index: the first cell of each of its table rows."""
    return set(re.findall(r"^\| ([A-Z]\d{1,2}) \|", index, re.MULTILINE))


def dangling(text: str, source: str, claims: set[str], pages: dict[str, list[str]]) -> list[str]:
    """Every reference in ``text`` that resolves to nothing, as ``source:line: what``. ``pages`` maps
    ``results.md`` / ``results/<page>.md`` to that page's heading anchors."""
    prefixes = {claim[0] for claim in claims}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for letter, digits in CLAIM.findall(line):
            ref = letter + digits
            if letter in prefixes and ref not in claims and ref not in NOT_CLAIMS:
                found.append(f"{source}:{number}: claim {ref} is not in docs/results.md's claims index")
        for page, anchor in ANCHOR_REF.findall(line):
            if page in pages and anchor not in pages[page]:
                found.append(f"{source}:{number}: {page}#{anchor} is no heading of {page}")
        for page, title in SECTION_REF.findall(line):
            wanted = slug(title)
            if page in pages and not any(anchor.startswith(wanted) for anchor in pages.get(page, [])):
                found.append(f'{source}:{number}: {page} has no section "{title}"')
    return found


def results_pages() -> dict[str, list[str]]:
    pages = {"results.md": headings(RESULTS)}
    for page in sorted((ROOT / "docs" / "results").glob("*.md")):
        pages[f"results/{page.name}"] = headings(page)
    return pages


def test_every_claim_section_and_anchor_cited_resolves():
    claims, pages = claim_ids(RESULTS.read_text()), results_pages()
    assert len(claims) >= 20, "the claims index lost its rows: docs/results.md"
    missing = []
    for source in SOURCES:
        missing += dangling(source.read_text(), str(source.relative_to(ROOT)), claims, pages)
    assert not missing, "references to nothing:\n" + "\n".join(missing)


def test_the_checker_finds_a_dangling_claim_anchor_and_section():
    claims = {"Q1", "I6", "C1"}
    pages = {"results.md": ["claims-index"], "results/insertion.md": ["i6-insertion-without-the-cvae"]}
    text = (
        'fine: Q1, I6 and C1 (results.md#claims-index; results/insertion.md, "I6: insertion without the CVAE")\n'
        "frozen BN fails (docs/results.md C1 vs C3)\n"
        'see docs/results.md#the-gpu and results/insertion.md, "What ships"\n'
        "a T4 GPU is no claim, nor is IPv4 or a P100\n"
    )
    found = dangling(text, "x", claims, pages)
    assert found == [
        "x:2: claim C3 is not in docs/results.md's claims index",
        "x:3: results.md#the-gpu is no heading of results.md",
        'x:3: results/insertion.md has no section "What ships"',
    ]


def test_every_claim_id_is_a_heading_of_the_page_its_index_row_links_to():
    """Index rows link to ``page.md#<anchor>``; the anchor is the claim's own heading, which starts with its ID."""
    rows = []
    for line in RESULTS.read_text().splitlines():
        cells = line.split(" | ")
        if re.match(r"\| [A-Z]\d{1,2}$", cells[0]):  # ID | claim | section | date | ...
            link = re.search(r"\]\((results/\w+\.md)(?:#([\w-]+))?\)", cells[2])
            rows.append((cells[0][2:], *(link.groups() if link else ("", ""))))
    assert len(rows) == len(claim_ids(RESULTS.read_text())) > 20, "the claims index lost its rows"
    pages = results_pages()
    wrong = [
        f"{claim}: {page}#{anchor}"
        for claim, page, anchor in rows
        if not anchor or not anchor.startswith(claim.lower() + "-") or anchor not in pages.get(page, [])
    ]
    assert not wrong, "index rows that do not land on their claim's heading:\n" + "\n".join(wrong)


def test_every_page_over_150_lines_has_a_contents_list():
    long = [p for p in PAGES if len(p.read_text().splitlines()) > 150 and p.name != "README.md"]
    lacking = [str(p.relative_to(ROOT)) for p in long if "contents" not in headings(p)]
    assert not lacking, "pages over 150 lines without a '## Contents' list:\n" + "\n".join(lacking)


# -- commands ------------------------------------------------------------------------------------------------
def hydra_config_of(script: str) -> str | None:
    """The config a script composes (``@hydra_main("bench/train")``), None for a script without Hydra."""
    found = re.search(r'@hydra_main\("([\w/]+)"\)', (ROOT / "scripts" / f"{script}.py").read_text())
    return found.group(1) if found else None


def is_group(key: str) -> bool:
    """``task``, ``experiment``, ``policy``: a config group, whose value names a file of configs/<group>/."""
    return (ROOT / "configs" / key.lstrip("+~").replace(".", "/")).is_dir()


def overrides_of(args: str) -> list[str] | None:
    """The Hydra overrides of a command line as a reader would type them, placeholders (``<ckpt>``, ``...``)
    given a dummy value (a group's placeholder, ``task=<task>``, is dropped: no value can stand for every
    option); None for a line that is not meant to be run as written (a sweep over ``-m``)."""
    args = re.sub(r"\s#.*$", "", args).strip()  # a shell comment
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    if "-m" in words or "--multirun" in words:
        return None
    overrides = []
    for word in words:
        if "=" not in word:
            continue  # `...` (more of the same), a shell word
        key, value = word.split("=", 1)
        if "<" in value or "..." in value or "$" in value:
            if is_group(key):
                continue
            value = "0"
        overrides.append(f"{key}={value}")
    return overrides


def documented_commands() -> list[tuple[str, str, list[str]]]:
    commands = []
    for page in PAGES:
        for number, line, _ in prose_lines(page.read_text()):
            for script, args in COMMAND.findall(line):
                overrides = overrides_of(args)
                if overrides is not None and (ROOT / "scripts" / f"{script}.py").exists():
                    commands.append((f"{page.relative_to(ROOT)}:{number}", script, overrides))
            for task, args in MAKE_DEMO.findall(line):
                overrides = overrides_of(" " + args)
                if overrides is not None:
                    task_args = [f"experiment=cpu_quickstart_{task}"] if task and task != "transfer_cube" else []
                    commands.append((f"{page.relative_to(ROOT)}:{number}", "demo", task_args + overrides))
    return commands


def unknown_overrides(config: str, overrides: list[str], composed: dict) -> list[str]:
    """The overrides of one command that name no key of the config they compose (``composed`` caches a
    config per choice of groups: the groups decide the tree, a plain key only has to be in it). Raises what
    Hydra raises for a group option that does not exist or a value that does not parse."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    parsed = OverridesParser.create().parse_overrides(overrides)
    groups = tuple(o for o, p in zip(overrides, parsed) if is_group(p.key_or_group))
    if (config, groups) not in composed:
        composed[config, groups] = compose(config, overrides=list(groups))
    cfg, missing = composed[config, groups], []
    for override in parsed:
        key = override.key_or_group
        if is_group(key) or key.startswith("hydra") or override.is_add() or override.is_force_add():
            continue
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
        if not (OmegaConf.is_dict(node) and leaf in node.keys()) and not (OmegaConf.is_list(node) and leaf.isdigit()):
            missing.append(override.input_line)  # keys(), not ``in``: a key whose value is ??? is still a key
    return missing


def test_every_documented_command_composes_against_the_configs():
    from hydra import initialize_config_dir

    commands = documented_commands()
    assert len(commands) > 100, "the command pattern stopped matching the docs"
    failed, composed = [], {}
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        for where, script, overrides in commands:
            config = hydra_config_of(script)
            if config is None:
                continue
            try:
                unknown = unknown_overrides(config, overrides, composed)
            except Exception as err:  # noqa: BLE001 - any failure to compose is the finding
                unknown = [str(err).splitlines()[0]]
            failed += [f"{where}: scripts/{script}.py: {what}" for what in unknown]
    assert not failed, "documented commands with keys or options the configs lack:\n" + "\n".join(failed)


def test_a_mistyped_key_and_a_missing_option_are_found():
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        assert unknown_overrides("eval", ["num_episodes=5", "num_episode=5", "+extra=1"], {}) == ["num_episode=5"]
        with pytest.raises(Exception, match="task"):
            unknown_overrides("eval", ["task=no_such_task"], {})


def test_the_command_parser_gives_placeholders_a_value_and_skips_sweeps():
    assert overrides_of(" ckpt_path=<ckpt> execution=chunked   # another mode") == ["ckpt_path=0", "execution=chunked"]
    assert overrides_of(" ckpt_path=... 'task.cameras=[top,right_wrist]' ...") == [
        "ckpt_path=0",
        "task.cameras=[top,right_wrist]",
    ]
    assert overrides_of(" -m policy.kl_weight=1,10,100") is None
    assert overrides_of(" task=<task> num_episodes=50") == ["num_episodes=50"]


# -- the README's figures -------------------------------------------------------------------------------------
def readme_figures(text: str) -> list[tuple[int, str]]:
    figures = []
    for number, line, fenced in prose_lines(text):
        if fenced:
            continue
        for match in FIGURE.finditer(line):
            if not VERSION_BEFORE.search(line[: match.start()]):
                figures.append((number, match.group(1)))
    return figures


def test_every_figure_the_readme_quotes_is_in_the_claims_index():
    index = RESULTS.read_text().split("## Claims index", 1)[1].split("\n## ", 1)[0]
    figures = readme_figures((ROOT / "README.md").read_text())
    assert len(figures) > 20, "the figure pattern stopped matching the README"
    absent = [f"README.md:{n}: {f}" for n, f in figures if not re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", index)]
    assert not absent, "README figures the claims index does not hold:\n" + "\n".join(absent)


def test_the_figure_finder_skips_versions():
    text = "Python >= 3.10, MuJoCo (3.8), torch 2.11, `torch==2.14.1`: 0.93 and 1.19x\n```\n0.55\n```\n"
    assert [f for _, f in readme_figures(text)] == ["0.93", "1.19"]


@pytest.mark.parametrize("claim", ["Q1", "I10", "P8"])
def test_the_claim_pattern_reads_an_id_in_prose(claim):
    assert CLAIM.findall(f"as measured ({claim}), ") == [(claim[0], claim[1:])]


def test_the_config_group_table_names_every_option():
    """docs/training.md's table of config groups lists every file of each group it has a row for: a new task or
    experiment that no page names is one nobody finds."""
    rows = re.findall(r"^\| `(\w+)/` \| (.*) \|$", (ROOT / "docs" / "training.md").read_text(), re.M)
    assert len(rows) >= 8, "docs/training.md lost its table of config groups"
    missing = [
        f"{group}/{option.stem}"
        for group, text in rows
        for option in sorted((ROOT / "configs" / group).glob("*.yaml"))
        if f"`{option.stem}`" not in text
    ]
    assert not missing, "config options docs/training.md's group table does not name:\n" + "\n".join(missing)
