"""Thin layers over calibkit for the tools users already work in; each module imports its
library lazily and says how to install it when it is missing."""
