"""trn2 cost model over nkisim's instruction trace: `constants` (each with its source), `costs` (the
per-instruction cost rules), `scheduler` (instructions placed in time on their lanes) and
`variants` (what-if rewrites of a trace). It computes numbers only; `nkisim.profile` turns them
into summaries and views. Every number it produces is an estimate ("trn2 cost model (estimate)")."""
