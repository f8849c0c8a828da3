#!/usr/bin/python3
"""Draws the training and evaluation loss of training binaries' JSON logs
(--log-json) as an SVG picture: each log's training loss per step (faint)
and its moving average, and its evaluation losses (--eval-*) as points
joined by a line.

  plot_loss.py LOG.jsonl [LABEL=LOG.jsonl ...] -o loss.svg [--smooth N] [--log-y]

Pure Python (no plotting library needed); open the SVG in a browser. Exits
1 with a message naming the problem for a missing or unreadable log or one
without a single loss.
"""

import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 800, 480
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 50
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read_log(path):
    """([(step, loss)], [(step, eval loss)]) of a --log-json file; lines whose
    loss is null (not finite) are left out."""
    train, evals = [], []
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"error: {path}:{number}: not JSON: {e}")
                step = record.get("step")
                if record.get("loss") is not None:
                    train.append((step, float(record["loss"])))
                if record.get("eval_loss") is not None:
                    evals.append((step, float(record["eval_loss"])))
    except OSError as e:
        raise SystemExit(f"error: cannot read the log {path}: {e.strerror}")
    if not train and not evals:
        raise SystemExit(f"error: {path} has no loss (is it a --log-json file?)")
    return train, evals


def moving_average(points, window):
    out, total = [], 0.0
    for i, (step, value) in enumerate(points):
        total += value
        if i >= window:
            total -= points[i - window][1]
        out.append((step, total / min(i + 1, window)))
    return out


def nice_ticks(low, high, count=6):
    """Round tick values covering [low, high]."""
    span = high - low or abs(high) or 1.0
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    t = first
    while t <= high + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(low, high):
    """1, 2 and 5 times the powers of ten in [low, high]."""
    ticks = []
    for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10.0 ** k for m in (1, 2, 5) if low <= m * 10.0 ** k <= high]
    return ticks or [low, high]


def svg(series, smooth, log_y):
    xs = [s for _, train, evals in series for s, _ in train + evals]
    ys = [v for _, train, evals in series for _, v in train + evals]
    if log_y:
        if min(ys) <= 0:
            raise SystemExit("error: --log-y needs positive losses")
        series = [(label, [(s, math.log10(v)) for s, v in train],
                   [(s, math.log10(v)) for s, v in evals])
                  for label, train, evals in series]
        ys = [math.log10(v) for v in ys]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    px = lambda x: LEFT + (x - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)
    py = lambda y: HEIGHT - BOTTOM - (y - y0) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)
    # Tick values (as losses) and where they go (their log with --log-y).
    y_ticks = ([(t, math.log10(t)) for t in log_ticks(10 ** y0, 10 ** y1)]
               if log_y else [(t, t) for t in nice_ticks(y0, y1)])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    for t in nice_ticks(x0, x1):
        out.append(f'<line x1="{px(t):.1f}" y1="{TOP}" x2="{px(t):.1f}" '
                   f'y2="{HEIGHT - BOTTOM}" stroke="#eee"/>')
        out.append(f'<text x="{px(t):.1f}" y="{HEIGHT - BOTTOM + 16}" '
                   f'text-anchor="middle">{t:g}</text>')
    for t, at in y_ticks:
        out.append(f'<line x1="{LEFT}" y1="{py(at):.1f}" x2="{WIDTH - RIGHT}" '
                   f'y2="{py(at):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(at) + 4:.1f}" '
                   f'text-anchor="end">{t:g}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
               f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="black"/>')
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" '
               f'text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(TOP + HEIGHT - BOTTOM) / 2}" '
               f'text-anchor="middle" transform="rotate(-90 16 '
               f'{(TOP + HEIGHT - BOTTOM) / 2})">loss'
               f'{" (log scale)" if log_y else ""}</text>')
    polyline = lambda pts, colour, extra: (
        f'<polyline fill="none" stroke="{colour}" {extra} points="'
        + " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts) + '"/>')
    legend = []
    for i, (label, train, evals) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        if train:
            out.append(polyline(train, colour, 'stroke-opacity="0.25"'))
            out.append(polyline(moving_average(train, smooth), colour,
                                'stroke-width="2"'))
            legend.append((colour, f"{label} train (mean of {smooth})", False))
        if evals:
            out.append(polyline(evals, colour, 'stroke-dasharray="6 3"'))
            for s, v in evals:
                out.append(f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="3.5" '
                           f'fill="{colour}"/>')
            legend.append((colour, f"{label} eval", True))
    for j, (colour, text, dashed) in enumerate(legend):
        y = TOP + 16 + 18 * j
        x = WIDTH - RIGHT - 230
        dash = ' stroke-dasharray="6 3"' if dashed else ""
        out.append(f'<line x1="{x}" y1="{y - 4}" x2="{x + 24}" y2="{y - 4}" '
                   f'stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 30}" y="{y}">{escape(text)}</text>')
    out.append(f'<text x="{LEFT}" y="24" font-size="14">Cleave training '
               f'loss</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", help="LOG.jsonl or LABEL=LOG.jsonl")
    parser.add_argument("-o", "--output", required=True, help="the .svg to write")
    parser.add_argument("--smooth", type=int, default=50,
                        help="steps of the training loss's moving average "
                             "(default 50)")
    parser.add_argument("--log-y", action="store_true",
                        help="a logarithmic loss axis (for a first loss far "
                             "above the rest)")
    args = parser.parse_args()
    if args.smooth < 1:
        raise SystemExit("error: --smooth must be at least 1")
    series = []
    for spec in args.logs:
        label, _, path = spec.rpartition("=")
        series.append((label or path, *read_log(path)))
    try:
        with open(args.output, "w") as f:
            f.write(svg(series, args.smooth, args.log_y))
    except OSError as e:
        raise SystemExit(f"error: cannot write {args.output}: {e.strerror}")
    points = sum(len(t) + len(e) for _, t, e in series)
    print(f"wrote {args.output}: {points} points of {len(series)} log(s)")


if __name__ == "__main__":
    sys.exit(main())
