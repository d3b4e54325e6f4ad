"""
# Where you already work: temperature scaling inside a Lightning run

A LightningModule on scikit-learn's digits, trained with two calibkit callbacks: one logs
ECE, adaptive ECE and NLL on the validation split every epoch, the other fits temperature
scaling on the validation logits after every validation. The last fit calibrates the test
split.
"""

import lightning.pytorch as pl
import matplotlib.pyplot as plt
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

from calibkit import evaluate
from calibkit.adapters.lightning import CalibrationCallback, PostHocCallback

x, y = load_digits(return_X_y=True)
x = torch.tensor(x / 16, dtype=torch.float32)
x_fit, x_test, y_fit, y_test = train_test_split(x, torch.tensor(y), test_size=0.4, random_state=0)
x_train, x_val, y_train, y_val = train_test_split(x_fit, y_fit, test_size=0.3, random_state=0)


class Digits(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )

    def forward(self, inputs):
        return self.net(inputs)

    def training_step(self, batch, _):
        return torch.nn.functional.cross_entropy(self(batch[0]), batch[1])

    def validation_step(self, batch, _):
        return self(batch[0]), batch[1]

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5, momentum=0.9)


pl.seed_everything(0, verbose=False)
metrics, ts = CalibrationCallback(["ece", "aece", "nll"]), PostHocCallback("ts")
trainer = pl.Trainer(
    max_epochs=40,
    callbacks=[metrics, ts],
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
module = Digits()
trainer.fit(
    module,
    DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True),
    DataLoader(TensorDataset(x_val, y_val), batch_size=256),
)
print("logged:", {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})
with torch.no_grad():
    z_test = module(x_test)
before = evaluate(z_test, y_test)
after = evaluate(ts.calibrator_.predict_proba(z_test), y_test, probs=True)
print(
    f"test ECE {before['ece']:.4f} -> {after['ece']:.4f} with T = {ts.calibrator_.temperature_:.2f}"
)

# %%
# The test ECE and NLL before and after the temperature fitted in the last validation.

fig, ax = plt.subplots(figsize=(5, 3))
names = ["ece", "nll"]
ax.bar([n + " before" for n in names], [before[n] for n in names])
ax.bar([n + " after" for n in names], [after[n] for n in names])
fig.tight_layout()
