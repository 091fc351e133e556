"""kinedistill.distill (see README)."""
