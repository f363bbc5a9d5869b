"""Output helpers every layer above uses: the timeline figure (:mod:`.timeline`), the
progress line of long runs (:mod:`.progress`), numbers and summaries as text
(:mod:`.text`) and Markdown tables (:mod:`.markdown`)."""
