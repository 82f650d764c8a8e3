"""``stead eval``: how agents behave across process boundaries, measured from their journals.

A suite (:mod:`.suite`) names tasks and conditions; each cell (:mod:`.cell`)
runs one task under one condition in real worker processes, injecting its
boundary (:mod:`.conditions`); :mod:`.measure` reads completion, adherence,
effects and cost from the journal; :mod:`.aggregate` compares every condition
with the uninterrupted baseline; the reports are Markdown, HTML and JSON.
"""
