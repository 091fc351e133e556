"""kinedistill.posespace (see README)."""
