"""Wrappers around the environments: differential privacy on outgoing messages and fault injection.

The DP mechanisms, the privacy accountant and the fault wrappers are built on the channel's
message schema (:class:`fedbandit_envs.channel.Message`); see the project's issues for the roadmap.
"""
