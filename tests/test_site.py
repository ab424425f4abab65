"""The rendered site as readers see it: every page of `_docs/` (made by `bash tools/render_site.sh`) in a real
browser, Chromium driven by Playwright.

One session fixture serves `_docs/` on 127.0.0.1, loads every page once at 1280x900 and once at 420x900 (a phone),
saves full-page screenshots into `_screens/`, and records what each check needs; the tests below then judge the
records, each naming the page, the element and what is wrong. Nothing leaves the machine: requests to other hosts
are intercepted. A CDN URL of an npm package at an exact version (jsDelivr, unpkg, cdnjs) is answered from that
package, fetched once with `npm pack` into `.cache/cdn/`; a CDN URL without an exact version fails the test; any
other external request is aborted and fails the test, except the images in `STAND_INS`, answered with a stand-in.

Without `_docs/`, Playwright or Chromium the tests are skipped, but they fail when the environment variable CI is
set (GitHub Actions sets CI=true): in CI the site must have been rendered and checked. Without npm, a CDN package
missing from `.cache/cdn/` fails the CDN test, naming it.
"""
import configparser, functools, http.server, importlib, inspect, json, mimetypes, os, re, shutil, subprocess
import tarfile, tempfile, threading, urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_docs"
NBS = ROOT / "nbs"
CDN_CACHE = ROOT / ".cache" / "cdn"
SCREENS = ROOT / "_screens"

# Chromium: $CHROMIUM, else the first of these on PATH, else Playwright's own download (`playwright install chromium`).
CHROMIUM = os.environ.get("CHROMIUM") or next(
    (p for p in map(shutil.which, ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]) if p), None)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 420, "height": 900}

# Notebooks whose page must have at least one explorer: a Vega/Vega-Lite chart (.vega-embed) with a range slider.
EXPECTED_EXPLORER_NOTEBOOKS = ["06_positional_encoding.ipynb", "02_masks.ipynb", "11_copy_task.ipynb"]
# Docstrings whose rendered text must keep every character (Markdown must not turn `*` or `_` into italics).
def documented():
    "{page: [(module, name), ...]}: every function and class nbdev documents, from the package's index (methods aside)."
    from transformer_tutorial._modidx import d
    pages = {}
    for module, syms in d["syms"].items():
        for full, (doc, _) in syms.items():
            name = full[len(module) + 1:]
            if "." not in name: pages.setdefault(doc.split("#")[0], []).append((module, name))
    return pages
# nbgrader's markers: no page may show them, except the teacher's page, whose subject they are.
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MARKER_NOTEBOOKS_ALLOWED = ["15_assignments.ipynb", "92_api.ipynb"]  # the teacher's page, and the API page quoting its module
SOLUTION_SUMMARY = "Show a solution"   # tools/site_procs.py folds each exercise's solution behind this toggle
# External images a page may show that the test cannot fetch: answered with a stand-in of the same size.
STAND_INS = {"https://colab.research.google.com/assets/colab-badge.svg":
             '<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20"><rect width="117" height="20" rx="3" '
             'fill="#555"/><text x="8" y="14" fill="#fff" font-family="sans-serif" font-size="11">Open in Colab</text></svg>'}

EXACT_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$")
CDN_FORMS = [  # (regex on the URL without its query, service); groups: name, version (optional), path
    (re.compile(r"^https://cdn\.jsdelivr\.net/npm/((?:@[^/@]+/)?[^/@]+)(?:@([^/]*))?(?:/(.*))?$"), "jsdelivr"),
    (re.compile(r"^https://unpkg\.com/((?:@[^/@]+/)?[^/@]+)(?:@([^/]*))?(?:/(.*))?$"), "unpkg"),
    (re.compile(r"^https://cdnjs\.cloudflare\.com/ajax/libs/([^/]+)/([^/]+)/(.*)$"), "cdnjs"),
]
CDNJS_TO_NPM = {"jquery": ("jquery", "dist/"), "require.js": ("requirejs", ""), "katex": ("katex", "dist/")}  # lib: (npm name, folder)
LOCAL_HOST = "127.0.0.1"


def _in_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(why):
    "Skip locally; fail in CI, where the site test must run."
    if _in_ci(): pytest.fail(f"{why} (CI is set: render the site with tools/render_site.sh and install the browser first)", pytrace=False)
    pytest.skip(why)


def _report(problems, what, limit=80):
    if problems:
        shown = "\n".join(f"  - {p}" for p in problems[:limit])
        more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
        pytest.fail(f"{len(problems)} {what}:\n{shown}{more}", pytrace=False)


# --- The site's files -----------------------------------------------------------------------------------------

def site_pages():
    "Every HTML page of the rendered site, as paths relative to _docs/ ('index.html', 'exercises/ex01_attention.html')."
    if not SITE.is_dir(): return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if "site_libs" not in p.relative_to(SITE).parts)


def notebooks():
    return sorted(p for p in NBS.rglob("*.ipynb")
                  if not any(part.startswith((".", "_")) for part in p.relative_to(NBS).parts))


def page_of(nb):
    "The page rendered from notebook `nb` (a path, or a name relative to nbs/): Quarto drops a leading 'NN_' (or 'NNa_')."
    rel = Path(nb).relative_to(NBS) if Path(nb).is_absolute() else Path(nb)
    stripped = rel.with_name(re.sub(r"^\d+[a-z]?_", "", rel.stem) + ".html").as_posix()
    plain = rel.with_suffix(".html").as_posix()
    return plain if (SITE / plain).is_file() and not (SITE / stripped).is_file() else stripped


def notebook_of(page):
    return next((nb for nb in notebooks() if page_of(nb) == page), None)


def _nb_cells(nb):
    return json.loads(Path(nb).read_text(encoding="utf-8"))["cells"]


def _src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


_MATH = re.compile(r"\$\$.+?\$\$|(?<![\\$\w])\$(?=\S)[^$\n]+?(?<=\S)\$(?![\w$])", re.S)


def notebook_has_math(nb):
    "Does a markdown cell of `nb` hold TeX math outside code spans and fences?"
    for c in _nb_cells(nb):
        if c["cell_type"] != "markdown": continue
        text = re.sub(r"```.*?```|`[^`\n]*`", "", _src(c), flags=re.S)
        if _MATH.search(text): return True
    return False


def solution_lines(nb):
    "Per solution cell of an exercise notebook, its code lines between nbgrader's markers that no other cell holds."
    cells = _nb_cells(nb)
    out, others = [], "\n".join(_src(c) for c in cells if "BEGIN SOLUTION" not in _src(c))
    for c in cells:
        if c["cell_type"] != "code" or "BEGIN SOLUTION" not in _src(c): continue
        lines, inside = [], False
        for line in _src(c).splitlines():
            s = line.strip()
            if s.endswith("BEGIN SOLUTION"): inside = True
            elif s.endswith("END SOLUTION"): inside = False
            elif inside and len(s) >= 12 and not s.startswith("#") and s not in others: lines.append(s)
        out.append(lines)
    return out


_SCHEMA = re.compile(r"https://vega\.github\.io/schema/vega(?:-lite)?/v[\d.]+\.json")


def vega_charts():
    "(page, index) for every Vega/Vega-Lite chart the pages embed, found in their HTML (one $schema per chart)."
    found = []
    for page in site_pages():
        text = (SITE / page).read_text(encoding="utf-8", errors="replace")
        n = len(_SCHEMA.findall(text)) or (1 if re.search(r"vegaEmbed|vega-embed", text) else 0)
        found += [(page, i) for i in range(n)]
    return found


def site_url():
    cp = configparser.ConfigParser(delimiters=["="])
    cp.read(ROOT / "settings.ini", encoding="utf-8")
    cfg = cp["DEFAULT"]
    return (cfg.get("doc_host", "") + cfg.get("doc_baseurl", "")).rstrip("/") + "/"


# --- CDN assets from npm packages -----------------------------------------------------------------------------

class CdnError(Exception): pass


class NpmCache:
    "npm packages at exact versions, fetched once with `npm pack` into .cache/cdn/NAME@VERSION/package/."
    def __init__(self, root=CDN_CACHE):
        self.root, self.fetched = Path(root), {}

    def package_dir(self, name, version):
        key = f"{name}@{version}"
        if key in self.fetched: return self.fetched[key]
        dest = self.root / key.replace("/", "__")
        if not (dest / "package" / "package.json").is_file():
            npm = shutil.which("npm")
            if not npm: raise CdnError(f"cannot fetch {key}: npm is not installed")
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.root) as tmp:
                r = subprocess.run([npm, "pack", key, "--json", "--silent"], cwd=tmp, capture_output=True, text=True, timeout=180)
                tgz = sorted(Path(tmp).glob("*.tgz"))
                if r.returncode != 0 or not tgz:
                    raise CdnError(f"npm pack {key} failed: {(r.stderr or r.stdout).strip()[-300:]}")
                with tarfile.open(tgz[0]) as tf:
                    try: tf.extractall(Path(tmp) / "x", filter="data")
                    except TypeError: tf.extractall(Path(tmp) / "x")  # Python without extraction filters
                tops = [p for p in (Path(tmp) / "x").iterdir() if p.is_dir()]
                if len(tops) != 1: raise CdnError(f"npm pack {key}: unexpected tarball layout {tops}")
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir(parents=True)
                tops[0].rename(dest / "package")
        self.fetched[key] = dest / "package"
        return self.fetched[key]

    def file(self, name, version, path, service):
        pkg = self.package_dir(name, version)
        if not path:  # the package's browser entry point, as the CDN picks it
            meta = json.loads((pkg / "package.json").read_text(encoding="utf-8"))
            entry = meta.get(service) or meta.get("jsdelivr") or meta.get("unpkg") or meta.get("browser") or meta.get("main") or "index.js"
            path = entry if isinstance(entry, str) else "index.js"
        candidates = [path]
        if path.endswith(".min.js"): candidates.append(path[:-7] + ".js")   # jsDelivr minifies on the fly
        if path.endswith(".min.css"): candidates.append(path[:-8] + ".css")
        if not Path(path).suffix: candidates.append(path + ".js")
        for cand in candidates:
            f = (pkg / cand.lstrip("./")).resolve()
            if f.is_file() and pkg.resolve() in f.parents: return f
        raise CdnError(f"{name}@{version} has no file {path}")


def parse_cdn(url):
    "(service, npm name, version or None, path) for a CDN URL of an npm package, else None."
    bare = url.split("?")[0].split("#")[0]
    for form, service in CDN_FORMS:
        m = form.match(bare)
        if not m: continue
        name, version, path = m.group(1), m.group(2), urllib.parse.unquote(m.group(3) or "")
        if service == "cdnjs":
            npm_name, folder = CDNJS_TO_NPM.get(name, (None, ""))
            if npm_name is None: raise CdnError(f"{url}: no npm package known for the cdnjs library {name!r} (add it to CDNJS_TO_NPM)")
            name, path = npm_name, folder + path
        return service, name, version, path
    return None


_TYPES = {".js": "application/javascript", ".mjs": "application/javascript", ".css": "text/css", ".woff2": "font/woff2",
          ".woff": "font/woff", ".ttf": "font/ttf", ".json": "application/json", ".svg": "image/svg+xml", ".map": "application/json"}


# --- The browser session --------------------------------------------------------------------------------------

class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass


def serve(folder):
    "Serve `folder` on 127.0.0.1 at a free port from a thread; returns (base URL, server)."
    server = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://{LOCAL_HOST}:{server.server_address[1]}/", server


# Everything the checks need from one loaded page, in one round trip.
COLLECT_JS = r"""
(args) => {
  const [summaryText] = args;
  const visible = el => !!el && (el.checkVisibility ? el.checkVisibility({visibilityProperty: true, opacityProperty: true})
                                  : !!(el.offsetWidth || el.offsetHeight) && getComputedStyle(el).visibility !== 'hidden');
  const describe = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                         + (el.classList.length ? '.' + [...el.classList].slice(0, 3).join('.') : '');
  const main = document.querySelector('main') || document.body;
  const noCode = main.cloneNode(true);
  noCode.querySelectorAll('pre, code, script, style, textarea, .katex, .math, .sourceCode').forEach(e => e.remove());
  const outputs = [...document.querySelectorAll('.cell-output')];
  return {
    ids: [...document.querySelectorAll('[id]')].map(e => e.id)
           .concat([...document.querySelectorAll('a[name]')].map(e => e.getAttribute('name'))),
    links: [...document.querySelectorAll('a[href]')].map(a => ({href: a.getAttribute('href'), abs: a.href,
             text: a.textContent.trim().slice(0, 60)})),
    images: [...document.images].map(img => ({src: img.getAttribute('src') || '', abs: img.currentSrc || img.src,
             complete: img.complete, width: img.naturalWidth, alt: img.getAttribute('alt'),
             // as wide as the page draws it; one in a folded callout as wide as it will be once unfolded
             cell: (img.closest('.cell') || {}).id || '',
             shown: img.getBoundingClientRect().width
                    || Math.min(img.naturalWidth, (main.querySelector(':scope p') || main).clientWidth),
             figure: !!img.closest('figure'),
             figcaption: ((img.closest('figure') || {querySelector: () => null}).querySelector('figcaption') || {textContent: ''})
                         .textContent.trim()})),
    math: [...document.querySelectorAll('span.math')].map(s => ({rendered: !!s.querySelector('.katex'),
             tex: s.textContent.slice(0, 80)})),
    katex: document.querySelectorAll('.katex').length,
    katexErrors: [...document.querySelectorAll('.katex-error')].map(e => (e.getAttribute('title') || '') + ' in: '
             + e.textContent.slice(0, 80)),
    proseText: noCode.textContent,
    visibleText: document.body.innerText,
    visibleCode: [...document.querySelectorAll('pre')].filter(visible).map(p => p.innerText).join('\n'),
    reprs: [...document.querySelectorAll('.cell-output')].filter(o => /<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>/.test(o.innerText))
             .map(o => { const cell = o.closest('.cell'), code = cell && cell.querySelector('.cell-code code');
                         return {repr: o.innerText.match(/<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>/)[0],
                                 cell: cell && cell.id ? cell.id : '?',
                                 code: code ? code.textContent.trim().split('\n').slice(-1)[0].slice(0, 80) : '(no code shown)'}; }),
    allText: document.documentElement.textContent,
    emptyOutputs: outputs.filter(o => !o.textContent.trim() && !o.querySelector('img, svg, canvas, iframe, video, object, embed'))
             .map(o => `${describe(o)} in cell #${(o.closest('.cell') || {}).id || '?'} `
                       + `(output ${[...o.parentElement.children].indexOf(o)} of its cell)`),
    otherFormats: [...document.querySelectorAll('a')].filter(a => /CommonMark|Other Formats/i.test(a.textContent))
             .map(a => `<a href="${a.getAttribute('href')}">${a.textContent.trim()}</a>`)
             .concat(/Other Formats/i.test(document.body.innerText) ? ['the text "Other Formats"'] : []),
    solutions: [...document.querySelectorAll('details')]
             .filter(d => (d.querySelector(':scope > summary') || {textContent: ''}).textContent.trim() === summaryText)
             .map(d => ({open: d.open, codeVisible: visible(d.querySelector('pre'))})),
    // Every shown code block and printed output: does its text fit its box, or does it scroll sideways? `column`:
    // how many characters of its font the box shows (a run of 100 'x' measured in the block's own font).
    blocks: [...main.querySelectorAll('pre')].filter(visible).map(p => {
             const cs = getComputedStyle(p), probe = document.createElement('span');
             probe.textContent = 'x'.repeat(100);
             Object.assign(probe.style, {font: cs.font, whiteSpace: 'pre', position: 'absolute', visibility: 'hidden'});
             document.body.appendChild(probe);
             const charWidth = probe.getBoundingClientRect().width / 100;
             probe.remove();
             const lines = p.innerText.split('\n'), longest = lines.reduce((a, b) => b.length > a.length ? b : a, '');
             // a ```text fence in the prose quotes a program's output, and wraps as outputs do (styles.css)
             return {output: !!p.closest('.cell-output, .cell-output-stdout, .cell-output-stderr, .cell-output-display')
                             || p.classList.contains('text'),
                     overflows: p.scrollWidth > p.clientWidth + 1, font: cs.fontSize,
                     column: Math.floor((p.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)) / charWidth),
                     longest: longest.length, line: longest.trim().slice(0, 70), wide: !!p.closest('.wide-output'),
                     cell: (p.closest('.cell') || {}).id || ''}; }),
    // Display equations: how wide each is drawn, and the column it sits in.
    equations: [...main.querySelectorAll('.katex-display')].filter(visible).map(e => ({
             width: Math.ceil((e.querySelector('.katex') || e).scrollWidth), column: e.clientWidth,
             tex: (e.querySelector('annotation') || {textContent: ''}).textContent.trim().slice(0, 70)})),
    outputTexts: outputs.map(o => ({cell: (o.closest('.cell') || {}).id || '', text: o.innerText})),
    outputCells: [...new Set(outputs.map(o => (o.closest('.cell') || {}).id || ''))],
    callouts: [...main.querySelectorAll('.callout')].map(c => ({
             title: (c.querySelector('.callout-title-container') || {textContent: ''}).textContent.trim(),
             text: c.textContent, folded: !!c.querySelector('.callout-collapse.collapse:not(.show)')})),
    height: document.documentElement.scrollHeight,
    charts: [...document.querySelectorAll('.vega-embed')].map(e => ({
             sliders: e.querySelectorAll('input[type=range]').length,
             drawn: !!e.querySelector('canvas, svg.marks')})),
  };
}
"""

# What the page shows at the width it is loaded at (collected at both widths, as `site.data[page]["screen"]` and
# `site.phone[page]["screen"]`).
SCREEN_JS = r"""
() => {
  const main = document.querySelector('main') || document.body;
  const visible = e => e.checkVisibility ? e.checkVisibility({visibilityProperty: true}) : !!e.offsetWidth;
  const cell = e => (e.closest('.cell') || {}).id || '';
  const describe = e => e.tagName.toLowerCase() + (e.classList.length ? '.' + [...e.classList].slice(0, 3).join('.') : '');
  return {
    // the smallest text of the page around its figures: prose, tables, code and outputs (not math, pictures, notes)
    smallestText: Math.min(...[...main.querySelectorAll('*')].filter(e => !e.closest(
               '.katex, svg, figure, .vega-embed, sup, sub, .code-copy-button, .anchorjs-link, .quarto-title-meta'))
             .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()) && visible(e))
             .map(e => parseFloat(getComputedStyle(e).fontSize))),
    // every box whose content is wider than it, which scrolls sideways (not the hidden MathML of inline math), and
    // whether it shows that it does: a display equation's shadow, or the fade of scroll_cues.html and styles.css
    scrollers: [...main.querySelectorAll('*')].filter(e => /auto|scroll/.test(getComputedStyle(e).overflowX)
             && e.scrollWidth > e.clientWidth + 1 && e.offsetWidth > 1 && !e.closest('.katex')).map(e => {
               const cs = getComputedStyle(e), mask = cs.maskImage || cs.webkitMaskImage;
               return {what: describe(e), cell: cell(e), width: e.scrollWidth, box: e.clientWidth,
                       cued: e.matches('.katex-display') || (!!mask && mask !== 'none'),
                       text: (e.innerText || '').trim().slice(0, 50)}; }),
    // every figure: its image's own width, the width it is shown at, and whether a line above it says it scrolls
    figures: [...main.querySelectorAll('figure img')].filter(visible).map(i => {
               const box = i.parentElement;
               return {src: i.getAttribute('src'), abs: i.src, width: i.naturalWidth, cell: cell(i),
                       shown: i.getBoundingClientRect().width, scrolls: box.scrollWidth > box.clientWidth + 1,
                       cue: getComputedStyle(i.closest('figure'), '::before').content}; }),
    // every printed output, and whether its lines wrap at the column
    printed: [...main.querySelectorAll('.cell-output pre, pre.text')].filter(visible).map(p => ({
               cell: cell(p), text: p.innerText,
               wraps: [p, p.querySelector('code')].filter(Boolean)
                      .some(e => getComputedStyle(e).whiteSpace !== 'pre')})),
  };
}
"""

OVERFLOW_JS = r"""
() => {
  const w = window.innerWidth, sw = document.documentElement.scrollWidth, out = [];
  const describe = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                         + (el.classList.length ? '.' + [...el.classList].slice(0, 3).join('.') : '');
  if (sw > w + 1) {
    for (const el of document.querySelectorAll('body *')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.right <= w + 1) continue;
      const parent = el.parentElement;
      if (parent && parent !== document.body && parent.getBoundingClientRect().right > w + 1) continue;  // report the outermost
      let clipped = false;
      for (let p = parent; p && p !== document.body; p = p.parentElement) {
        if (getComputedStyle(p).overflowX !== 'visible' && p.getBoundingClientRect().right <= w + 1) { clipped = true; break; }
      }
      if (!clipped) out.push(`${describe(el)} reaches ${Math.round(r.right)} px ("${(el.textContent || '').trim().slice(0, 50)}")`);
      if (out.length >= 5) break;
    }
  }
  return {width: w, scrollWidth: sw, culprits: out};
}
"""

UNFOLD_CHECK_JS = r"""
(summaryText) => [...document.querySelectorAll('details')]
  .filter(d => (d.querySelector(':scope > summary') || {textContent: ''}).textContent.trim() === summaryText)
  .map(d => { const pre = d.querySelector('pre');
              const shown = !!pre && (pre.checkVisibility ? pre.checkVisibility({visibilityProperty: true}) : !!pre.offsetWidth);
              return {open: d.open, codeVisible: shown, code: pre ? pre.innerText : ''}; })
"""

VISIBLE_CODE_JS = r"""
() => [...document.querySelectorAll('pre')]
  .filter(p => p.checkVisibility ? p.checkVisibility({visibilityProperty: true}) : !!p.offsetWidth).map(p => p.innerText).join('\n')
"""

DOCS_JS = r"""
(names) => Object.fromEntries(names.map(name => {
  // the heading nbdev's show_doc writes (a "source" link just before its section), not prose of the same name
  const headings = [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].filter(h => h.textContent.trim() === name);
  const before = h => (h.closest('section') || h).previousElementSibling;
  const heading = headings.find(h => before(h) && [...before(h).querySelectorAll('a')]
                                      .some(a => a.textContent.trim() === 'source')) || headings[0];
  if (!heading) return [name, null];
  const section = heading.closest('section') || heading.parentElement;
  const parts = [...section.children].filter(c => c !== heading && !c.matches('section, div.sourceCode, .cell'));
  return [name, parts.map(p => p.innerText).join('\n')];
}))
"""


class Site:
    "The rendered site loaded in Chromium: per page, what the checks need."
    def __init__(self, base, browser):
        self.base, self.browser = base, browser
        self.pages = site_pages()
        self.data, self.phone = {}, {}
        self.console, self.page_errors, self.local_failures = [], [], []
        self.cdn_served, self.cdn_problems, self.external, self.stand_ins, self.aborted = set(), [], [], set(), set()
        self.unfold = {}
        self.npm = NpmCache()
        self.current = None
        self.contexts = {}
        self.vega_pages = {p for p, _ in vega_charts()}
        self.documented = documented()

    # Requests to any host but 127.0.0.1.
    def route(self, route):
        req = route.request
        url, rtype = req.url, req.resource_type
        where = self.current or "?"
        if url in STAND_INS:
            self.stand_ins.add(url)
            return route.fulfill(status=200, body=STAND_INS[url], content_type="image/svg+xml")
        try:
            cdn = parse_cdn(url)
            if cdn is None:
                self.external.append(f"{where}: {url} ({rtype}): not a CDN URL of an npm package, cannot be served offline")
                self.aborted.add(url)
                return route.abort()
            service, name, version, path = cdn
            if not version or not EXACT_VERSION.match(version):
                raise CdnError(f"{url} ({rtype}): version {version or '(none)'!r} of {name} is not an exact version: pin it")
            f = self.npm.file(name, version, path, service)
        except CdnError as e:
            self.cdn_problems.append(f"{where}: {e}")
            self.aborted.add(url)
            return route.abort()
        self.cdn_served.add(url.split("?")[0])
        ctype = _TYPES.get(f.suffix) or mimetypes.guess_type(f.name)[0] or "application/octet-stream"
        route.fulfill(status=200, body=f.read_bytes(), content_type=ctype, headers={"access-control-allow-origin": "*"})

    def new_context(self, viewport):
        ctx = self.browser.new_context(viewport=viewport, device_scale_factor=1)
        ctx.set_default_timeout(20000)
        ctx.route(re.compile(rf"^(?!https?://{re.escape(LOCAL_HOST)}[:/])[a-z]+://"), self.route)
        ctx.on("requestfailed", lambda r: self._failed(r, r.failure))
        ctx.on("response", lambda r: r.status >= 400 and self._failed(r.request, f"HTTP {r.status}"))
        return ctx

    def _failed(self, request, why):
        if request.url.startswith(self.base):
            self.local_failures.append(f"{self.current}: {request.url[len(self.base) - 1:]} ({request.resource_type}): {why}")

    def _console(self, msg):
        where = (msg.location or {}).get("url", "")
        if msg.type != "error" or where in self.aborted: return  # an aborted external request: reported by the CDN test
        self.console.append(f"{self.current}: console error: {msg.text[:300]} ({where})")

    def new_page(self, ctx):
        page = ctx.new_page()
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.page_errors.append(f"{self.current}: page error: {str(e)[:300]}"))
        return page

    def load(self, page, rel):
        self.current = rel
        page.goto(self.base + rel, wait_until="load")
        if rel in self.vega_pages:
            try: page.wait_for_selector(".vega-embed canvas, .vega-embed svg.marks", timeout=10000)
            except Exception: pass  # reported by the chart tests

    def crawl(self):
        shutil.rmtree(SCREENS, ignore_errors=True)
        for kind in ("desktop", "phone"): (SCREENS / kind).mkdir(parents=True, exist_ok=True)
        desk = self.contexts["desktop"] = self.new_context(DESKTOP)
        page = self.new_page(desk)
        for rel in self.pages:
            self.load(page, rel)
            self.data[rel] = page.evaluate(COLLECT_JS, [SOLUTION_SUMMARY])
            self.data[rel]["screen"] = page.evaluate(SCREEN_JS)
            page.screenshot(path=str(SCREENS / "desktop" / (rel.replace("/", "__")[:-5] + ".png")), full_page=True)
            if self.data[rel]["solutions"]: self.unfold_solutions(page, rel)
            names = [name for _, name in self.documented.get(rel, [])]
            if names: self.data[rel]["docs"] = page.evaluate(DOCS_JS, names)
        page.close()
        phone = self.contexts["phone"] = self.new_context(PHONE)
        page = self.new_page(phone)
        for rel in self.pages:
            self.load(page, rel)
            self.phone[rel] = page.evaluate(OVERFLOW_JS)
            self.phone[rel]["screen"] = page.evaluate(SCREEN_JS)
            page.screenshot(path=str(SCREENS / "phone" / (rel.replace("/", "__")[:-5] + ".png")), full_page=True)
        page.close()
        self.current = None

    def unfold_solutions(self, page, rel):
        "Click every solution toggle; record what each shows afterwards and the page's visible text."
        summaries = page.locator("details > summary", has_text=SOLUTION_SUMMARY)
        for i in range(summaries.count()):
            summaries.nth(i).click()
        page.wait_for_timeout(100)
        self.unfold[rel] = {"details": page.evaluate(UNFOLD_CHECK_JS, SOLUTION_SUMMARY),
                            "visibleCode": page.evaluate(VISIBLE_CODE_JS)}


@pytest.fixture(scope="session")
def site():
    if not SITE.is_dir() or not (SITE / "index.html").is_file():
        _unavailable(f"{SITE.relative_to(ROOT)}/ is not rendered: run `bash tools/render_site.sh`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install playwright")
    if CHROMIUM and not Path(CHROMIUM).is_file():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM=/path/to/chrome)")
    base, server = serve(SITE)
    pw = sync_playwright().start()
    try:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except Exception as e:
            which = CHROMIUM or "Playwright's own"
            _unavailable(f"Chromium ({which}) does not start: {str(e).strip().splitlines()[0]} "
                         "(apt-get install chromium, set CHROMIUM=/path/to/chrome, or `python -m playwright install chromium`)")
        s = Site(base, browser)
        s.crawl()
        yield s
        for ctx in s.contexts.values(): ctx.close()
        browser.close()
    finally:
        pw.stop()
        server.shutdown()
        server.server_close()


# --- The checks -----------------------------------------------------------------------------------------------

def _link_targets(site):
    "(page, href, target file relative to _docs, anchor) for every link into the site."
    prod = site_url()
    out = []
    for page, d in site.data.items():
        for a in d["links"]:
            abs_ = a["abs"]
            if abs_.startswith(site.base): rest = abs_[len(site.base):]
            elif abs_.startswith(prod): rest = abs_[len(prod):]
            else: continue
            path, _, frag = rest.partition("#")
            path = urllib.parse.unquote(path.split("?")[0])
            if path == "" or path.endswith("/"): path += "index.html"
            out.append((page, a["href"], path, urllib.parse.unquote(frag)))
    return out


def test_summary(site, capsys):
    "Every notebook has its page; prints what the other tests check."
    links = _link_targets(site)
    charts = sum(len(d["charts"]) for d in site.data.values())
    explorers = sum(1 for d in site.data.values() for c in d["charts"] if c["sliders"])
    lines = [f"site test: {len(site.pages)} pages, {len(links)} internal links, {sum(1 for l in links if l[3])} anchors, "
             f"{sum(len(d['images']) for d in site.data.values())} images, "
             f"{sum(d['katex'] for d in site.data.values())} equations (.katex), {charts} Vega charts, {explorers} explorers",
             f"  CDN files served from npm packages: {len(site.cdn_served)}",
             *[f"    {u}" for u in sorted(site.cdn_served)],
             f"  external images replaced by stand-ins: {', '.join(sorted(site.stand_ins)) or 'none'}",
             f"  screenshots: {SCREENS.relative_to(ROOT)}/desktop/*.png (1280x900), {SCREENS.relative_to(ROOT)}/phone/*.png (420x900)"]
    with capsys.disabled(): print("\n" + "\n".join(lines))
    missing = [f"{nb.relative_to(NBS)} has no page {page_of(nb)}" for nb in notebooks() if page_of(nb) not in site.pages]
    _report(missing, "notebooks without a page")
    assert len(site.pages) >= len(notebooks())


def test_no_console_or_page_errors(site):
    _report(site.page_errors + site.console, "JavaScript errors")


def test_no_failed_local_requests(site):
    _report(site.local_failures, "local resources that failed to load")


def test_cdn_assets_pinned_and_available(site):
    "Every CDN URL names an exact version of an npm package; nothing else external is requested."
    _report(sorted(set(site.cdn_problems)) + sorted(set(site.external)), "external requests that are unpinned or cannot be served")


def test_internal_links_resolve(site):
    problems = [f"{page}: link {href!r} -> {path} does not exist" for page, href, path, _ in _link_targets(site)
                if not (SITE / path).is_file()]
    _report(sorted(set(problems)), "internal links to missing files")


def test_anchors_exist(site):
    problems = []
    for page, href, path, frag in _link_targets(site):
        if not frag or not path.endswith(".html") or not (SITE / path).is_file(): continue
        ids = set(site.data[path]["ids"]) if path in site.data else None
        if ids is not None and frag not in ids:
            problems.append(f"{page}: link {href!r}: {path} has no element with id {frag!r}")
    _report(sorted(set(problems)), "links to missing anchors")


def test_images_load_and_have_alt_text(site):
    problems = []
    for page, d in site.data.items():
        for img in d["images"]:
            if not img["complete"] or img["width"] == 0: problems.append(f"{page}: <img src={img['src']!r}> did not load")
            if not (img["alt"] or "").strip(): problems.append(f"{page}: <img src={img['src']!r}> has no alt text")
    _report(problems, "image problems")


def test_equations_rendered(site):
    problems = []
    for page, d in site.data.items():
        problems += [f"{page}: math not rendered by KaTeX: {m['tex']!r}" for m in d["math"] if not m["rendered"]]
        problems += [f"{page}: KaTeX error {e!r}" for e in d["katexErrors"]]
        nb = notebook_of(page)
        if nb and notebook_has_math(nb) and d["katex"] == 0:
            problems.append(f"{page}: {nb.relative_to(NBS)} has TeX math but the page has no .katex element")
    _report(problems, "equation problems")


_RAW_TEX = re.compile(r"\$\$|(?<![\w$])\$(?=\S)[^$\n]{1,200}?(?<=\S)\$(?![\w$])")


def test_no_raw_tex_in_text(site):
    problems = []
    for page, d in site.data.items():
        for m in _RAW_TEX.finditer(d["proseText"]):
            if m.group(0) == "$$" or re.search(r"[\\^_{}=]", m.group(0)):
                problems.append(f"{page}: raw TeX in the text: {d['proseText'][max(0, m.start() - 30):m.end() + 30]!r}")
    _report(problems, "unrendered TeX outside code")


_REPR = re.compile(r"<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>")


def test_no_object_reprs(site):
    "No `<... at 0x...>` repr on a page: the value of a setup call (torch.manual_seed(0), plt.plot(...)) leaking out."
    problems = [f"{page}: cell #{r['cell']} shows {r['repr']!r} (its code ends with {r['code']!r})"
                for page, d in site.data.items() for r in d["reprs"]]
    problems += [f"{page}: object repr {m.group(0)!r} outside the cell outputs"
                 for page, d in site.data.items() if not d["reprs"] for m in _REPR.finditer(d["visibleText"])]
    _report(problems, "object reprs shown on the pages")


def test_no_empty_outputs(site):
    _report([f"{page}: empty output block {o}" for page, d in site.data.items() for o in d["emptyOutputs"]],
            "empty output blocks (nothing to see: a widget, a blank print)")


def test_no_nbgrader_markers(site):
    allowed = {page_of(nb) for nb in MARKER_NOTEBOOKS_ALLOWED}
    problems = []
    for f in sorted(SITE.rglob("*")):
        rel = f.relative_to(SITE).as_posix()
        if not f.is_file() or f.suffix not in (".html", ".md", ".json", ".xml", ".txt") or "site_libs" in rel: continue
        if any(rel == a or rel == a + ".md" for a in allowed): continue
        text = f.read_text(encoding="utf-8", errors="replace")
        if rel == "search.json":  # the search index: one entry per section, each naming its page
            text = "\n".join(json.dumps(e) for e in json.loads(text) if e.get("href", "").split("#")[0] not in allowed)
        for marker in MARKERS:
            for m in re.finditer(re.escape(marker), text):
                problems.append(f"{rel}: {marker!r} in ...{text[max(0, m.start() - 50):m.end() + 20]!r}...")
    for page, d in site.data.items():
        if page in allowed: continue
        problems += [f"{page}: {marker!r} in the loaded page" for marker in MARKERS if marker in d["allText"]]
    _report(problems, "nbgrader markers on the site")


def test_exercise_solutions_folded(site):
    "Exercise pages show the student's version; each solution sits in a closed 'Show a solution' toggle until clicked."
    exercise_pages = [p for p in site.pages if p.startswith("exercises/")]
    assert exercise_pages, "no exercise pages under _docs/exercises/"
    problems = []
    for page in exercise_pages:
        d, nb = site.data[page], notebook_of(page)
        expected = solution_lines(nb) if nb else []
        if len(d["solutions"]) != len(expected):
            problems.append(f"{page}: {len(d['solutions'])} '{SOLUTION_SUMMARY}' toggles for {len(expected)} solution cells in "
                            f"{nb.relative_to(NBS) if nb else '(no notebook)'}")
        for i, s in enumerate(d["solutions"]):
            if s["open"] or s["codeVisible"]: problems.append(f"{page}: solution {i + 1} is visible before its toggle is clicked")
        shown = [l for lines in expected for l in lines if l in d["visibleCode"]]
        problems += [f"{page}: solution line visible before unfolding: {l!r}" for l in shown]
        stubs = d["visibleText"].count("raise NotImplementedError(")
        if stubs < len(expected):
            problems.append(f"{page}: {stubs} student stubs (raise NotImplementedError) shown for {len(expected)} solutions")
        after = site.unfold.get(page)
        if after:
            for i, s in enumerate(after["details"]):
                if not (s["open"] and s["codeVisible"]): problems.append(f"{page}: solution {i + 1} not visible after clicking its toggle")
            problems += [f"{page}: solution line not visible after unfolding: {l!r}"
                         for lines in expected for l in lines if l not in after["visibleCode"]]
    _report(problems, "exercise pages that show or hide solutions wrongly")


def test_colab_badge_is_a_plain_image(site):
    problems = []
    for page, d in site.data.items():
        badges = [i for i in d["images"] if "colab-badge" in i["abs"]]
        nb = notebook_of(page)
        if nb and any("colab-badge.svg" in _src(c) for c in _nb_cells(nb)) and not badges:
            problems.append(f"{page}: the notebook's Open In Colab badge is missing")
        for b in badges:
            if b["alt"] != "Open In Colab": problems.append(f"{page}: Colab badge alt text is {b['alt']!r}, not 'Open In Colab'")
            if b["figure"]: problems.append(f"{page}: Colab badge is inside a <figure>"
                                            + (f" with caption {b['figcaption']!r}" if b["figcaption"] else ""))
    _report(problems, "Colab badge problems")


def test_no_other_formats_links(site):
    _report([f"{page}: {x}" for page, d in site.data.items() for x in d["otherFormats"]], "'Other Formats'/CommonMark links")


def test_no_horizontal_overflow_on_a_phone(site):
    problems = []
    for page, o in site.phone.items():
        if o["scrollWidth"] > o["width"] + 1:
            problems.append(f"{page}: scrolls sideways at {o['width']} px (page is {o['scrollWidth']} px wide): "
                            + ("; ".join(o["culprits"]) or "no single element found"))
    _report(problems, "pages wider than a 420 px phone screen")


# Printed outputs that may be wider than the text column, and why wrapping them would mislead: page -> {cell id: why}.
# Their cells say `#| classes: wide-output`, and styles.css keeps their lines whole, scrolling inside their own box
# (never the page: the phone test above). Every other output wraps at the column (styles.css).
WIDE_OUTPUTS = {
    "complexity.html": {"f0bd19be": "a table of timings, one column per sequence length"},
    "model_files.html": {"b1394885": "a safetensors header: tensor names beside their dtype, shape and offsets"},
    "grading_copies.html": {"aae0b02b": "a table: each exercise beside the reference functions it holds"},
    "open_families.html": {"75b0ca40": "a table: each family's tokenizer pipeline, step beside step"},
    "fast.html": {"d5148575": "torch.profiler's table, as it prints it"},
}


def _blocks(site, output):
    return [(page, b) for page, d in site.data.items() for b in d["blocks"] if b["output"] == output]


def test_code_fits_the_column(site, capsys):
    """At a 1280 px desktop, every shown code cell fits its box: no line a reader has to scroll sideways to read.
    Prints the column measured (characters of code the box shows) and the longest line shown."""
    blocks = _blocks(site, False)
    columns = sorted({b["column"] for _, b in blocks})
    longest = max((b["longest"] for _, b in blocks), default=0)
    with capsys.disabled():
        print(f"\ncode column at {DESKTOP['width']} px: {columns} characters; {len(blocks)} code blocks, the longest "
              f"line {longest} characters; {sum(b['overflows'] for _, b in blocks)} wider than their box")
    _report([f"{page}: cell #{b['cell'] or '?'}, a line of {b['longest']} characters in a column of {b['column']}: "
             f"{b['line']!r}" for page, b in blocks if b["overflows"]], "code blocks wider than the text column")


def test_outputs_fit_the_column(site):
    """Every printed output fits its box too (it wraps), except the tables of WIDE_OUTPUTS, which are marked as
    such on the page; an entry of WIDE_OUTPUTS whose output no longer needs the room is reported too."""
    outputs = _blocks(site, True)
    problems = [f"{page}: output of cell #{b['cell'] or '?'}, a line of {b['longest']} characters in a column of "
                f"{b['column']}: {b['line']!r}" for page, b in outputs
                if b["overflows"] and not (b["wide"] and b["cell"] in WIDE_OUTPUTS.get(page, {}))]
    wide = {(page, b["cell"]) for page, b in outputs if b["overflows"] and b["wide"]}
    problems += [f"{page}: cell #{cell} is listed in WIDE_OUTPUTS but its output fits, or is not marked wide-output"
                 for page, cells in WIDE_OUTPUTS.items() for cell in cells if (page, cell) not in wide]
    _report(problems, "outputs wider than the text column")



def test_equations_fit_the_column(site):
    """At a 1280 px desktop no display equation is wider than the text column (a long one is broken over aligned
    lines); on a phone they scroll inside their box, which the phone test above checks, with a shadow at the edge
    that continues (styles.css)."""
    _report([f"{page}: an equation {e['width']} px wide in a column of {e['column']} px: {e['tex']!r}"
             for page, d in site.data.items() for e in d["equations"] if e["width"] > e["column"] + 1],
            "display equations wider than the text column")


def test_figures_have_captions(site):
    "Every picture but the Colab badge is a figure with a caption saying what it shows."
    _report([f"{page}: <img src={img['src'][:80]!r}> has no caption"
             for page, d in site.data.items() for img in d["images"]
             if "colab-badge" not in img["abs"] and not (img["figure"] and img["figcaption"])],
            "figures without a caption")



def _png_text(data: bytes) -> dict:
    "A PNG's text chunks (tEXt, iTXt) as a dict."
    out, i = {}, 8
    while i + 8 <= len(data):
        n, kind = int.from_bytes(data[i:i + 4], "big"), data[i + 4:i + 8]
        body = data[i + 8:i + 8 + n]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            if rest[:1] == b"\0":  # uncompressed: flag, method, language tag, translated keyword, text
                out[key.decode("latin-1")] = rest[2:].split(b"\0", 2)[-1].decode("utf-8")
        elif kind == b"IEND": break
        i += 12 + n
    return out


def _image_bytes(img):
    "The bytes of a page's image: a data URI's, or the rendered site's file."
    import base64
    if img["src"].startswith("data:"): return base64.b64decode(img["src"].split(",", 1)[1])
    path = SITE / urllib.parse.unquote(urllib.parse.urlparse(img["abs"]).path.lstrip("/"))
    return path.read_bytes() if path.is_file() else b""


# Figures stored before their smallest text was recorded, and why they are not drawn again: (page, cell id) -> why.
FIGURES_UNRECORDED = {}


def test_figure_text_is_no_smaller_than_the_page_text(site, capsys):
    """At a 1280 px desktop no figure's smallest text is drawn smaller than the smallest text of its page (its code
    and outputs, 13 px). Each stored figure records its smallest text in its PNG's own pixels (tools/figure_text.py,
    run by `tools/run_notebooks.py --save`); the page draws the PNG at `shown` of its `width` pixels."""
    problems, sizes = [], []
    for page, d in site.data.items():
        for img in d["images"]:
            if "colab-badge" in img["abs"] or not img["width"]: continue
            record = _png_text(_image_bytes(img)).get("smallest-text-px")
            if record is None and (page, img["cell"]) in FIGURES_UNRECORDED: continue
            if record is None:
                problems.append(f"{page}: {img['src'][:60]!r} has no record of its smallest text: store the notebook's "
                                "outputs with `python tools/run_notebooks.py --save`")
                continue
            drawn = float(record) * min(img["shown"], img["width"]) / img["width"]
            sizes.append(drawn)
            if (page, img["cell"]) in FIGURES_UNRECORDED:
                problems.append(f"{page}: cell #{img['cell']} is listed in FIGURES_UNRECORDED but its figure is recorded")
            if drawn < d["screen"]["smallestText"] - 0.05:
                problems.append(f"{page}: figure {img['src'][-40:]!r} ({img['alt'][:50]!r}): its smallest text is "
                                f"{float(record):.1f} px in a {img['width']} px image drawn {img['shown']:.0f} px wide, "
                                f"so {drawn:.1f} px, under the page's {d['screen']['smallestText']:.1f} px")
    with capsys.disabled():
        print(f"\nfigure text at {DESKTOP['width']} px: {len(sizes)} figures, the smallest text "
              f"{min(sizes, default=0):.1f} px; {len(problems)} figures too small or unrecorded")
    _report(problems, "figures whose text is smaller than the page's")

def test_figures_legible_on_a_phone(site):
    """On a 420 px phone no figure is shrunk until its smallest text is under the page's: each is shown at its own
    width, scrolling sideways inside the column where it is wider (styles.css), and then a line above it says so."""
    problems = []
    for page, o in site.phone.items():
        screen = o["screen"]
        for img in screen["figures"]:
            record = _png_text(_image_bytes(img)).get("smallest-text-px")
            if record is None or not img["width"]: continue  # reported by the desktop test
            drawn = float(record) * min(img["shown"], img["width"]) / img["width"]
            if drawn < screen["smallestText"] - 0.05:
                problems.append(f"{page}: figure {img['src'][-40:]!r} is shown {img['shown']:.0f} px wide of its "
                                f"{img['width']}: its smallest text {drawn:.1f} px, under the page's "
                                f"{screen['smallestText']:.1f} px")
            if img["scrolls"] and img["cue"] in ("none", "normal", ""):
                problems.append(f"{page}: figure {img['src'][-40:]!r} scrolls sideways and nothing above it says so")
    _report(problems, "figures illegible on a phone, or scrolling unannounced")


def test_nothing_scrolls_sideways_at_desktop_width(site):
    """At a 1280 px desktop nothing scrolls sideways but the outputs of WIDE_OUTPUTS: no table, figure, equation or
    chart wider than the text column (a table too wide is split, as chapter 17e's twelve models' is)."""
    _report([f"{page}: {s['what']} in cell #{s['cell'] or '?'} is {s['width']} px wide in a box of {s['box']} px: "
             f"{s['text']!r}" for page, d in site.data.items() for s in d["screen"]["scrollers"]
             if s["cell"] not in WIDE_OUTPUTS.get(page, {})], "boxes scrolling sideways at desktop width")


def test_sideways_scrollers_show_it(site):
    """At both widths every box whose content is wider than it shows that there is more: a display equation its
    shadow, anything else a fade at the edge it continues past (scroll_cues.html marks them, styles.css fades)."""
    _report([f"{kind}: {page}: {s['what']} in cell #{s['cell'] or '?'} ({s['width']} px in {s['box']} px) gives no "
             f"sign that it scrolls: {s['text']!r}"
             for kind, pages in (("desktop", site.data), ("phone", site.phone)) for page, d in pages.items()
             for s in d["screen"]["scrollers"] if not s["cued"]], "boxes scrolling sideways without a cue")


# A printed table: two or more lines whose columns are aligned by runs of spaces, or which are indented (a module's
# printout, nested), each within the 98 characters of code the desktop column shows (an output with longer rows
# wraps at the desktop too).
TABLE_ROW, DESKTOP_COLUMN = re.compile(r"\S {2,}\S|^ {2,}\S"), 98


def _printed_table(text):
    rows = [line for line in text.split("\n") if TABLE_ROW.search(line)]
    return len(rows) >= 2 and all(len(row) <= DESKTOP_COLUMN for row in rows)


def test_printed_tables_keep_their_lines_on_a_phone(site):
    """On a phone a printed table keeps its lines, scrolling sideways (with the cue checked above), rather than
    wrapping each row into the next and its columns into each other; other outputs wrap (styles.css)."""
    printed = [(page, p) for page, o in site.phone.items() for p in o["screen"]["printed"]]
    tables = [(page, p) for page, p in printed if _printed_table(p["text"])]
    _report([f"{page}: the table printed by cell #{p['cell'] or '?'} wraps its lines: "
             f"{next(l for l in p['text'].split(chr(10)) if TABLE_ROW.search(l))[:60]!r}"
             for page, p in tables if p["wraps"]], "printed tables wrapped on a phone")
    assert len(tables) >= 40, f"only {len(tables)} printed tables found on the phone pages: is the collector broken?"


# A temporary folder's path in a printed output: noise to a reader (it names a folder that no longer exists), so the
# notebooks work in a fresh folder with relative paths. Listed: (page, cell id) -> why the absolute path is the point.
TEMP_PATH = re.compile(r"(?:/tmp|/var/folders|/private/var|[A-Z]:\\[^\s]*\\Temp)/[\w./-]*|\btmp[a-z0-9_]{8}\b")
TEMP_PATHS_SHOWN = {}


def test_no_temporary_paths_in_outputs(site):
    shown = {(page, o["cell"]): o["text"] for page, d in site.data.items() for o in d["outputTexts"]
             if TEMP_PATH.search(o["text"])}
    problems = [f"{page}: cell #{cell or '?'} prints the temporary path {TEMP_PATH.search(text).group(0)!r}"
                for (page, cell), text in shown.items() if (page, cell) not in TEMP_PATHS_SHOWN]
    problems += [f"{page}: cell #{cell} is listed in TEMP_PATHS_SHOWN but prints no temporary path"
                 for page, cell in TEMP_PATHS_SHOWN if (page, cell) not in shown]
    _report(problems, "temporary paths in outputs")


# Pages longer than this many desktop screens (1280x900) are too long to read in one sitting: split them. Listed:
# page -> why it is read otherwise.
MAX_SCREENS = 20
LONG_PAGES = {
    "api.html": "the API reference: a table looked up, not read through",
}


def test_pages_fit_in_screens(site):
    heights = {page: d["height"] / DESKTOP["height"] for page, d in site.data.items()}
    problems = [f"{page}: {h:.1f} screens of {DESKTOP['height']} px" for page, h in heights.items()
                if h > MAX_SCREENS and page not in LONG_PAGES]
    problems += [f"{page} is listed in LONG_PAGES but is {heights[page]:.1f} screens" for page in LONG_PAGES
                 if heights.get(page, 0) <= MAX_SCREENS]
    _report(problems, f"pages longer than {MAX_SCREENS} screens")


def _solution_dependent_cells(nb):
    """Cell ids of an exercise notebook whose code uses what a solution defines (its `def` names), directly or
    through a function another such cell defines: their stored outputs are the solutions' doing."""
    cells = _nb_cells(nb)
    names, out = set(), set()
    for c in cells:
        src = _src(c)
        if c["cell_type"] != "code": continue
        if "BEGIN SOLUTION" in src:
            names |= set(re.findall(r"^def (\w+)", src, re.M))
        elif names and re.search(r"\b(?:%s)\b" % "|".join(map(re.escape, names)), src):
            out.add(c.get("id"))
            names |= set(re.findall(r"^def (\w+)", src, re.M))
    return out


def test_exercise_pages_frame_the_solutions_outputs(site):
    """On an exercise page a student sees the stub that raises; what the solutions print sits in callouts that say
    so, never under a cell as its output: each check's pass under 'What passing looks like', shown; what the
    demonstrations print or draw folded under 'With the solutions above'."""
    problems = []
    for page in [p for p in site.pages if p.startswith("exercises/")]:
        d, nb = site.data[page], notebook_of(page)
        dependent = _solution_dependent_cells(nb)
        problems += [f"{page}: cell #{cell} shows the output the solutions made under it"
                     for cell in d["outputCells"] if cell in dependent]
        passing = [c for c in d["callouts"] if c["title"].startswith("What passing looks like")]
        for c in _nb_cells(nb):
            if c["cell_type"] != "code" or "BEGIN SOLUTION" in _src(c): continue
            if not (c.get("metadata", {}).get("nbgrader", {}).get("grade")): continue
            stored = "".join("".join(o.get("text", "")) for o in c.get("outputs", [])).strip()
            if not stored: problems.append(f"{page}: the check in cell #{c.get('id')} has no stored output to show")
            elif not any(stored in " ".join(x["text"].split()) or stored in x["text"] for x in passing if not x["folded"]):
                problems.append(f"{page}: the pass of cell #{c.get('id')} ({stored[:60]!r}) is not shown in a "
                                "'What passing looks like' callout")
        folded = [c for c in d["callouts"] if c["title"].startswith("With the solutions above")]
        problems += [f"{page}: a callout {c['title']!r} is open" for c in folded if not c["folded"]]
    _report(problems, "exercise pages showing the solutions' outputs unframed")

def _norm(text):
    text = text.replace("`", "")
    for a, b in (("\u201c", '"'), ("\u201d", '"'), ("\u2018", "'"), ("\u2019", "'"), ("\u2026", "..."), ("\u2014", "---"),
                 ("\u2013", "--"), ("\xa0", " ")):
        text = text.replace(a, b)
    return " ".join(text.split())


def test_docstrings_not_mangled(site):
    "Every docstring on its page as written: its `*`, `**` and `_` kept, not turned into italics or bold (math in code)."
    problems = []
    for page, objs in site.documented.items():
        docs = site.data.get(page, {}).get("docs", {})
        for module, name in objs:
            obj = getattr(importlib.import_module(module), name, None)
            doc, shown = inspect.getdoc(obj) or "", docs.get(name)
            public = not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
            if doc and public and shown is None:
                problems.append(f"{page}: no heading documents {module}.{name}")
            if not doc or shown is None: continue
            want, got = _norm(doc), _norm(shown)
            if want not in got:
                at = next((i for i, (x, y) in enumerate(zip(want, got)) if x != y), min(len(want), len(got)))
                problems.append(f"{page}: {module}.{name}'s docstring is rendered as ...{got[max(0, at - 40):at + 40]!r}, "
                                f"written ...{want[max(0, at - 40):at + 40]!r}: put math in backticks")
    _report(problems, "mangled docstrings")


def test_expected_explorers_present(site):
    problems = []
    for nb in EXPECTED_EXPLORER_NOTEBOOKS:
        page = page_of(nb)
        charts = site.data.get(page, {}).get("charts", [])
        if not any(c["sliders"] for c in charts):
            problems.append(f"{page} (nbs/{nb}): no explorer: {len(charts)} .vega-embed charts, none with an <input type=range> slider")
    _report(problems, "pages without their explorer")


@pytest.mark.parametrize("page,index", vega_charts(), ids=[f"{p}#chart{i + 1}" for p, i in vega_charts()])
def test_vega_chart_and_sliders(site, page, index):
    "The chart is drawn; moving each of its sliders changes the picture (no chart found: an empty parameter set, a failure in CI, see conftest.py)."
    pg = site.new_page(site.contexts["desktop"])
    try:
        site.load(pg, page)
        charts = pg.locator(".vega-embed")
        if charts.count() <= index:
            pytest.fail(f"{page}: the HTML embeds chart {index + 1}, the browser shows {charts.count()} .vega-embed elements", pytrace=False)
        chart = charts.nth(index)
        graphic = chart.locator("canvas, svg.marks").first
        if not graphic.count(): pytest.fail(f"{page}: chart {index + 1} is not drawn (no canvas or svg in its .vega-embed)", pytrace=False)
        sliders = chart.locator("input[type=range]")
        before = graphic.screenshot()
        for k in range(sliders.count()):
            slider = sliders.nth(k)
            label = slider.evaluate("e => { const b = e.closest('.vega-bind'), n = b && b.querySelector('.vega-bind-name');"
                                    "        return (n ? n.textContent : e.name || e.id || 'slider').trim().slice(0, 40); }")
            slider.evaluate("""e => {
                const v = Number(e.value), lo = Number(e.min || 0), hi = Number(e.max || 100);
                e.value = String(v === hi ? lo : hi);
                e.dispatchEvent(new Event('input', {bubbles: true}));
                e.dispatchEvent(new Event('change', {bubbles: true}));
            }""")
            pg.wait_for_timeout(300)
            after = graphic.screenshot()
            if after == before:
                pytest.fail(f"{page}: chart {index + 1}: moving slider {k + 1} ({label!r}) does not change the chart", pytrace=False)
            before = after
    finally:
        site.current = None
        pg.close()
