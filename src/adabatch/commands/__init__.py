"""adabatch.commands."""
