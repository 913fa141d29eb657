#!/usr/bin/python3
"""Compare what node_exporter serves (its /metrics, scraped here) with what
`slurm-imex gpus --json` says, board by board. Prints one line per
mismatch and "metrics: N boards, M values equal"; exits 1 on a mismatch or
when a board is missing. Usage: metrics-compare.py URL GPUS_JSON_FILE"""
import json
import re
import sys
import urllib.request

url, gpus_file = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(url, timeout=10).read().decode()
series = {}
for line in text.splitlines():
    if line.startswith("#") or not line.startswith("slurm_imex_"):
        continue
    m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
    if not m:
        print("unparsable line:", line)
        sys.exit(1)
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
    series.setdefault(m.group(1), []).append((labels, float(m.group(3))))

def value(name, serial, **extra):
    hits = [v for (l, v) in series.get(name, []) if l.get("serial") == serial
            and all(l.get(k) == x for k, x in extra.items())]
    return sum(hits) if hits else None

boards = json.load(open(gpus_file))
bad = equal = 0
for b in boards:
    s = b["serial"]
    want = {
        ("slurm_imex_gpu_jobs_total", ()): b["jobs"],
        ("slurm_imex_gpu_drains_total", ()): b["drains"],
        ("slurm_imex_gpu_warnings_total", ()): b["warns"],
        ("slurm_imex_gpu_energy_joules_total", ()): b["energy_mj"] / 1000.0,
        ("slurm_imex_gpu_xids_total", ()): b["xids"],
        ("slurm_imex_gpu_xids_total", (("class", "restart_app"),)): b["xids_restart_app"],
    }
    for (name, extra), w in want.items():
        got = value(name, s, **dict(extra))
        if got is None or abs(got - w) > 1e-6:
            print(f"mismatch: {name}{dict(extra)} serial={s}: node_exporter {got}, slurm-imex gpus {w}")
            bad += 1
        else:
            equal += 1
print(f"metrics: {len(boards)} boards, {equal} values equal, {bad} mismatches, "
      f"{sum(len(v) for v in series.values())} slurm_imex series scraped")
sys.exit(1 if bad or not boards else 0)
