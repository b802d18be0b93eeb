"""Profiles of kernel launches: `summary` (ProfileSummary, from the cost model's schedule or from a
Neuron Explorer summary), `profiling` (`profile()`: cost model here, Neuron Explorer on trn2,
in a process of its own),
`views` (matplotlib timeline, comparison, roofline; matplotlib loads on first use), `published`
(the kernels' published trn2 measurements) and `calibration` (model vs reference tables).

Layers: emulator -> instruction trace -> cost model (numbers) -> profile (summaries and views).
"""
