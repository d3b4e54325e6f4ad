"""What the command line shares from the bench beyond its face (issue 67 §2): the run
store, the time estimate, the presets' list, the study's Markdown, the CUDA check. Not
public API: a name here may change in any release; users import from
:mod:`calibkit.bench`. A test fails when another package imports a private module of this
one instead."""

from ._estimate import estimate
from ._pack import trains_on_cuda
from ._spec import presets
from ._store import Store
from ._study import study_markdown

__all__ = ["Store", "estimate", "presets", "study_markdown", "trains_on_cuda"]
