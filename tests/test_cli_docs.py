"""docs/cli.md is the `--help` of every command; it must not drift from the CLI."""

from pathlib import Path

from lvsearch.cli import build_parser, cli_reference_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_cli_md_matches_help():
    expected = cli_reference_markdown()
    assert DOC.exists(), "docs/cli.md is missing"
    assert DOC.read_text(encoding="utf-8") == expected, (
        "docs/cli.md is out of date: regenerate it with "
        "python -c \"import lvsearch.cli as c; c.write_cli_reference()\""
    )


def test_every_command_is_documented():
    text = DOC.read_text(encoding="utf-8")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in sub.choices:
        assert f"## lvsearch {name}\n" in text, name
