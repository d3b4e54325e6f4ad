"""
# Compare and reproduce: the bench on a small spec

A sweep from one YAML spec: two training losses × two seeds on scikit-learn's digits, each
network then temperature-scaled, every result in an SQLite store, and the report with its
tables and figures. `calibkit bench SPEC -o OUT` does the same from the command line.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from PIL import Image

from calibkit.bench import load_spec, run_bench, write_report

SPEC = """
name: gallery
seeds: [1, 2]
train: {epochs: 10}
datasets:
  - data: digits
    models: [mlp]
methods:
  - {name: CE, loss: ce}
  - {name: Focal, loss: "focal:gamma=3"}
posthoc: [ts]
"""
out = Path(tempfile.mkdtemp())
(out / "spec.yaml").write_text(SPEC)
counts = run_bench(load_spec(out / "spec.yaml"), out / "results")
print(counts)
info = write_report(out / "results" / "results.sqlite", out / "report")
print((out / "report" / "report.md").read_text().split("\n## ")[1][:1200])

# %%
# One of the report's figures, as `report.html` shows it.

figures = sorted((out / "report" / "figures").glob("*.png"))
fig, ax = plt.subplots(figsize=(7, 5))
ax.imshow(Image.open(figures[0]))
ax.set_axis_off()
ax.set_title(figures[0].name)
