"""Output helpers every layer above uses: the timeline figure (:mod:`.timeline`)."""
