"""The scenario catalogue: every module here registers its scenarios on import."""
