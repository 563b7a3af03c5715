"""Differential-privacy mechanisms and the privacy accountant, shared by the DP wrappers and the agents."""
