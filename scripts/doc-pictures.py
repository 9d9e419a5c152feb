#!/usr/bin/python3
"""Make the documentation's two pictures from recorded data; nothing is drawn by hand.

Usage: doc-pictures.py [--cli build/fusionflow] [--out docs/img] [--check]

  docs/img/augment-grid.png   `fusionflow augment --grid` of RandAugment on a test card
                              that this script draws (colour bars, a grid, a circle and a
                              triangle: every geometric and colour op shows on it); the tiles
                              are the loader's own output for sample indices 0..11, seed 0.
  docs/img/throughput.svg     the side-by-side table of bench/RESULTS.md's "Policies and
                              recipes" section (its rows with one run: fusionflow against
                              the DataLoader, images/s), as horizontal bars; SVG written
                              here, no plotting library.

--check regenerates the chart in memory and exits 1 if docs/img/throughput.svg differs from
it (the results changed and the chart was not remade); it needs neither the CLI nor Pillow.
The test card needs Pillow (Debian's python3-pil).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(ROOT, "bench", "RESULTS.md")
SECTION = "## Policies and recipes"
GRID_PIPELINE = "decode | random_resized_crop(size=128) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9)"
GRID_DRAWS = 12


def test_card(path):
    """A 320x240 test card: a colour gradient, colour bars, a grid, a circle, a triangle."""
    from PIL import Image, ImageDraw
    w, h = 320, 240
    im = Image.new("RGB", (w, h))
    im.putdata([(255 * x // (w - 1), 255 * y // (h - 1), 128) for y in range(h) for x in range(w)])
    d = ImageDraw.Draw(im)
    bars = [(255, 255, 255), (255, 255, 0), (0, 255, 255), (0, 255, 0),
            (255, 0, 255), (255, 0, 0), (0, 0, 255), (0, 0, 0)]
    bw = w // len(bars)
    for i, c in enumerate(bars):
        d.rectangle([i * bw, 0, (i + 1) * bw - 1, 59], fill=c)
    for k in range(0, w, 20):
        d.line([(k, 60), (k, h)], fill=(40, 40, 40))
    for k in range(60, h, 20):
        d.line([(0, k), (w, k)], fill=(40, 40, 40))
    d.ellipse([110, 90, 210, 190], fill=(250, 250, 250), outline=(0, 0, 0), width=4)
    d.polygon([(160, 100), (200, 175), (120, 175)], fill=(220, 30, 30))
    im.save(path)


def contact_sheet(cli, out):
    with tempfile.TemporaryDirectory() as tmp:
        card = os.path.join(tmp, "card.png")
        test_card(card)
        subprocess.run([cli, "augment", card, out, "--grid", str(GRID_DRAWS), "--seed", "0",
                        "--pipeline", GRID_PIPELINE], check=True)


def side_by_side_rows(text):
    """(pipeline, fusionflow images/s, DataLoader images/s, ratio) of the section's
    table rows that hold one run (the rows with "a / b", two runs, are left out)."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    lines = text[start:end if end >= 0 else len(text)].splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("| pipeline |"))
    rows = []
    for line in lines[header + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not re.fullmatch(r"[0-9.]+", cells[1]) or not re.fullmatch(r"[0-9.]+", cells[2]):
            continue
        rows.append((cells[0], float(cells[1]), float(cells[2]), cells[3]))
    if not rows:
        sys.exit(f"doc-pictures: no single-run rows in {RESULTS}'s '{SECTION}' table")
    return rows


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def chart_svg(rows):
    label_w, bar_w, row_h, bar_h, top = 250, 420, 46, 16, 58
    width, height = label_w + bar_w + 120, top + row_h * len(rows) + 36
    vmax = max(max(r[1], r[2]) for r in rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">Images/s on 2 CPU threads, '
           f'side by side (bench/RESULTS.md)</text>',
           f'<rect x="{label_w}" y="32" width="12" height="12" fill="#1f6fb4"/>'
           f'<text x="{label_w + 17}" y="43">fusionflow</text>',
           f'<rect x="{label_w + 110}" y="32" width="12" height="12" fill="#b0b0b0"/>'
           f'<text x="{label_w + 127}" y="43">DataLoader, 2 workers</text>']
    for i, (name, ff, dl, ratio) in enumerate(rows):
        y = top + i * row_h
        out.append(f'<text x="{label_w - 8}" y="{y + bar_h + 4}" text-anchor="end">{esc(name)}</text>')
        for k, (v, colour) in enumerate(((ff, "#1f6fb4"), (dl, "#b0b0b0"))):
            w = round(bar_w * v / vmax, 1)
            yy = y + k * (bar_h + 2)
            out.append(f'<rect x="{label_w}" y="{yy}" width="{w}" height="{bar_h}" fill="{colour}"/>')
            out.append(f'<text x="{label_w + w + 5}" y="{yy + bar_h - 3}">{v:g}'
                       + (f' ({esc(ratio)})' if k == 0 else "") + '</text>')
    out.append(f'<text x="10" y="{height - 12}" font-size="11" fill="#555">Batch 64, demo data '
               f'(2,000 JPEGs); the rows of the "Policies and recipes" table with one run; '
               f'2-core AMD EPYC VM.</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "fusionflow"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "img"))
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the committed chart differs from bench/RESULTS.md's table")
    args = ap.parse_args()
    with open(RESULTS, encoding="utf-8") as f:
        svg = chart_svg(side_by_side_rows(f.read()))
    chart = os.path.join(args.out, "throughput.svg")
    if args.check:
        with open(chart, encoding="utf-8") as f:
            if f.read() != svg:
                sys.exit(f"doc-pictures: {chart} is not bench/RESULTS.md's table: "
                         f"run scripts/doc-pictures.py")
        return
    os.makedirs(args.out, exist_ok=True)
    with open(chart, "w", encoding="utf-8") as f:
        f.write(svg)
    contact_sheet(args.cli, os.path.join(args.out, "augment-grid.png"))
    for name in ("augment-grid.png", "throughput.svg"):
        p = os.path.join(args.out, name)
        print(f"doc-pictures: wrote {p} ({os.path.getsize(p)} bytes)")


if __name__ == "__main__":
    main()
