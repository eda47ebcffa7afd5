# Every relative link in the repository's Markdown pages (README.md, ARCHITECTURE.md,
# CONTRIBUTING.md, BENCHMARKS.md, docs/*.md, the packages' READMEs) names a file that exists,
# and a `#fragment` names a heading of that page (GitHub's anchors), so moving a section
# between pages cannot leave a dead link behind.
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *(ROOT / d / "README.md" for d in ("python", "npm", "java"))}
)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


def anchors(page):
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_relative_links_resolve():
    dead = []
    for page in PAGES:
        if not page.exists():
            continue
        for url in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", url):
                continue
            path, _, fragment = url.partition("#")
            target = (page.parent / path).resolve() if path else page
            name = f"{page.relative_to(ROOT)}: {url}"
            if not target.exists():
                dead.append(f"{name} (no such file)")
            elif fragment and target.suffix == ".md" and fragment not in anchors(target):
                dead.append(f"{name} (no such heading)")
    assert PAGES and not dead, "dead links:\n" + "\n".join(dead)
