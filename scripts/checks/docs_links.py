#!/usr/bin/python3
"""The documentation's links: every relative link resolves, every anchor is a heading.

    python3 scripts/checks/docs_links.py [--root DIR]

Reads README.md, CHANGELOG.md, docs/**/*.md, Benchmarks/*/README.md and deploy/**/README.md (outside fenced code
blocks and code spans) and checks:

- every relative link (`[text](path)`, `![alt](path)`, `[id]: path`, `<a href="path">`) names a
  file or directory of the repository, and does not leave it (no `../` past the root);
- every `#anchor`, alone or after a markdown file, is a heading of that file as GitHub names it
  (lowercase; punctuation other than `-` and `_` removed; spaces become `-`; a repeated heading
  gets `-1`, `-2`, …) or an `<a name>`/`id` of it;
- README.md: under 400 lines, a table of contents (a "Contents" heading followed by a list of links
  to the README's own headings), and no link out of the repository (`../`, `file:`, or another
  repository on GitHub, GitLab or Bitbucket).

Prints one line per failure (`file:line: what`) and exits 1 when there was one; otherwise prints
`docs-links: N links checked, ok`. Standard library only.

The anchor rules are importable: `anchors_of(path)` and `slug(text)` (tests/system/test_observability.py
holds the alert rules' runbooks to them).
"""
import argparse
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 400

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_HREF = re.compile(r"<a\s[^>]*\bhref=\"([^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<[a-z][^>]*\b(?:name|id)=\"([^\"]+)\"", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
OTHER_REPOSITORY = re.compile(r"^(?:https?://)?(?:www\.)?(?:github\.com|gitlab\.com|bitbucket\.org|raw\.githubusercontent\.com)/", re.I)


def slug(text):
    """GitHub's anchor for a heading's text (github-slugger): inline markup dropped, lowercase,
    punctuation but `-` and `_` removed, each space a `-`."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    text = text.replace("`", "")
    text = text.strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in "-_ " or category[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def prose_lines(text):
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
            fence = None


def headings(text):
    """(line number, level, text) of every ATX and setext heading outside code blocks."""
    found = []
    previous = None
    for number, line in prose_lines(text):
        m = ATX.match(line)
        if m:
            content = re.sub(r"[ \t]+#+$", "", m.group(2) or "").strip()
            if content == "#" * len(content):
                content = ""
            found.append((number, len(m.group(1)), content))
            previous = None
            continue
        s = SETEXT.match(line)
        if s and previous is not None and previous[1].strip() and not previous[1].lstrip().startswith(("-", "*", "+", ">", "|")):
            found.append((previous[0], 1 if s.group(1)[0] == "=" else 2, previous[1].strip()))
            previous = None
            continue
        previous = (number, line)
    return found


_anchor_cache = {}


def anchors_of(path):
    """Every anchor GitHub gives the markdown file at `path`: its headings' slugs (repeats numbered)
    and the `name`/`id` of its HTML elements."""
    path = Path(path)
    if path not in _anchor_cache:
        text = path.read_text(encoding="utf-8")
        seen, anchors = {}, set()
        for _, _, content in headings(text):
            base = slug(content)
            n = seen.get(base, 0)
            anchors.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
        for _, line in prose_lines(text):
            anchors.update(m.group(1) for m in HTML_ANCHOR.finditer(line))
        _anchor_cache[path] = anchors
    return _anchor_cache[path]


def links(text):
    """(line number, target) of every link outside code blocks and code spans."""
    for number, line in prose_lines(text):
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(2).strip("<>")
            continue
        line = CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)
        for m in INLINE_LINK.finditer(line):
            yield number, m.group(2).strip("<>")
        for m in HTML_HREF.finditer(line):
            yield number, m.group(1)


def is_external(target):
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)) or target.startswith("//")


def check_target(root, source, target):
    """None when `target` (a link in `source`) resolves, else what is wrong."""
    path_part, _, anchor = target.partition("#")
    if path_part:
        resolved = (source.parent / path_part).resolve()
        try:
            resolved.relative_to(root)
        except ValueError:
            return f"{target}: leaves the repository"
        if not resolved.exists():
            return f"{target}: {resolved.relative_to(root)} does not exist"
    else:
        resolved = source
    if anchor:
        if resolved.is_dir() or resolved.suffix.lower() not in (".md", ".markdown"):
            return f"{target}: an anchor into {resolved.relative_to(root)}, which is not a markdown file"
        if anchor not in anchors_of(resolved):
            return f"{target}: no heading #{anchor} in {resolved.relative_to(root)}"
    return None


def documentation_files(root):
    files = [root / "README.md", root / "CHANGELOG.md"]
    files += sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    files += sorted((root / "Benchmarks").glob("*/README.md"))
    files += sorted((root / "deploy").rglob("README.md")) if (root / "deploy").is_dir() else []
    return [f for f in files if f.is_file()]


def check_readme(root, readme, failures):
    text = readme.read_text(encoding="utf-8")
    rel = readme.relative_to(root)
    count = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if count >= README_MAX_LINES:
        failures.append(f"{rel}: {count} lines; it must stay under {README_MAX_LINES} (move the detail into docs/)")
    lines = text.split("\n")
    toc = [(n, c) for n, _, c in headings(text) if re.fullmatch(r"(table of )?contents", c.strip(), re.I)]
    if not toc:
        failures.append(f"{rel}: no table of contents (a 'Contents' heading with a list of links to the README's headings)")
    else:
        start = toc[0][0]
        entries = []
        for line in lines[start:]:
            if ATX.match(line):
                break
            entries += re.findall(r"^\s*[-*+]\s+\[[^\]]+\]\(#([^)]+)\)", line)
        if len(entries) < 3:
            failures.append(f"{rel}:{start}: the table of contents lists {len(entries)} of the README's headings; it should list its sections")
    for number, target in links(text):
        if target.startswith("../") or target == ".." or target.lower().startswith("file:") or OTHER_REPOSITORY.match(target):
            failures.append(f"{rel}:{number}: {target}: the README links out of the repository")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(ROOT), help="the repository to check (default: this one)")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    readme = root / "README.md"
    failures = []
    if not readme.is_file():
        failures.append("README.md: missing")
    else:
        check_readme(root, readme, failures)
    checked = 0
    for source in documentation_files(root):
        rel = source.relative_to(root)
        for number, target in links(source.read_text(encoding="utf-8")):
            if not target or is_external(target):
                continue
            checked += 1
            problem = check_target(root, source, target)
            if problem:
                failures.append(f"{rel}:{number}: {problem}")
    for failure in failures:
        print(failure)
    if failures:
        print(f"docs-links: {checked} links checked, {len(failures)} failed", file=sys.stderr)
        return 1
    print(f"docs-links: {checked} links checked, ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
